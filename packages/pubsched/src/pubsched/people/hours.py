"""The hours report (``pubsched report hours``): per tender, the shifts worked and their
hours in sent weeks between two dates, for the pub's wages and for seeing who carries the
load.

What counts: an assignment of a week that was sent (the schedule the tenders were told),
as it stands now (a cover request that moves a shift moves its assignment, so the report
follows it). A shift belongs to the local date of its night (``pub_shifts.night``: a shift
crossing midnight is counted once, on the day it starts), and the dates are inclusive.
Its hours are its real length, from its two instants, so a night across a clock change is
as long as it was worked (9 hours on the night the clocks go back in New York, 7 when they
go forward). Every active tender is listed, with nothing worked too, and an inactive one
only if they worked in the range: the operator sees who was left out.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from ..db.instants import instant
from ..picker import HISTORY_WEEKS
from ..pub import Pub
from ..verdicts import BadInput
from ..week.generate import shifts_before


@dataclass(frozen=True)
class Hours:
    """One tender's line: ``shifts`` worked, ``hours`` in total."""

    name: str
    email: str
    shifts: int
    hours: float

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "email": self.email, "shifts": self.shifts,
                "hours": self.hours}


def check_range(start: date, end: date) -> None:
    if end < start:
        raise BadInput(f"the report runs from {start.isoformat()} to a later date, "
                       f"got --to {end.isoformat()}")


def hours_worked(pub: Pub, start: date, end: date) -> list[Hours]:
    """Each tender's shifts and hours in sent weeks from ``start`` to ``end`` (inclusive),
    busiest first, then by name."""
    check_range(start, end)
    worked = pub.query(
        "SELECT a.tender_id, s.starts_at, s.ends_at FROM pub_assignments a "
        "JOIN pub_shifts s ON s.id = a.shift_id "
        "JOIN pub_schedule_runs r ON r.week_of = a.week_of "
        "WHERE r.status = 'sent' AND s.night >= %s AND s.night <= %s",
        [start.isoformat(), end.isoformat()])
    shifts: dict[int, int] = {}
    seconds: dict[int, float] = {}
    for row in worked:
        tid = int(row["tender_id"])
        shifts[tid] = shifts.get(tid, 0) + 1
        length = instant(row["ends_at"]) - instant(row["starts_at"])
        seconds[tid] = seconds.get(tid, 0.0) + length.total_seconds()
    people = pub.query("SELECT id, name, email, active FROM pub_tenders")
    lines = [Hours(str(p["name"]), str(p["email"]), shifts.get(int(p["id"]), 0),
                   round(seconds.get(int(p["id"]), 0.0) / 3600, 2))
             for p in people if p["active"] or int(p["id"]) in shifts]
    return sorted(lines, key=lambda h: (-h.hours, -h.shifts, h.name.lower(), h.email))


def hours_text(value: float) -> str:
    """``8``, ``7.5``, ``16.25``: as a spreadsheet or a person reads it."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def as_csv(lines: list[Hours]) -> str:
    """The report for a spreadsheet: ``name,email,shifts,hours`` (the CLI's ``--csv`` and
    the admin's download, the same text)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["name", "email", "shifts", "hours"])
    for line in lines:
        writer.writerow([line.name, line.email, line.shifts, hours_text(line.hours)])
    return out.getvalue()


def rolling_counts(pub: Pub, today: date) -> dict[str, int]:
    """Each tender's shifts in the trailing sent weeks the picker weighs (its history for
    the week after ``today``'s), by email: why the picker favours whom it does."""
    monday = today - timedelta(days=today.weekday()) + timedelta(days=7)
    counts = shifts_before(pub, monday.isoformat())
    return {str(p["email"]): counts.get(int(p["id"]), 0)
            for p in pub.query("SELECT id, email FROM pub_tenders")}


__all__ = ["HISTORY_WEEKS", "Hours", "as_csv", "check_range", "hours_text", "hours_worked",
           "rolling_counts"]
