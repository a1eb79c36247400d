"""Time off, read: who is away on which local dates (``pub_time_off``, migration 0043).

One rule, asked three ways by three features that must agree: the picker never picks an
away tender for a night, a cover is not offered to one, a reminder does not reach one. A
shift belongs to the local date it starts on (``pub_shifts.night``), so a tender away on
Friday is away for Friday night's shift, even after midnight. Spans are inclusive ISO
dates, which order as text exactly as they do as dates: the SQL test and the Python test
below are the same comparison.

Writing spans (``tender away``/``tender back`` and their refusals) is
:mod:`pubsched.people.away`'s job; this module only reads, so every reader shares it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any

from ..pub import Pub


@dataclass(frozen=True)
class Span:
    """One stretch of time off: ``starts_on`` to ``ends_on``, both days included."""

    tender_id: int
    starts_on: date
    ends_on: date

    def covers(self, day: date) -> bool:
        return self.starts_on <= day <= self.ends_on


def away_clause(tender: str, night: str) -> str:
    """An SQL condition, true when the tender whose id is the expression ``tender`` is
    away on the ISO date the expression ``night`` gives (both column expressions of the
    caller's query, e.g. ``away_clause("t.id", "s.night")``)."""
    return (f"EXISTS (SELECT 1 FROM pub_time_off o WHERE o.tender_id = {tender} "
            f"AND {night} BETWEEN o.starts_on AND o.ends_on)")


def _span(row: dict[str, Any]) -> Span:
    return Span(int(row["tender_id"]), date.fromisoformat(str(row["starts_on"])),
                date.fromisoformat(str(row["ends_on"])))


def spans(pub: Pub, tender_id: int | None = None, *, until: date | None = None,
          since: date | None = None) -> list[Span]:
    """The spans of one tender (or of everyone), in date order; ``since``/``until`` keep
    those that reach into that window (one ending on ``since`` is kept). None on a
    database at the legacy schema (before 0043), which the legacy engine still runs on."""
    if not pub.schema.time_off:
        return []
    where: list[str] = []
    params: list[Any] = []
    if tender_id is not None:
        where.append("tender_id = %s")
        params.append(tender_id)
    if since is not None:
        where.append("ends_on >= %s")
        params.append(since.isoformat())
    if until is not None:
        where.append("starts_on <= %s")
        params.append(until.isoformat())
    sql = "SELECT tender_id, starts_on, ends_on FROM pub_time_off"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return [_span(r) for r in pub.query(sql + " ORDER BY tender_id, starts_on", params)]


def away_on(pub: Pub, days: Iterable[date]) -> dict[date, frozenset[int]]:
    """For each of ``days``: the ids of the tenders away that day (one read for all)."""
    wanted = sorted(set(days))
    if not wanted:
        return {}
    found = spans(pub, since=wanted[0], until=wanted[-1])
    return {day: frozenset(s.tender_id for s in found if s.covers(day)) for day in wanted}


__all__ = ["Span", "away_clause", "away_on", "spans"]
