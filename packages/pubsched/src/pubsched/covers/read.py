"""Reading cover requests: one :class:`Cover` per row of ``pub_covers``, with the shift and
the two people named, as the CLI, the pages and the emails show it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from ..db.instants import instant, maybe_instant
from ..mail.wording import shift_in_zone, shift_text
from ..pub import Pub
from ..verdicts import BadInput
from ..week.runs import week_key

_SELECT = (
    "SELECT c.id, c.week_of, c.shift_id, c.asked_by, c.note, c.state, c.taken_by, "
    "c.asked_at, c.taken_at, c.closed_at, c.starts_at, s.label, s.ends_at, "
    "a.name AS asker_name, a.email AS asker_email, a.active AS asker_active, "
    "t.name AS taker_name, t.email AS taker_email "
    "FROM pub_covers c JOIN pub_shifts s ON s.id = c.shift_id "
    "JOIN pub_tenders a ON a.id = c.asked_by LEFT JOIN pub_tenders t ON t.id = c.taken_by"
)


@dataclass(frozen=True)
class Cover:
    """One cover request. ``state`` is the machine's (OPEN, TAKEN, CANCELLED, EXPIRED;
    :data:`pubsched.words.COVER_STATE_LABELS` says them); ``taken_*`` are None until
    taken; instants are aware UTC."""

    id: int
    week_of: str
    shift_id: int
    label: str
    starts_at: datetime
    ends_at: datetime
    asked_by: int
    asker_name: str
    asker_email: str
    note: str | None
    state: str
    taken_by: int | None
    taker_name: str | None
    taker_email: str | None
    asked_at: datetime
    taken_at: datetime | None
    closed_at: datetime | None = None
    asker_active: bool = True  # False: deactivated, and taken off the shift as they left

    @classmethod
    def of(cls, row: dict[str, Any]) -> Cover:
        return cls(
            int(row["id"]), str(row["week_of"]), int(row["shift_id"]), str(row["label"]),
            instant(row["starts_at"]), instant(row["ends_at"]), int(row["asked_by"]),
            str(row["asker_name"]), str(row["asker_email"]),
            None if row["note"] is None else str(row["note"]), str(row["state"]),
            None if row["taken_by"] is None else int(row["taken_by"]),
            None if row["taker_name"] is None else str(row["taker_name"]),
            None if row["taker_email"] is None else str(row["taker_email"]),
            instant(row["asked_at"]), maybe_instant(row["taken_at"]),
            maybe_instant(row["closed_at"]), bool(row["asker_active"]))

    def shift_text(self, tz: ZoneInfo | str) -> str:
        """``Thu 10 Dec, 18:00 - 02:00 (Friday night)``: the shift as emails say it."""
        return shift_text(self.label, self.starts_at, self.ends_at, tz)

    def when(self, tz: ZoneInfo | str) -> str:
        """The shift with its zone: ``Thu 10 Dec, 18:00 - 02:00, New York time (EST)``."""
        return shift_in_zone(self.label, self.starts_at, self.ends_at, tz)

    def as_json(self) -> dict[str, Any]:
        """``cover list --json``'s shape (docs/cli.md): the people by email."""
        return {"id": self.id, "week_of": self.week_of, "shift_id": self.shift_id,
                "from": self.asker_email, "state": self.state,
                "taken_by": self.taker_email, "note": self.note}


def check_id(cover_id: object) -> int:
    """A request's number, or :class:`BadInput`."""
    if isinstance(cover_id, bool) or not isinstance(cover_id, int) or not 0 < cover_id < 2**63:
        raise BadInput(f"a cover request is named by its number, got {cover_id!r}")
    return cover_id


def get(pub: Pub, cover_id: int) -> Cover | None:
    rows = pub.query(f"{_SELECT} WHERE c.id = %s", [check_id(cover_id)])
    return Cover.of(rows[0]) if rows else None


def existing(pub: Pub, cover_id: int) -> Cover:
    """The request, or :class:`BadInput` naming the number."""
    found = get(pub, cover_id)
    if found is None:
        raise BadInput(f"no cover request {cover_id}")
    return found


def listed(pub: Pub, week: str | None = None) -> list[Cover]:
    """Every request (of ``week``), in the order they were asked."""
    if week is None:
        rows = pub.query(f"{_SELECT} ORDER BY c.id")
    else:
        rows = pub.query(f"{_SELECT} WHERE c.week_of = %s ORDER BY c.id", [week_key(week)])
    return [Cover.of(r) for r in rows]


__all__ = ["Cover", "check_id", "existing", "get", "listed"]
