"""Sending what is owed: every owed email of the given kinds, each once, through the mail
machine's lease (:mod:`.machine`). The one place that hands owed mail to the mailer.

One :func:`deliver` pass, safe with any number of tickers and commands at once:

1. **what waited is owed again**: refused emails whose wait is over move back to OWED (the
   timed edge ``retry``, through ``fire_due``: of several passes, one moves each);
2. **a send that stopped mid-way is of unknown fate**: an OWED row whose lease expired (its
   sender died between the claim and the answer) may have been delivered, so it ends
   UNKNOWN, never re-sent on its own (``lose``);
3. **each owed email is claimed, composed, handed over, finished**: the claim (``send``,
   only on a row with no lease at all) commits before anything is composed, so of two
   passes one sends it; the composer writes it from what is true now (None: ``drop``); the
   mailer hands it over once; the finalize names the outcome (``send``, ``refuse`` with
   the next try's time, ``lose``) and presents the lease's token, so a sender whose lease
   was swept in step 2 finishes nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from rowstate import LeaseClaim

from ..mail.compose import Outgoing
from ..mail.mailer import Delivery, MailSession
from ..mail_log import log_mail
from ..pub import Pub, utc
from ..verdicts import Verdict
from .machine import DROPPED, LEASE_KIND, OWED, REFUSED, UNKNOWN
from .outbox import MAX_ATTEMPTS, Composer, Mail, NotSentYet, retry_wait

log = logging.getLogger("pubsched.deliveries")

MAX_PASS = 100  # emails one pass sends at most (the next pass, the next tick, sends more)


def deliver(pub: Pub, composers: Mapping[str, Composer], now: datetime, *,
            limit: int = MAX_PASS) -> list[Verdict]:
    """Send every owed email of the ``composers``' kinds (module docstring); one verdict
    per email tried: applied (sent, or dropped as no longer true), or not, with ``reason``
    the state it ended in (REFUSED: tried again later; UNKNOWN: not re-sent on its own)."""
    at = utc(now)
    kinds = sorted(composers)
    if not kinds:
        return []
    pub.mail.fire_due(now=at, by=pub.actor)
    out = _lost(pub, kinds, at, limit)
    with contextlib.ExitStack() as opened:
        session: MailSession | None = None  # opened at the first message, if any
        for key in _owed(pub, kinds, limit):
            claim = pub.mail.claim(key, "send", guards={"acting_at": None}, by=pub.actor)
            if not claim.claimed:  # another pass has it
                continue
            assert claim.row is not None
            mail = Mail.of(claim.row)
            outgoing = _composed(pub, composers[mail.kind], mail, claim, at, out)
            if outgoing is None:
                continue
            if session is None:
                session = opened.enter_context(pub.mailer.session())
            out.append(_handed_over(pub, session, mail, claim, outgoing, at))
    return out


def _owed(pub: Pub, kinds: list[str], limit: int) -> list[tuple[str, str, str]]:
    """The keys of the owed emails of ``kinds`` that no sender holds, in the order they
    were owed (an offer before the operator's note of the same ask)."""
    marks = ", ".join(["%s"] * len(kinds))
    rows = pub.query(f"SELECT kind, about, recipient FROM pub_mail WHERE state = %s "
                     f"AND acting_at IS NULL AND kind IN ({marks}) ORDER BY id LIMIT %s",
                     [OWED, *kinds, limit])
    return [(str(r["kind"]), str(r["about"]), str(r["recipient"])) for r in rows]


def _what(mail: Mail) -> str:
    return f"{mail.kind} {mail.about} to {mail.recipient}"


def _composed(pub: Pub, composer: Composer, mail: Mail, claim: LeaseClaim, at: datetime,
              out: list[Verdict]) -> Outgoing | None:
    """The message, or None when the try ended here (dropped, or refused: not ready, or a
    composer's bug, which must not stop the others' mail)."""
    try:
        outgoing = composer(pub, mail, at)
    except NotSentYet as exc:
        out.append(_refused(pub, mail, claim, at, str(exc)))
        return None
    except Exception as exc:
        log.exception("composing %s failed", _what(mail))
        out.append(_refused(pub, mail, claim, at, f"could not be written: {exc}"))
        return None
    if outgoing is None:
        done = _finish(pub, mail, claim, DROPPED, {"attempts": mail.attempts + 1})
        out.append(done or Verdict(True, message=f"{_what(mail)}: no longer needed"))
    return outgoing


def _handed_over(pub: Pub, session: MailSession, mail: Mail, claim: LeaseClaim,
                 outgoing: Outgoing, at: datetime) -> Verdict:
    outcome = session.send(outgoing)
    log_mail(pub, mail.week_of, f"{mail.kind}:{outcome.delivery.value}", outgoing, at)
    tries = mail.attempts + 1
    handed = {"attempts": tries, "address": outgoing.envelope_to,
              "subject": str(outgoing.message["Subject"])}
    what = _what(mail)
    if outcome.delivery is Delivery.DELIVERED:
        lost = _finish(pub, mail, claim, None, {**handed, "sent_at": at, "error": None})
        return lost or Verdict(True, message=f"{what}: sent")
    if outcome.delivery is Delivery.REFUSED:
        return _refused(pub, mail, claim, at, outcome.detail, handed)
    # unknown: possibly delivered, so it is not sent again on its own
    lost = _finish(pub, mail, claim, UNKNOWN, {**handed, "error": outcome.detail})
    return lost or Verdict(False, UNKNOWN, failed=outcome.detail,
                           message=f"{what}: may not have arrived: {outcome.detail}")


def _refused(pub: Pub, mail: Mail, claim: LeaseClaim, at: datetime, why: str,
             handed: Mapping[str, Any] | None = None) -> Verdict:
    """Refused this time: tried again after its wait while tries are left."""
    tries = mail.attempts + 1
    retry = at + retry_wait(tries) if tries < MAX_ATTEMPTS else None
    payload = {**(handed or {}), "attempts": tries, "error": why[:2000], "retry_at": retry}
    lost = _finish(pub, mail, claim, REFUSED, payload)
    return lost or Verdict(False, REFUSED, failed=why,
                           message=f"{_what(mail)}: not delivered: {why}")


def _finish(pub: Pub, mail: Mail, claim: LeaseClaim, to: str | None,
            payload: Mapping[str, Any]) -> Verdict | None:
    """The claimed send finished through the outcome ``to`` (None: sent); a verdict only
    when it could not be (the lease was swept meanwhile: its row says UNKNOWN)."""
    done = pub.mail.finalize(mail.key, claim, to=to, payload=payload)
    if done.applied:
        return None
    return Verdict(False, done.reason, failed="the send took longer than its lease",
                   message=f"{_what(mail)}: the send took too long to be recorded; it may "
                           "have arrived")


def _lost(pub: Pub, kinds: Iterable[str], at: datetime, limit: int) -> list[Verdict]:
    """Sends whose sender stopped mid-way (a lease expired on an OWED row) end UNKNOWN: the
    claim takes only an expired lease (the engine's rule), so a live sender keeps its."""
    out = []
    for row in pub.mail.find(state=OWED, where={"kind": list(kinds),
                                                "acting_kind": LEASE_KIND}, limit=limit):
        key = (row["kind"], row["about"], row["recipient"])
        claim = pub.mail.claim(key, "send", by=pub.actor)
        if not claim.claimed:
            continue
        why = "the sender stopped before the mail server answered"
        mail = Mail.of(row)
        done = pub.mail.finalize(key, claim, to=UNKNOWN,
                                 payload={"attempts": mail.attempts + 1, "error": why})
        if done.applied:
            out.append(Verdict(False, UNKNOWN, failed=why,
                               message=f"{_what(mail)}: may not have arrived: {why}"))
    return out


__all__ = ["MAX_PASS", "deliver"]
