"""The notices outbox: every email that follows a move or a time, delivered once.

A cover offered, taken or expired, and every reminder, is first a row of ``pub_notices``
(migration 0044), written by :func:`enqueue` **in the unit of work that decided it**: a
cover's take and the emails it owes commit together, so a crash after the commit loses no
email (the next :func:`deliver`, at the latest the next tick, sends it) and a rollback
sends none. The row is unique per ``(kind, about, recipient)``, so "once per person per
thing" is the database's promise: a second enqueue of the same notice, by a racing tick or
a retried command, writes nothing.

:func:`deliver` sends what is due, each notice as the schedule email's delivery records do
(:mod:`pubsched.send`, :mod:`pubsched.mail.mailer`):

1. **claimed** by a compare-and-set (``pending`` or ``failed`` -> ``in_flight`` with a
   fresh ``claim_token``), committed before the handover: of two ticks at once, one
   claims and sends, the other skips it;
2. **composed** at its turn, from what is true then (a composer returning None drops it:
   an offer of a cover already taken is not sent, ``dropped``);
3. handed to SMTP once, then ``sent``; ``failed`` when certainly not delivered: retried
   by a later deliver once its wait is over (:func:`retry_wait`: a minute, then two,
   four..., so a server refusing for a while is not hammered by every ticker at once),
   up to :data:`MAX_ATTEMPTS` tries in all; left ``in_flight`` when its fate is unknown
   (the connection lost after the data, a crash between the claim and the answer):
   possibly delivered, so never sent again on its own.

The claim compares the number of tries too: of several delivers that read the same
failed notice, the first claims it and the others find it tried already (one try per
turn, however many tickers run).

The finishing write names the claim token, so only the claimer finishes its claim.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import rowstate

from .mail.compose import Outgoing
from .mail.mailer import Delivery, MailSession
from .mail_log import log_mail
from .pub import Pub, Verdict
from .weeks import instant

log = logging.getLogger("pubsched.notices")

PENDING, IN_FLIGHT, SENT, FAILED, DROPPED = "pending", "in_flight", "sent", "failed", "dropped"
MAX_ATTEMPTS = 5  # a refused notice is tried this often in all, then left failed, shown
RETRY_FIRST, RETRY_MOST = timedelta(minutes=1), timedelta(hours=1)
OPERATOR = "operator"  # the recipient of the operator's notices


def to_tender(tender_id: int) -> str:
    """The ``recipient`` of a tender's notice."""
    return f"tender:{int(tender_id)}"


@dataclass(frozen=True)
class Notice:
    """One row of the outbox, as a composer and a page read it."""

    id: int
    kind: str
    about: str
    recipient: str
    week_of: str | None
    status: str
    attempts: int
    error: str | None

    @property
    def tender_id(self) -> int | None:
        """The tender it is for, or None for the operator."""
        if self.recipient.startswith("tender:"):
            return int(self.recipient.removeprefix("tender:"))
        return None


class NotSentYet(Exception):
    """A composer's "this cannot be sent now, but can later" (the operator's address is
    not set): the notice is marked failed with this reason, and retried."""


Composer = Callable[[Pub, Notice, datetime], Outgoing | None]
"""Builds a notice's message from what is true at its turn; None: no longer to be sent."""


def enqueue(tx: rowstate.Unit, kind: str, about: str, recipient: str, *,
            week_of: str | None, now: datetime) -> bool:
    """Owe the notice, in the caller's unit of work; False when it is owed already (sent
    or not: once per person per thing)."""
    rows = tx.execute(
        "INSERT INTO pub_notices (kind, about, recipient, week_of, status, created_at) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (kind, about, recipient) DO NOTHING "
        "RETURNING id", [kind, about, recipient, week_of, PENDING, now])
    return bool(rows)


def _notice(row: Mapping[str, Any]) -> Notice:
    return Notice(int(row["id"]), str(row["kind"]), str(row["about"]), str(row["recipient"]),
                  None if row["week_of"] is None else str(row["week_of"]),
                  str(row["status"]), int(row["attempts"]),
                  None if row["error"] is None else str(row["error"]))


COLUMNS = "id, kind, about, recipient, week_of, status, attempts, error"


def retry_wait(attempts: int) -> timedelta:
    """How long a notice refused ``attempts`` times waits before its next try."""
    wait: timedelta = RETRY_FIRST * (2 ** max(0, attempts - 1))
    return min(wait, RETRY_MOST)


