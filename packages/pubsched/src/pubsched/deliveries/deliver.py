"""Sending what is owed: the one place that hands mail to the mailer.

Every email is a row of the mail machine (:mod:`.machine`), and every send of one goes the
same four steps, here: **claim** (the lease edge ``send``, committed before anything is
composed, so of two senders one sends it), **compose** (the feature's composer writes it
from what is true now; None: ``drop``), **hand over** (once, through one mail session),
**finish** (``finalize`` through the outcome's edge, presenting the lease's token, so a
sender whose lease was swept finishes nothing; the event it writes is the mail log: who,
to which address, the subject, the server's answer).

Who claims differs, and nothing else: :func:`deliver` (the tick's pass over what is owed),
the schedule's send (claimed in units fenced by the week's send lease) and the operator's
resend (:func:`claim_owed`). One :func:`deliver` pass is safe with any number of tickers
and commands at once:

1. **what waited is owed again**: refused emails whose wait is over move back to OWED (the
   timed edge ``retry``, through ``fire_due``: of several passes, one moves each);
2. **a send that stopped mid-way** (:func:`sweep_lost`: an OWED row whose lease expired,
   its sender dead between the claim and the answer) is told apart by the **handover
   mark** (``handover_at``, migration 0055): the sender commits it, in a unit fenced by its
   claim, just before the first byte of the message's data (:mod:`pubsched.mail.mailer`'s
   ``handing_over``), and every finish clears it. No mark: the server never had a byte of
   it, so the lease is given back and the email is sent again like any owed one (this
   pass, or the schedule's next send). A mark: it may have been delivered, so it ends
   UNKNOWN, never re-sent on its own (``lose``); the operator sees it and may resend it
   (:mod:`.resend`). The fence makes the two exclusive: a mark lands before the sweep's
   takeover (which then sees it) or not at all (and the sender hands nothing over);
3. **each owed email is sent** (:meth:`Sender.send`), in the order it was owed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from rowstate import LeaseClaim, Unit

from ..mail.compose import Outgoing
from ..mail.mailer import Delivery, HandingOver, MailSession, Outcome
from ..pub import Pub, utc
from ..verdicts import Verdict
from .machine import DROPPED, LEASE_KIND, OWED, REFUSED, UNKNOWN
from .outbox import MAX_ATTEMPTS, Composer, Mail, NotSentYet, retry_wait

log = logging.getLogger("pubsched.deliveries")

MAX_PASS = 100  # emails one pass sends at most (the next pass, the next tick, sends more)


class Sender:
    """One batch of sends: the mail session is opened at the first message handed over
    (a pass with nothing to send opens no connection) and closed when the batch ends."""

    def __init__(self, pub: Pub) -> None:
        self.pub = pub
        self._opened = contextlib.ExitStack()
        self._session: MailSession | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._opened.close()

    def hand_over(self, outgoing: Outgoing, handing_over: HandingOver | None = None) -> Outcome:
        """Hand one message to the mail server, once (no retry after the data went);
        ``handing_over`` is called just before its data goes (False: it does not)."""
        if self._session is None:
            self._session = self._opened.enter_context(self.pub.mailer.session())
        return self._session.send(outgoing, handing_over)

    def _mark(self, mail: Mail, claim: LeaseClaim) -> bool:
        """The handover mark, committed before the first byte of the message's data, in a
        unit fenced by the claim: False (nothing marked) when the claim was taken over."""
        if not self.pub.schema.handover:  # no mark to keep: every stop counts as handed
            return True
        with self.pub.fenced(None), self.pub.atomic() as tx:  # the claim's fence, alone
            if not tx.fence(claim, lifecycle=self.pub.mail).held:
                return False
            tx.execute(f"UPDATE pub_mail SET handover_at = %s WHERE {_KEY}",
                       [utc(None), *mail.key])
        return True

    def send(self, mail: Mail, claim: LeaseClaim, composer: Composer, at: datetime, *,
             retry: bool = True) -> Verdict:
        """Compose, hand over and finish one claimed email: applied when sent or dropped
        as no longer true; else ``reason`` is the state it ended in (REFUSED: tried again
        after its wait when ``retry`` and tries are left; UNKNOWN: never on its own)."""
        try:
            outgoing = composer(self.pub, mail, at)
        except NotSentYet as exc:
            return self._refused(mail, claim, at, str(exc), retry)
        except Exception as exc:  # a composer's bug must not stop the others' mail
            log.exception("composing %s failed", _what(mail))
            return self._refused(mail, claim, at, f"could not be written: {exc}", retry)
        if outgoing is None:
            done = self._finish(mail, claim, DROPPED, {"attempts": mail.attempts + 1})
            # (a verdict is falsy when not applied: a lost finish is told by None or not)
            if done is not None:
                return done
            return Verdict(True, message=f"{_what(mail)}: no longer needed")
        outcome = self.hand_over(outgoing, lambda: self._mark(mail, claim))
        subject = str(outgoing.message["Subject"])
        handed = {"attempts": mail.attempts + 1, "address": outgoing.envelope_to,
                  "subject": subject}
        # the event's data is the mail log's line, for a server that had the message or
        # answered for it (one that could not be reached was handed nothing)
        logged = {"to": outgoing.envelope_to, "subject": subject} if outcome.reached else {}
        what = _what(mail)
        if outcome.delivery is Delivery.DELIVERED:
            lost = self._finish(mail, claim, None, {**handed, "sent_at": at, "error": None},
                                logged)
            if lost is not None:
                return lost
            return Verdict(True, message=f"{what}: sent")
        if logged:
            logged["answer"] = outcome.detail
        if outcome.delivery is Delivery.REFUSED:
            return self._refused(mail, claim, at, outcome.detail, retry, handed, logged)
        # unknown: possibly delivered, so it is not sent again on its own
        lost = self._finish(mail, claim, UNKNOWN, {**handed, "error": outcome.detail},
                            logged)
        if lost is not None:
            return lost
        return Verdict(False, UNKNOWN, failed=outcome.detail,
                       message=f"{what}: may not have arrived: {outcome.detail}")

    def _refused(self, mail: Mail, claim: LeaseClaim, at: datetime, why: str, retry: bool,
                 handed: Mapping[str, Any] | None = None,
                 logged: Mapping[str, str] | None = None) -> Verdict:
        """Refused this time: tried again after its wait while tries are left (``retry``:
        on its own; else only when its sender asks again)."""
        tries = mail.attempts + 1
        again = at + retry_wait(tries) if retry and tries < MAX_ATTEMPTS else None
        payload = {**(handed or {}), "attempts": tries, "error": why[:2000],
                   "retry_at": again}
        lost = self._finish(mail, claim, REFUSED, payload, logged)
        if lost is not None:
            return lost
        return Verdict(False, REFUSED, failed=why, detail={"retry_at": again},
                       message=f"{_what(mail)}: not delivered: {why}")

    def _finish(self, mail: Mail, claim: LeaseClaim, to: str | None,
                payload: Mapping[str, Any],
                logged: Mapping[str, str] | None = None) -> Verdict | None:
        """The claimed send finished through the outcome ``to`` (None: sent), its event
        carrying what was handed over (``logged``: the address, the subject, the server's
        answer; :mod:`.log` reads it); a verdict only when it could not be (the lease was
        swept meanwhile: its row says UNKNOWN)."""
        # a side effect's finish must land: no caller's fence (the flag's) stops it
        with self.pub.fenced(None), self.pub.atomic() as tx:
            done = self.pub.mail.finalize(mail.key, claim, to=to, payload=payload,
                                          by=self.pub.actor,
                                          data=dict(logged) if logged else None,
                                          note=payload.get("error"))
            if done.applied:
                _unmark(self.pub, tx, mail.key)
        if done.applied:
            return None
        return Verdict(False, done.reason, failed="the send took longer than its lease",
                       message=f"{_what(mail)}: the send took too long to be recorded; it "
                               "may have arrived")


def claim_owed(pub: Pub, key: tuple[str, str, str], *,
               resend: bool = False) -> tuple[Mail, LeaseClaim] | str:
    """Claim one email to send it now, in one unit (joining the caller's, so a fence the
    caller holds fences the claim): a refused one is owed again first (``retry``), and
    with ``resend`` (the operator's explicit choice) one of unknown fate too (``resend``),
    and an OWED one whose sender stopped mid-way is taken over. Otherwise only a free OWED
    row is claimed. The claim, or why not: the state it is in (SENT, UNKNOWN...), or
    ``"sending"`` when a live sender holds it."""
    with pub.atomic():
        row = pub.mail.get(key)
        if row is None:
            return "missing"
        state = str(row["state"])
        if state == REFUSED or (resend and state == UNKNOWN):
            edge = "retry" if state == REFUSED else "resend"
            pub.mail.transition(key, OWED, from_=state, by=pub.actor,
                                note=None if edge == "retry" else "resent by the operator")
        elif state != OWED:
            return state
        guards = None if resend else {"acting_at": None}
        claim = pub.mail.claim(key, "send", guards=guards, by=pub.actor)
        if not claim.claimed:
            return "sending"
        assert claim.row is not None
        return Mail.of(claim.row), claim


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
    out = sweep_lost(pub, kinds, at, limit=limit)
    with Sender(pub) as sender:
        for key in _owed(pub, kinds, limit):
            claim = pub.mail.claim(key, "send", guards={"acting_at": None}, by=pub.actor)
            if not claim.claimed:  # another pass has it
                continue
            assert claim.row is not None
            mail = Mail.of(claim.row)
            out.append(sender.send(mail, claim, composers[mail.kind], at))
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


def sweep_lost(pub: Pub, kinds: Iterable[str], at: datetime, *, about: str | None = None,
               limit: int = MAX_PASS) -> list[Verdict]:
    """Sends whose sender stopped mid-way (a lease expired on an OWED row): with the
    handover mark, UNKNOWN (a verdict each); without it, the lease given back, so the email
    is owed and free to send again (module docstring). Each in one unit with its takeover,
    whose claim takes only an expired lease (the engine's rule): a live sender keeps its."""
    out = []
    where: dict[str, Any] = {"kind": list(kinds), "acting_kind": LEASE_KIND}
    if about is not None:
        where["about"] = about
    for row in pub.mail.find(state=OWED, where=where, limit=limit):
        key = (row["kind"], row["about"], row["recipient"])
        with pub.fenced(None), pub.atomic() as tx:  # as the dead sender's finish would
            claim = pub.mail.claim(key, "send", by=pub.actor)
            if not claim.claimed:
                continue
            assert claim.row is not None
            mail = Mail.of(claim.row)
            if not _marked(pub, tx, key):
                pub.mail.release(key, claim)
                log.info("%s: its sender stopped before the handover: owed again", _what(mail))
                continue
            why = "the sender stopped before the mail server answered"
            done = pub.mail.finalize(key, claim, to=UNKNOWN, by=pub.actor, note=why,
                                     payload={"attempts": mail.attempts + 1, "error": why})
            if done.applied:
                _unmark(pub, tx, key)
                out.append(Verdict(False, UNKNOWN, failed=why,
                                   message=f"{_what(mail)}: may not have arrived: {why}"))
    return out


_KEY = "kind = %s AND about = %s AND recipient = %s"


def _marked(pub: Pub, tx: Unit, key: tuple[str, str, str]) -> bool:
    """Did a handover of this email begin since its last finish? Read after the claim, in
    its unit, so a mark committed before the takeover is seen (the fence orders them). On
    a database without marks (before 0055) every stop counts as handed: it may have been."""
    if not pub.schema.handover:
        return True
    rows = tx.execute(f"SELECT handover_at FROM pub_mail WHERE {_KEY}", list(key))
    return bool(rows) and rows[0]["handover_at"] is not None


def _unmark(pub: Pub, tx: Unit, key: tuple[str, str, str]) -> None:
    """Clear the mark with the finish that settles the handover it was for."""
    if pub.schema.handover:
        tx.execute(f"UPDATE pub_mail SET handover_at = NULL WHERE {_KEY} "
                   "AND handover_at IS NOT NULL", list(key))


__all__ = ["MAX_PASS", "Sender", "claim_owed", "deliver", "sweep_lost"]
