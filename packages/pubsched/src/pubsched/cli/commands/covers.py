"""``pubsched cover ask|take|cancel|list``: cover requests (:mod:`pubsched.covers`).

``ask``, ``take`` and ``cancel`` commit their move with every email it owes, then deliver
those emails at once (so the operator sees them go, one line each); whatever is not
delivered (SMTP down, no operator address) stays owed, and the next ``pubsched tick``
sends it. Exit 0 applied (even when an email is left for the tick: the move stands; a
``warning:`` line on stderr says which), 2 bad input (nothing written), 3 refused with
its reason code and the reason in words.
"""

from __future__ import annotations

import argparse

from ...pub import Pub, utc
from ...verdicts import Verdict
from ..context import EXIT_APPLIED, Context, report
from ..output import listing


def delivered(ctx: Context, pub: Pub, verdict: Verdict) -> int:
    """The move's verdict, then (applied) its emails sent now, in words."""
    from ...covers import deliver
    from ...tick.run import not_delivered

    code = report(ctx, verdict)
    if code != EXIT_APPLIED:
        return code
    for sent in deliver(pub, utc(ctx.now)):
        if not sent.applied:
            ctx.complain(f"warning: {not_delivered(sent)}")
    return code


def cmd_cover_ask(ctx: Context, args: argparse.Namespace) -> int:
    from ...covers import ask

    pub = ctx.pub()
    return delivered(ctx, pub, ask(pub, args.week, args.shift_id, args.email,
                                    note=args.note, now=ctx.now))


def cmd_cover_take(ctx: Context, args: argparse.Namespace) -> int:
    from ...covers import take

    pub = ctx.pub()
    return delivered(ctx, pub, take(pub, args.cover_id, args.email, now=ctx.now))


def cmd_cover_cancel(ctx: Context, args: argparse.Namespace) -> int:
    from ...covers import cancel

    pub = ctx.pub()
    return delivered(ctx, pub, cancel(pub, args.cover_id, now=ctx.now))


def cmd_cover_list(ctx: Context, args: argparse.Namespace) -> int:
    from ...covers import listed
    from ...mail.wording import zone_words
    from ...words import COVER_STATE_LABELS

    pub = ctx.pub()
    found = listed(pub, args.week)
    if args.json or not found:
        return listing(ctx, args.json, [c.as_json() for c in found],
                       "no cover requests" + (f" for the week of {args.week}"
                                              if args.week else ""), (), lambda c: ())
    from rich.table import Table

    tz = pub.config.tz
    table = Table("id", "shift", "from", "state", "taken by", "note", box=None)
    for c in found:
        table.add_row(str(c.id), c.shift_text(tz), c.asker_name,
                      COVER_STATE_LABELS.get(c.state, c.state), c.taker_name or "",
                      c.note or "")
    console = ctx.console()
    console.print(table)
    console.print(f"Times are {zone_words(tz, [c.starts_at for c in found])}.")
    return EXIT_APPLIED


__all__ = ["cmd_cover_ask", "cmd_cover_cancel", "cmd_cover_list", "cmd_cover_take"]