def due(pub: Pub, kinds: Iterable[str], now: datetime, *, limit: int = 100) -> list[Notice]:
    """Notices of ``kinds`` waiting for a try at ``now`` (never tried, or refused and
    their wait over), oldest first."""
    wanted = sorted(set(kinds))
    if not wanted:
        return []
    marks = ", ".join(["%s"] * len(wanted))
    rows = pub.query(f"SELECT {COLUMNS}, attempted_at FROM pub_notices WHERE status IN "
                     f"(%s, %s) AND attempts < %s AND kind IN ({marks}) ORDER BY id LIMIT %s",
                     [PENDING, FAILED, MAX_ATTEMPTS, *wanted, limit])
    return [_notice(r) for r in rows if r["status"] == PENDING
            or instant(r["attempted_at"]) + retry_wait(int(r["attempts"])) <= now]


def listed(pub: Pub, *, week: str | None = None, about: str | None = None) -> list[Notice]:
    """The outbox of a week or of one thing (``about``), in the order they were owed."""
    where: list[str] = []
    params: list[Any] = []
    if week is not None:
        where.append("week_of = %s")
        params.append(week)
    if about is not None:
        where.append("about = %s")
        params.append(about)
    sql = f"SELECT {COLUMNS} FROM pub_notices"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return [_notice(r) for r in pub.query(sql + " ORDER BY id", params)]


def _claim(pub: Pub, notice: Notice, now: datetime) -> int | None:
    token = secrets.randbits(62)
    with pub.atomic() as tx:
        won = tx.execute("UPDATE pub_notices SET status = %s, claim_token = %s, "
                         "attempts = attempts + 1, attempted_at = %s "
                         "WHERE id = %s AND status IN (%s, %s) AND attempts = %s "
                         "RETURNING id",
                         [IN_FLIGHT, token, now, notice.id, PENDING, FAILED, notice.attempts])
    return token if won else None


def _finish(pub: Pub, notice: Notice, token: int, status: str, now: datetime,
            error: str | None = None) -> None:
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_notices SET status = %s, error = %s, sent_at = %s "
                   "WHERE id = %s AND claim_token = %s",
                   [status, error, now if status == SENT else None, notice.id, token])


def deliver(pub: Pub, composers: Mapping[str, Composer], now: datetime, *,
            limit: int = 100) -> list[Verdict]:
    """Send every notice of the ``composers``' kinds that is waiting (module docstring);
    one verdict per notice tried: applied (sent or dropped), or ``failed`` with why."""
    out: list[Verdict] = []
    with contextlib.ExitStack() as opened:
        session: MailSession | None = None  # opened at the first message, if any
        for notice in due(pub, composers, now, limit=limit):
            token = _claim(pub, notice, now)
            if token is None:  # another deliver has it
                continue
            what = f"{notice.kind} {notice.about} to {notice.recipient}"
            try:
                outgoing = composers[notice.kind](pub, notice, now)
            except NotSentYet as exc:
                _finish(pub, notice, token, FAILED, now, str(exc))
                out.append(Verdict(False, failed=str(exc), message=f"{what}: {exc}"))
                continue
            except Exception as exc:  # a composer's bug must not stop the others' mail
                log.exception("composing %s failed", what)
                _finish(pub, notice, token, FAILED, now, f"could not be written: {exc}")
                out.append(Verdict(False, failed=str(exc), message=f"{what}: {exc}"))
                continue
            if outgoing is None:
                _finish(pub, notice, token, DROPPED, now)
                out.append(Verdict(True, message=f"{what}: no longer needed"))
                continue
            if session is None:
                session = opened.enter_context(pub.mailer.session())
            outcome = session.send(outgoing)
            log_mail(pub, notice.week_of, f"{notice.kind}:{outcome.delivery.value}",
                     outgoing, now)
            if outcome.delivery is Delivery.DELIVERED:
                _finish(pub, notice, token, SENT, now)
                out.append(Verdict(True, message=f"{what}: sent"))
            elif outcome.delivery is Delivery.REFUSED:
                _finish(pub, notice, token, FAILED, now, outcome.detail)
                out.append(Verdict(False, failed=outcome.detail,
                                   message=f"{what}: not delivered: {outcome.detail}"))
            else:  # unknown: possibly delivered, so it stays in flight and is not re-sent
                _finish(pub, notice, token, IN_FLIGHT, now, outcome.detail)
                out.append(Verdict(False, failed=outcome.detail,
                                   message=f"{what}: may not have arrived: {outcome.detail}",
                                   detail={"delivery": outcome.delivery}))
    return out


__all__ = ["COLUMNS", "DROPPED", "FAILED", "IN_FLIGHT", "MAX_ATTEMPTS", "OPERATOR", "PENDING",
           "SENT", "Composer", "NotSentYet", "Notice", "deliver", "due", "enqueue", "listed",
           "retry_wait", "to_tender"]
