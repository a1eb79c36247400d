"""A tender's usual (standing availability, migration 0046): the shifts they usually work
and their usual maximum, saved from their form ("save this as my usual").

**What a usual names.** Not a week's shift ids (each week has its own) but what the
pub's template names a shift by: its local weekday (0 = Monday) and local start time
(``HH:MM``), :func:`identity`. A week's shift matches an entry when both agree, so a one-off
shift on a usual night at a usual time matches too, and a shift moved to another time does
not (the tender is asked again rather than put down for a time they never gave).

**Where it is used.**

* A new week's form starts from it (:func:`matching`, read by
  :func:`pubsched.week.view.tender_form`): the matching shifts the form offers
  are ticked, the maximum filled in, and the page says so. Nothing is saved until the
  tender sends the form.
* A week they never answer is answered from it when its form closes
  (:func:`fill_unanswered`, called by the v2 close, the tick's autopilot close and the
  legacy close, each in the close's own unit of work): the rows are written with
  ``pub_availability.source = 'usual'``, so the page ("we used your usual") and the
  operator's submissions list ("usual") can tell. Shifts on a night the tender is away
  (:func:`pubsched.people.time_off.away_clause`) and shifts already started are left out; the
  skills a shift needs are the picker's to weigh, as for any answer. A close after a reopen
  fills again from the usual as it is then; a tender's own answer (a reopen, then the
  form) replaces the usual's and is never overwritten by it.

**Saving.** :func:`write` runs in the submission's unit (so the answer and the usual
commit together). Entries for shifts the form could not offer this week (started, away,
a skill they lack) are carried over from the previous usual: a tender away on Friday who
saves this week's answer does not lose Friday from their usual.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from ..db.instants import instant
from ..pub import Pub
from ..week.template import migrated
from .time_off import away_clause

Identity = tuple[int, str]  # (local weekday, 0 = Monday; local start "HH:MM")
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def identity(starts_at: datetime, tz: ZoneInfo) -> Identity:
    """A shift as a usual names it: its start's local weekday and clock time."""
    local = instant(starts_at).astimezone(tz)
    return local.weekday(), f"{local:%H:%M}"


def said(entry: Identity) -> str:
    """``Fri 18:00``."""
    return f"{DAY_NAMES[entry[0]]} {entry[1]}"


@dataclass(frozen=True)
class Usual:
    tender_id: int
    shifts: frozenset[Identity]
    max_shifts: int | None
    saved_at: datetime

    def as_json(self) -> dict[str, Any]:
        """``{"shifts": ["Thu 18:00", ...], "max"}`` (``tender show`` adds ``saved_at``)."""
        return {"shifts": [said(e) for e in sorted(self.shifts)], "max": self.max_shifts}


def of(pub: Pub, tender_id: int) -> Usual | None:
    """The tender's usual, or None (never saved; or a database at the legacy schema)."""
    if not pub.schema.usual:
        return None
    rows = pub.query("SELECT max_shifts, saved_at FROM pub_usual WHERE tender_id = %s",
                     [tender_id])
    if not rows:
        return None
    entries = pub.query("SELECT weekday, start_time FROM pub_usual_shifts "
                        "WHERE tender_id = %s", [tender_id])
    limit = rows[0]["max_shifts"]
    return Usual(tender_id, frozenset((int(r["weekday"]), str(r["start_time"]))
                                      for r in entries),
                 None if limit is None else int(limit), instant(rows[0]["saved_at"]))


def matching(usual: Usual, shifts: Iterable[tuple[int, datetime]], tz: ZoneInfo) -> list[int]:
    """The ids of ``shifts`` (id, starts_at) the usual names."""
    return sorted(sid for sid, starts_at in shifts if identity(starts_at, tz) in usual.shifts)


