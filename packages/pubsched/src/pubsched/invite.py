"""Invitations: one email that hands a tender their personal links (the form's and the
calendar feed's, from :mod:`pubsched.links`), so the operator need not copy them by hand.

An invitation is idempotent for the tender: it carries the links they have now (the same
links, and the same Message-ID, every time until a revoke), so sending it again does no
harm. That is why a run keeps no state of its own: ``invite --all`` mails every active
tender once per run (one invocation), a recipient the mail server refuses is reported and
the others are still mailed, and running it again mails them all again, the failed ones
included. Inactive tenders are never invited: their links would not work.

Each message handed over is logged in ``pub_mail_log`` (kind ``invite`` when the server
accepted it, ``invite:refused`` or ``invite:unknown`` when not; no week), as the schedule
email is, so ``/metrics`` counts the failures. The messages go through ``pub.mailer``'s
sessions, one session per run, so rehearsal (every message to the operator) applies here
too.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlsplit

from . import links
from .mail.compose import Outgoing, Recipient, compose_invite
from .mail.mailer import Delivery, MailSession
from .mail_log import log_mail
from .pub import Pub, utc
from .tenders import Tender, all_tenders, get
from .verdicts import BadInput, Verdict

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
    at = utc(now)
    with pub.mailer.session() as mail:
        problem = _send(pub, mail, tender, base_url, at)
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
    at = utc(now)
    people = all_tenders(pub, active_only=True)
    if not people:
        return Verdict(False, "NO_ACTIVE_TENDERS",
                       message="there is no active tender to invite: add one first")
    sent: list[str] = []
    failed: list[str] = []
    done: set[int] = set()
    with pub.mailer.session() as mail:
        for tender in people:
            if tender.id in done:  # pragma: no cover - ids are unique; a run never mails twice
                continue
            done.add(tender.id)
            problem = _send(pub, mail, tender, base_url, at)
            if problem is None:
                sent.append(tender.email)
            else:
                failed.append(f"{tender.email}: {problem}")
    detail = {"sent": sent, "failed": [f.partition(": ")[0] for f in failed]}
    if failed:
        named = "; ".join(failed[:3]) + (f"; and {len(failed) - 3} more"
                                         if len(failed) > 3 else "")
        return Verdict(False, failed=named, detail=detail,
                       message=f"{len(failed)} of {len(people)} invitation(s) not sent "
                               f"({named}); the other {len(sent)} were sent. Run it again "
                               "to retry: everyone is mailed again, which does no harm")
    return Verdict(True, message=f"Invitations sent to {len(sent)} tender(s)", detail=detail)


def _send(pub: Pub, mail: MailSession, tender: Tender, base_url: str | None,
          now: datetime) -> str | None:
    """Compose and hand over one invitation; None when the server accepted it, else why
    not, in the operator's words."""
    outgoing = _composed(pub, tender, base_url, now)
    if isinstance(outgoing, str):
        return outgoing
    outcome = mail.send(outgoing)
    if outcome.delivery is Delivery.DELIVERED:
        log_mail(pub, None, KIND, outgoing, now)
        return None
    if outcome.reached:  # the server refused it, or its answer was lost: for /metrics
        log_mail(pub, None, f"{KIND}:{outcome.delivery.value}", outgoing, now)
    if outcome.delivery is Delivery.UNKNOWN:
        return (f"the mail server never answered, so they may or may not have it "
                f"({outcome.detail})")
    return f"the mail server refused it ({outcome.detail})"


def _composed(pub: Pub, tender: Tender, base_url: str | None, now: datetime) -> Outgoing | str:
    """The invitation, or why it cannot be addressed (a row stored before the address
    rule fails alone, as at the send)."""
    form = links.tender_url(pub.config, tender.id, tender.link_version, base_url=base_url)
    feed = links.calendar_url(pub.config, tender.id, tender.link_version, base_url=base_url)
    try:
        return compose_invite(Recipient(tender.email, tender.name), form, feed,
                              settings=pub.config.mail, now=now)
    except ValueError as exc:
        return f"cannot be addressed, fix the tender: {exc}"
