"""Owing an email, and reading what is owed: the deliveries' side that every feature uses.

A feature owes an email with :func:`owe` **inside the unit of work that decides it** (a
cover taken and the notes it owes commit together: a crash after the commit loses no email,
the next :func:`~pubsched.deliveries.deliver.deliver` sends it, and a rollback owes none).
At its turn the email is written by the feature's composer (:data:`Composer`) from what is
true then. The row is the mail machine's (:mod:`.machine`); its ``status`` here is the word
a page and the metrics show for its state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..db.instants import instant
from ..mail.compose import Outgoing
from ..pub import Pub
from .machine import DROPPED, OWED, REFUSED, SENT, UNKNOWN

MAX_ATTEMPTS = 5  # a refused email is tried this often in all, then left refused, shown
RETRY_FIRST, RETRY_MOST = timedelta(minutes=1), timedelta(hours=1)
OPERATOR = "operator"  # the recipient of the operator's notes

# the words a page and /metrics show for a row (an OWED row under a live lease is being
# handed over: in flight)
PENDING, IN_FLIGHT, SENT_WORD, FAILED, DROPPED_WORD = (
    "pending", "in_flight", "sent", "failed", "dropped")
STATUS = {OWED: PENDING, SENT: SENT_WORD, REFUSED: FAILED, UNKNOWN: IN_FLIGHT,
          DROPPED: DROPPED_WORD}


def to_tender(tender_id: int) -> str:
    """The ``recipient`` of a tender's email."""
    return f"tender:{int(tender_id)}"


@dataclass(frozen=True)
class Mail:
    """One owed email, as a composer and a page read it."""

    kind: str
    about: str
    recipient: str
    week_of: str | None
    state: str
    attempts: int
    error: str | None
    retry_at: datetime | None = None
    sending: bool = False  # an OWED row under a lease: being handed over now

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.about, self.recipient)

    @property
    def status(self) -> str:
        """The word for its state: pending, in_flight, sent, failed or dropped."""
        return IN_FLIGHT if self.sending and self.state == OWED else STATUS[self.state]

    @property
    def tender_id(self) -> int | None:
        """The tender it is for, or None for the operator."""
        if self.recipient.startswith("tender:"):
            return int(self.recipient.removeprefix("tender:"))
        return None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Mail:
        retry = row.get("retry_at")
        return cls(str(row["kind"]), str(row["about"]), str(row["recipient"]),
                   None if row["week_of"] is None else str(row["week_of"]),
                   str(row["state"]), int(row["attempts"]),
                   None if row["error"] is None else str(row["error"]),
                   None if retry is None else instant(retry),
                   row.get("acting_at") is not None)


class NotSentYet(Exception):
    """A composer's "this cannot be sent now, but can later" (the operator's address is
    not set): the try is refused with this reason, and retried."""


Composer = Callable[[Pub, Mail, datetime], Outgoing | None]
"""Writes an email from what is true at its turn; None: no longer to be sent (dropped)."""


def owe(pub: Pub, kind: str, about: str, recipient: str, *, week_of: str | None,
        now: datetime, facts: Mapping[str, Any] | None = None) -> bool:
    """Owe the email, in the caller's unit of work (``with pub.atomic():``, which the
    create joins); False when it is owed already (sent or not: once per person per
    thing). ``facts``: what its composer needs that is not true any more at its turn (a
    deadline before it moved), kept in the email's first event (:func:`facts_of`)."""
    made = pub.mail.create((kind, about, recipient), columns={"week_of": week_of,
                                                              "owed_at": now},
                           data=dict(facts) if facts else None, by=pub.actor)
    return made.applied


def facts_of(pub: Pub, mail: Mail) -> Mapping[str, Any]:
    """The ``facts`` the email was owed with (empty: none)."""
    for event in pub.mail.history(mail.key):
        return event.data if isinstance(event.data, dict) else {}
    return {}


def retry_wait(attempts: int) -> timedelta:
    """How long an email refused ``attempts`` times waits before its next try."""
    wait: timedelta = RETRY_FIRST * (2 ** max(0, attempts - 1))
    return min(wait, RETRY_MOST)


COLUMNS = "kind, about, recipient, week_of, state, attempts, error, retry_at, acting_at"


def listed(pub: Pub, *, week: str | None = None, about: str | None = None,
           kind: str | None = None, tried: bool = False) -> list[Mail]:
    """The mail of a week, of one thing (``about``) or of one ``kind``, in the order it was
    owed; ``tried``: only mail handed over or being handed over (not what waits its turn)."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("week_of", week), ("about", about), ("kind", kind)):
        if value is not None:
            where.append(f"{column} = %s")
            params.append(value)
    if tried:
        where.append("(attempts > 0 OR acting_at IS NOT NULL)")
    sql = f"SELECT {COLUMNS} FROM pub_mail"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return [Mail.of(r) for r in pub.query(sql + " ORDER BY id", params)]


__all__ = ["FAILED", "IN_FLIGHT", "MAX_ATTEMPTS", "OPERATOR", "PENDING", "Composer", "Mail",
           "NotSentYet", "facts_of", "listed", "owe", "retry_wait", "to_tender"]
