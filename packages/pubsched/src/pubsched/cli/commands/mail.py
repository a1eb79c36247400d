"""``pubsched mail unknown|resend``: mail of unknown fate (:mod:`pubsched.deliveries.resend`).

``unknown`` lists every email whose handover began and got no answer (it may have
arrived: nothing sends it again on its own), of every kind; ``resend ID`` is the
operator's choice to send one of them again now (the recipient may get it twice; never
more for one resend, even with another resend or a tick at the same moment). Exit 0
applied, 1 the mail server refused it or did not answer again, 2 no such email, 3 refused
(delivered already, waiting its turn, or being sent right now).
"""

from __future__ import annotations

import argparse

from ..context import Context, report
from ..output import listing


def cmd_mail_unknown(ctx: Context, args: argparse.Namespace) -> int:
    from ...deliveries.resend import unknown
    from ...mail.wording import zone_words

    pub = ctx.pub()
    found = unknown(pub)
    tz = pub.config.tz
    code = listing(ctx, args.json, [m.as_json() for m in found],
                   "no email of unknown fate: every email was delivered, refused, or waits "
                   "its turn", ("id", "what", "to", "owed"),
                   lambda m: (str(m["id"]), m["what"], _to(m), _local(m["owed_at"], tz)))
    if found and not args.json:
        ctx.say(f"Times are {zone_words(tz, [m.owed_at for m in found])}. Each may have "
                "arrived; `pubsched mail resend ID` sends one again (--json: each one's "
                "subject and what went wrong).")
    return code


def _to(m: dict[str, object]) -> str:
    who = m["to_name"] or "the operator"
    return f"{who} <{m['to']}>" if m["to"] else str(who)


def _local(iso: object, tz: object) -> str:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    assert isinstance(tz, ZoneInfo)
    return f"{datetime.fromisoformat(str(iso)).astimezone(tz):%a %d %b %H:%M}"


def cmd_mail_resend(ctx: Context, args: argparse.Namespace) -> int:
    from ...deliveries.resend import resend
    from ...tick.run import EVERY_COMPOSER

    pub = ctx.pub()
    return report(ctx, resend(pub, args.mail_id, EVERY_COMPOSER, ctx.now))


__all__ = ["cmd_mail_resend", "cmd_mail_unknown"]
