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

**When the database stops answering mid-send** (a PostgreSQL cluster's failover: 10-20 s
with no primary; docs/scale.md), the sender knows what the database cannot: whether the
message went. So it waits for the database rather than leave the row to its lease:

* **after the mail server answered** (the message accepted, refused, or no answer), the
  finish is tried again until it lands, for as long as the lease may still be the sender's
  (:data:`~.machine.SEND_TTL`, :data:`FINISH_PATIENCE`). That is safe because the finish is
  fenced by the claim's token and conditioned on OWED: it lands once, and is refused if the
  lease was swept meanwhile. A try whose COMMIT got no answer (``OutcomeUnknown``) is read
  back (``resolve``) before the next, so a finish that landed is not mistaken for a refusal.
  An email accepted by the server therefore ends SENT, not UNKNOWN, unless the database
  stays away longer than the lease; nothing is handed over again in any case;
* **before the message's data** (the handover mark could not be committed): nothing was
  handed over, so the claim is given back (the mark cleared, the lease released, fenced by
  the claim, with the same patience) and the error raised: the pass stops, and the next
  pass, or the schedule's next send, sends it;
* **a claim whose COMMIT got no answer** may hold the row with a token nobody knows: it is
  left to its lease, after which the sweep above owes it again (no mark), 10 minutes late.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

from rowstate import (
    ConnectError,
    ConnectionLostError,
    LeaseClaim,
    OutcomeUnknown,
    StatementCancelled,
    Unit,
)

from ..mail.compose import Outgoing
from ..mail.mailer import Delivery, HandingOver, MailSession, Outcome
from ..pub import Pub, utc
from ..verdicts import Verdict
from .machine import DROPPED, LEASE_KIND, OWED, REFUSED, SEND_TTL, SENT, UNKNOWN
from .outbox import MAX_ATTEMPTS, Composer, Mail, NotSentYet, retry_wait

log = logging.getLogger("pubsched.deliveries")

MAX_PASS = 100  # emails one pass sends at most (the next pass, the next tick, sends more)

#: the database did not answer (no connection, the connection lost, the statement
#: cancelled): nothing was decided, so a fenced write may be tried again
UNANSWERED = (ConnectError, ConnectionLostError, StatementCancelled)
#: seconds a sender waits for the database to record what the mail server did: as long as
#: the lease may be its own (a finish after that is refused anyway)
FINISH_PATIENCE = SEND_TTL
RETRY_EVERY = 0.5  # seconds between tries (each may itself wait for a connection)

T = TypeVar("T")


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
        try:
            outcome = self.hand_over(outgoing, lambda: self._mark(mail, claim))
        except UNANSWERED:  # the mark: the mailer stopped before the message's data
            self._give_back(mail, claim)
            raise
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
        swept meanwhile: its row says UNKNOWN). Tried again while the database does not
        answer (the module docstring)."""
        cut = False  # a try's COMMIT got no answer: it may have landed

        def attempt() -> tuple[bool, str | None]:  # (landed, why not)
            nonlocal cut
            if cut and self.pub.mail.resolve(
                    mail.key, SENT if to is None else to, from_=OWED, by=self.pub.actor,
                    since=int((claim.row or {}).get("version") or 0)).applied:
                return True, None
            # a side effect's finish must land: no caller's fence (the flag's) stops it
            try:
                with self.pub.fenced(None), self.pub.atomic() as tx:
                    done = self.pub.mail.finalize(mail.key, claim, to=to, payload=payload,
                                                  by=self.pub.actor,
                                                  data=dict(logged) if logged else None,
                                                  note=payload.get("error"))
                    if done.applied:
                        _unmark(self.pub, tx, mail.key)
            except OutcomeUnknown:
                cut = True
                raise
            cut = False
            return done.applied, done.reason

        landed, reason = self._patiently(mail, "record what the mail server did", attempt)
        if landed:
            return None
        return Verdict(False, reason, failed="the send took longer than its lease",
                       message=f"{_what(mail)}: the send took too long to be recorded; it "
                               "may have arrived")

    def _give_back(self, mail: Mail, claim: LeaseClaim) -> None:
        """The claim given back with nothing handed over: the mark cleared (it may have
        landed with no answer) and the lease released, in one unit fenced by the claim
        (nothing, when it is not held any more)."""
        def attempt() -> None:
            with self.pub.fenced(None), self.pub.atomic() as tx:
                if tx.fence(claim, lifecycle=self.pub.mail).held:
                    _unmark(self.pub, tx, mail.key)
                    self.pub.mail.release(mail.key, claim,
                                          error="the database did not answer before the "
                                                "message was handed over")

        self._patiently(mail, "give its claim back (nothing was handed over)", attempt)
        log.info("%s: not handed over (the database did not answer): owed again", _what(mail))

    def _patiently(self, mail: Mail, what: str, attempt: Callable[[], T]) -> T:
        """``attempt()``, tried again every :data:`RETRY_EVERY` seconds while the database
        does not answer, for :data:`FINISH_PATIENCE` at most; then its error is raised."""
        give_up = time.monotonic() + FINISH_PATIENCE
        told = False
        while True:
            try:
                return attempt()
            except UNANSWERED as exc:
                if time.monotonic() >= give_up:
                    raise
                if not told:
                    told = True
                    log.warning("%s: the database does not answer (%s): waiting for it to "
                                "%s, for %d s at most", _what(mail), type(exc).__name__,
                                what, FINISH_PATIENCE)
            time.sleep(RETRY_EVERY)


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
