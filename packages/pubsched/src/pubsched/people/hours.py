"""The hours report (``pubsched report hours``): per tender, the shifts on the sent roster
and their hours between two dates, for the pub's wages and for seeing who carries the load;
of those, the ones still to come at the report's instant (not ended yet), so that a range
reaching past today does not pay next week's shifts as worked.

What counts: an assignment of a week that was sent (the schedule the tenders were told),
as it stands now (a cover request that moves a shift moves its assignment, so the report
follows it). A shift belongs to the local date of its night (``pub_shifts.night``: a shift
crossing midnight is counted once, on the day it starts), and the dates are inclusive.
Its hours are its real length, from its two instants, so a night across a clock change is
as long as it was worked (9 hours on the night the clocks go back in New York, 7 when they
go forward). A shift is "to come" until its end: one under way is not worked yet. Every
active tender is listed, with nothing worked too, and an inactive one only if they have
shifts in the range, marked inactive: the operator sees who was left out, and who on the
roster no longer works here.

The CSV is opened by a spreadsheet, which runs a cell starting with ``=``, ``+``, ``-``,
``@``, a tab or a carriage return as a formula: a tender's name is typed by anyone the
operator adds (or by a tender who mails it in), so every cell is neutralised as OWASP's
CSV-injection page advises (:func:`spreadsheet_cell`), in this one writer that the CLI and
the web's download share.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from ..db.instants import instant
from ..picker import HISTORY_WEEKS
from ..pub import Pub, utc
from ..verdicts import BadInput
from ..week.generate import shifts_before


@dataclass(frozen=True)
class Hours:
    """One tender's line: ``shifts`` on the sent roster in the range and their ``hours``;
    of those, ``shifts_to_come`` not ended at the report's instant and their
    ``hours_to_come`` (so worked = shifts - shifts_to_come); ``active`` false for a tender
    who no longer works here."""

    name: str
    email: str
    active: bool
    shifts: int
    hours: float
    shifts_to_come: int = 0
    hours_to_come: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "email": self.email, "active": self.active,
                "shifts": self.shifts, "hours": self.hours,
                "shifts_to_come": self.shifts_to_come, "hours_to_come": self.hours_to_come}


def check_range(start: date, end: date) -> None:
    if end < start:
        raise BadInput(f"the last day, {end.isoformat()}, is before the first, "
                       f"{start.isoformat()}: the report runs from a day to a later one")


def hours_worked(pub: Pub, start: date, end: date, *,
                 now: datetime | None = None) -> list[Hours]:
    """Each tender's shifts and hours in sent weeks from ``start`` to ``end`` (inclusive),
    and of those the ones not ended at ``now`` (default: the real clock), busiest first,
    then by name."""
    check_range(start, end)
    at = utc(now)
    worked = pub.query(
        "SELECT a.tender_id, s.starts_at, s.ends_at FROM pub_assignments a "
        "JOIN pub_shifts s ON s.id = a.shift_id "
        "JOIN pub_schedule_runs r ON r.week_of = a.week_of "
        "WHERE r.status = 'sent' AND s.night >= %s AND s.night <= %s",
        [start.isoformat(), end.isoformat()])
    shifts: dict[int, int] = {}
    seconds: dict[int, float] = {}
    coming: dict[int, int] = {}
    coming_seconds: dict[int, float] = {}
    for row in worked:
        tid = int(row["tender_id"])
        ends = instant(row["ends_at"])
        length = (ends - instant(row["starts_at"])).total_seconds()
        shifts[tid] = shifts.get(tid, 0) + 1
        seconds[tid] = seconds.get(tid, 0.0) + length
        if ends > at:
            coming[tid] = coming.get(tid, 0) + 1
            coming_seconds[tid] = coming_seconds.get(tid, 0.0) + length
    people = pub.query("SELECT id, name, email, active FROM pub_tenders")
    lines = [Hours(str(p["name"]), str(p["email"]), bool(p["active"]),
                   shifts.get(int(p["id"]), 0), _hours(seconds.get(int(p["id"]), 0.0)),
                   coming.get(int(p["id"]), 0), _hours(coming_seconds.get(int(p["id"]), 0.0)))
             for p in people if p["active"] or int(p["id"]) in shifts]
    return sorted(lines, key=lambda h: (-h.hours, -h.shifts, h.name.lower(), h.email))


def _hours(seconds: float) -> float:
    return round(seconds / 3600, 2)


def hours_text(value: float) -> str:
    """``8``, ``7.5``, ``16.25``: as a spreadsheet or a person reads it."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


#: What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

CSV_HEADER = ("name", "email", "shifts", "hours", "shifts_to_come", "hours_to_come", "active")


def spreadsheet_cell(value: object) -> str:
    """A cell as a spreadsheet must read it: as text, never as a formula. A cell that
    starts with one of :data:`FORMULA_STARTS` gets a single quote in front (the quote
    shows, the formula does not run); the csv writer still quotes a cell with a comma, a
    quote or a line break, so no cell spills into the next."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def as_csv(lines: list[Hours]) -> str:
    """The report for a spreadsheet: ``name,email,shifts,hours,shifts_to_come,
    hours_to_come,active`` (the first four as before; ``active`` is ``yes`` or ``no``),
    lines ended by CRLF, every cell through :func:`spreadsheet_cell`: the CLI's ``--csv``
    and the admin's download, the same text."""
    out = io.StringIO()
    # RFC 4180's CRLF, not "\n": the writer quotes a cell holding a character of the line
    # end, and a lone carriage return ends a row in a spreadsheet as surely as "\n" does
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_HEADER)
    for line in lines:
        writer.writerow([spreadsheet_cell(cell) for cell in (
            line.name, line.email, line.shifts, hours_text(line.hours), line.shifts_to_come,
            hours_text(line.hours_to_come), "yes" if line.active else "no")])
    return out.getvalue()


def rolling_counts(pub: Pub, today: date) -> dict[str, int]:
    """Each tender's shifts in the trailing sent weeks the picker weighs (its history for
    the week after ``today``'s), by email: why the picker favours whom it does."""
    monday = today - timedelta(days=today.weekday()) + timedelta(days=7)
    counts = shifts_before(pub, monday.isoformat())
    return {str(p["email"]): counts.get(int(p["id"]), 0)
            for p in pub.query("SELECT id, email FROM pub_tenders")}


__all__ = ["CSV_HEADER", "FORMULA_STARTS", "HISTORY_WEEKS", "Hours", "as_csv", "check_range",
           "hours_text", "hours_worked", "rolling_counts", "spreadsheet_cell"]