def write(tx: Any, tender_id: int, ticked: Iterable[Identity], max_shifts: int | None,
          at: datetime, *, not_offered: Iterable[Identity] = ()) -> None:
    """Inside the caller's unit: the tender's usual becomes ``ticked`` (and ``max_shifts``),
    keeping the entries of the old one among ``not_offered`` (shifts the form could not
    offer this week, so the tender could not say)."""
    kept = {(int(r["weekday"]), str(r["start_time"])) for r in tx.execute(
        "SELECT weekday, start_time FROM pub_usual_shifts WHERE tender_id = %s",
        [tender_id])} & set(not_offered)
    tx.execute("INSERT INTO pub_usual (tender_id, max_shifts, saved_at) VALUES (%s, %s, %s) "
               "ON CONFLICT (tender_id) DO UPDATE SET max_shifts = excluded.max_shifts, "
               "saved_at = excluded.saved_at", [tender_id, max_shifts, at])
    tx.execute("DELETE FROM pub_usual_shifts WHERE tender_id = %s", [tender_id])
    for weekday, start in sorted({*ticked, *kept}):
        tx.execute("INSERT INTO pub_usual_shifts (tender_id, weekday, start_time) "
                   "VALUES (%s, %s, %s)", [tender_id, weekday, start])


def fill_unanswered(pub: Pub, tx: Any, week: str, at: datetime) -> int:
    """Inside the close's unit ``tx``: every active tender with a usual and no answer of
    their own for ``week`` is answered from it (``source = 'usual'``; one written by an
    earlier close is replaced); the number of tenders so answered. Nothing on a database
    without migration 0046 (the legacy engine's schema)."""
    if not migrated(tx, "0046"):
        return 0
    tz = pub.config.tz
    tx.execute("DELETE FROM pub_availability_shifts WHERE week_of = %s AND tender_id IN "
               "(SELECT tender_id FROM pub_availability WHERE week_of = %s AND "
               "source = 'usual')", [week, week])
    tx.execute("DELETE FROM pub_availability WHERE week_of = %s AND source = 'usual'", [week])
    owed = tx.execute(
        "SELECT u.tender_id, u.max_shifts FROM pub_usual u JOIN pub_tenders t "
        "ON t.id = u.tender_id WHERE t.active = 1 AND NOT EXISTS (SELECT 1 FROM "
        "pub_availability a WHERE a.week_of = %s AND a.tender_id = u.tender_id) "
        "ORDER BY u.tender_id", [week])
    if not owed:
        return 0
    entries: dict[int, set[Identity]] = {}
    for r in tx.execute("SELECT tender_id, weekday, start_time FROM pub_usual_shifts"):
        entries.setdefault(int(r["tender_id"]), set()).add(
            (int(r["weekday"]), str(r["start_time"])))
    shifts = [(int(r["id"]), instant(r["starts_at"])) for r in tx.execute(
        "SELECT id, starts_at FROM pub_shifts WHERE week_of = %s", [week])]
    away = {(int(r["tender_id"]), int(r["id"])) for r in tx.execute(
        "SELECT u.tender_id, s.id FROM pub_usual u, pub_shifts s WHERE s.week_of = %s AND "
        + away_clause("u.tender_id", "s.night"), [week])}
    for r in owed:
        tender_id = int(r["tender_id"])
        mine = entries.get(tender_id, set())
        tx.execute("INSERT INTO pub_availability (week_of, tender_id, max_shifts, "
                   "submitted_at, updated_at, source) VALUES (%s, %s, %s, %s, %s, 'usual')",
                   [week, tender_id, r["max_shifts"], at, at])
        for shift_id, starts_at in sorted(shifts):
            if (identity(starts_at, tz) in mine and starts_at > at
                    and (tender_id, shift_id) not in away):
                tx.execute("INSERT INTO pub_availability_shifts (week_of, tender_id, "
                           "shift_id) VALUES (%s, %s, %s)", [week, tender_id, shift_id])
    return len(owed)


__all__ = ["DAY_NAMES", "Identity", "Usual", "fill_unanswered", "identity", "matching", "of",
           "said", "write"]
