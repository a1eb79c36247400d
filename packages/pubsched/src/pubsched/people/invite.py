"""Invitations: one email that hands a tender their personal links (the form's and the
calendar feed's, from :mod:`pubsched.people.links`), so the operator need not copy them by hand.

An invitation is idempotent for the tender: it carries the links they have now (the same
links, and the same Message-ID, every time until a revoke), so sending it again does no
harm. Each run (one invocation) owes every tender it names one invitation, mail of the
mail machine (:mod:`pubsched.deliveries`) about that run, and sends them at once: a
recipient the mail server refuses is reported and the others are still mailed, and
running it again mails them all again, the failed ones included. Inactive tenders are
never invited: their links would not work. An invitation owed but not sent when its run
stopped (a crash) is sent by the next tick, unless the tender was invited again since or
is no longer active (dropped). The messages go through ``pub.mailer``'s sessions, so
rehearsal (every message to the operator) applies here too.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import datetime
from urllib.parse import urlsplit

from ..deliveries.deliver import Sender, claim_owed
from ..deliveries.machine import UNKNOWN
from ..deliveries.outbox import Composer, Mail, NotSentYet, facts_of, owe, to_tender
from ..mail.compose import Outgoing, Recipient, compose_invite
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from . import links
from .tenders import Tender, all_tenders, by_id, get

KIND = "invite"


def check_base_url(base_url: str | None) -> str | None:
    """A ``--base-url`` the links can start with (http or https, a host), else BadInput:
    a mistyped one would mail every tender a dead link."""
    if base_url is None:
        return None
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"not a site address (http:// or https:// and a host): {base_url!r}")
    return base_url.strip()


def invite(pub: Pub, email: str, *, base_url: str | None = None,
           now: datetime | None = None) -> Verdict:
    """Mail one tender their links. Unknown: BadInput; inactive: refused
    (TENDER_INACTIVE); the mail server refusing them: failed, with its reply."""
    base_url = check_base_url(base_url)
    tender = get(pub, email)
    if not tender.active:
        return Verdict(False, "TENDER_INACTIVE",
                       message=f"{tender.email} is not active, so their links would not work: "
                               "activate them first")
    (problem,) = _run(pub, [tender], base_url, utc(now)).values()
    if problem is not None:
        return Verdict(False, failed=problem,
                       message=f"the invitation to {tender.email} was not sent: {problem}; "
                               "run the same command again to retry",
                       detail={"sent": [], "failed": [tender.email]})
    return Verdict(True, message=f"Invitation sent to {tender.email}",
                   detail={"sent": [tender.email], "failed": []})


def invite_all(pub: Pub, *, base_url: str | None = None,
               now: datetime | None = None) -> Verdict:
    """Mail every active tender their links, each once, in one session. Applied when all
    were sent; else failed, naming who was not (the rest were sent all the same)."""
    base_url = check_base_url(base_url)
    people = all_tenders(pub, active_only=True)
    if not people:
        return Verdict(False, "NO_ACTIVE_TENDERS",
                       message="there is no active tender to invite: add one first")
    problems = _run(pub, people, base_url, utc(now))
    sent = [t.email for t in people if problems[t.id] is None]
    failed = [f"{t.email}: {problems[t.id]}" for t in people if problems[t.id] is not None]
    detail = {"sent": sent, "failed": [f.partition(": ")[0] for f in failed]}
    if failed:
        named = "; ".join(failed[:3]) + (f"; and {len(failed) - 3} more"
                                         if len(failed) > 3 else "")
        return Verdict(False, failed=named, detail=detail,
                       message=f"{len(failed)} of {len(people)} invitation(s) not sent "
                               f"({named}); the other {len(sent)} were sent. Run it again "
                               "to retry: everyone is mailed again, which does no harm")
    return Verdict(True, message=f"Invitations sent to {len(sent)} tender(s)", detail=detail)


def _run(pub: Pub, people: list[Tender], base_url: str | None,
         at: datetime) -> dict[int, str | None]:
    """One run: an invitation owed to each of ``people`` (in one unit), then each sent; by
    tender id, None when the server accepted it, else why not, in the operator's words."""
    run = f"{at.isoformat()}/{secrets.token_hex(4)}"  # this run's own: a new one each time
    with pub.atomic():
        for tender in people:
            owe(pub, KIND, run, to_tender(tender.id), week_of=None, now=at,
                facts={"base_url": base_url} if base_url else None)
    out: dict[int, str | None] = {}
    with Sender(pub) as sender:
        for tender in people:
            got = claim_owed(pub, (KIND, run, to_tender(tender.id)))
            if isinstance(got, str):  # pragma: no cover - the run's own mail, just owed
                out[tender.id] = f"it was already being sent ({got})"
                continue
            verdict = sender.send(*got, _compose, at, retry=False)
            out[tender.id] = None if verdict.applied else _why(verdict)
    return out


def _why(verdict: Verdict) -> str:
    if verdict.reason == UNKNOWN:
        return (f"the mail server never answered, so they may or may not have it "
                f"({verdict.failed})")
    if str(verdict.failed).startswith(UNADDRESSABLE):
        return str(verdict.failed)
    return f"the mail server refused it ({verdict.failed})"


UNADDRESSABLE = "cannot be addressed"


def _compose(pub: Pub, mail: Mail, at: datetime) -> Outgoing | None:
    """The invitation, or None when no longer wanted (the tender is gone or inactive, or
    was invited again since: that run's invitation carries the same links)."""
    tender = by_id(pub, mail.tender_id or 0) if mail.tender_id is not None else None
    if tender is None or not tender.active:
        return None
    newer = pub.query("SELECT 1 AS x FROM pub_mail WHERE kind = %s AND recipient = %s "
                      "AND id > (SELECT id FROM pub_mail WHERE kind = %s AND about = %s "
                      "AND recipient = %s)", [KIND, mail.recipient, KIND, mail.about,
                                              mail.recipient])
    if newer:
        return None
    base_url = facts_of(pub, mail).get("base_url")
    form = links.tender_url(pub.config, tender.id, tender.link_version, base_url=base_url)
    feed = links.calendar_url(pub.config, tender.id, tender.link_version, base_url=base_url)
    try:
        return compose_invite(Recipient(tender.email, tender.name), form, feed,
                              settings=pub.config.mail, now=at)
    except ValueError as exc:
        raise NotSentYet(f"{UNADDRESSABLE}, fix the tender: {exc}") from exc


COMPOSERS: Mapping[str, Composer] = {KIND: _compose}
