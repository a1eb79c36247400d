"""The small frozen values a message is composed from, each checked when it is made.

The send action and the tick decide *what* to say and hand these over; the composer
(:mod:`.compose`) only decides *how*. A value that could not be written as a message (an
address the one rule refuses, a naive time, an unknown zone, a shift id twice) is a
ValueError here, before any message exists. :mod:`.compose` re-exports them: callers import
from there.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from email.message import EmailMessage
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .addresses import address_problem, name_problem


@dataclass(frozen=True)
class Recipient:
    """Someone a message is for: a tender, or the operator. Built only from an address and a
    name the one rule of :mod:`.addresses` accepts (a ValueError otherwise), so that every
    message composed for it can be written."""

    email: str
    name: str

    def __post_init__(self) -> None:
        problem = address_problem(self.email) or name_problem(self.name)
        if problem is not None:
            raise ValueError(f"recipient {self.name!r}: {problem}")


@dataclass(frozen=True)
class ShiftLine:
    """One shift as the email shows it.

    ``starts_at``/``ends_at`` are the stored UTC instants; ``tz`` is the IANA zone they are
    shown in (the pub's local time); ``assigned`` are the names of who works it, in roster
    order (empty: nobody); ``slots`` how many it needs (None: not said, so no slot is
    reported open). ``label`` is the stored one: the email writes the times itself and
    shows the label only when it says more (:mod:`.wording`).
    """

    id: int | str
    label: str
    starts_at: datetime
    ends_at: datetime
    tz: str
    assigned: tuple[str, ...] = ()
    slots: int | None = None

    def __post_init__(self) -> None:
        for name in ("starts_at", "ends_at"):
            moment: datetime = getattr(self, name)
            if moment.tzinfo is None or moment.utcoffset() != timedelta(0):
                raise ValueError(f"shift {self.id!r}: {name} must be an aware UTC datetime")
        if self.ends_at <= self.starts_at:
            raise ValueError(f"shift {self.id!r}: ends_at must be after starts_at")
        try:
            ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"shift {self.id!r}: unknown time zone {self.tz!r}") from None
        if self.slots is not None and self.slots < 0:
            raise ValueError(f"shift {self.id!r}: slots cannot be negative")

    @property
    def open_slots(self) -> int:
        """Slots nobody fills (0 when ``slots`` is not said)."""
        return 0 if self.slots is None else max(0, self.slots - len(self.assigned))


@dataclass(frozen=True)
class Roster:
    """A week's whole schedule: every shift, with who works it."""

    week_of: date
    shifts: tuple[ShiftLine, ...]

    def __post_init__(self) -> None:
        ids = [shift.id for shift in self.shifts]
        if len(set(ids)) != len(ids):
            raise ValueError(f"roster of {self.week_of}: shift ids repeat: {ids}")


@dataclass(frozen=True)
class TenderLinks:
    """A tender's own links for the email: their page (the form, their shifts), their
    calendar feed over https, and the same feed as a ``webcal://`` subscription (a phone
    offers to subscribe instead of downloading the file once)."""

    page: str
    calendar: str
    webcal: str

    def __post_init__(self) -> None:
        for name in ("page", "calendar"):
            if not getattr(self, name).startswith(("https://", "http://")):
                raise ValueError(f"the {name} link must be an http(s) URL")
        if not self.webcal.startswith("webcal://"):
            raise ValueError("the subscription link must be a webcal:// URL")


@dataclass(frozen=True, eq=False)
class Outgoing:
    """A message ready for the mailer: who it is for, where it goes, and the message.

    ``intended`` is the key of the delivery record; ``envelope_to`` is the one SMTP
    recipient (``intended.email``, or the operator in rehearsal).
    """

    intended: Recipient
    envelope_to: str
    message: EmailMessage
    rehearsal: bool = False


class Nudge(enum.Enum):
    """The operator's heads-up emails of the tick; each fires at most once per run."""

    READY_TO_CLOSE = "ready to close and generate?"
    APPROVED_NOT_SENT = "approved but not sent"
