"""Generate: run the fair picker over a week's submissions and write its assignments.

The body is the same for both engines (the seed's ``runGenerateShifts``: the picker only,
it does not close the survey); only the fence differs. The assignments are written through
``open_fenced()``, a unit of work that commits only while the caller's lease is still the
run's (v2: ``lease.atomic()``), so a zombie generate whose lease was reclaimed writes
nothing. Regenerate replaces the week's assignments in place (delete + insert in one unit)
and sees every submission stored so far, those that arrived after a reopen included.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import date, datetime
from typing import Any

from . import picker
from .pub import Pub
from .weeks import shifts

HISTORY_SQL = (
    "SELECT a.tender_id, COUNT(*) AS n FROM pub_assignments a WHERE a.week_of IN ("
    " SELECT r.week_of FROM pub_schedule_runs r WHERE r.status = 'sent' AND r.week_of < %s"
    " ORDER BY r.week_of DESC LIMIT %s) GROUP BY a.tender_id")


def roster_for(pub: Pub, week: str) -> picker.Roster:
    """The picker's roster for the week, from what is stored now (reads only)."""
    week_shifts = shifts(pub, week)
    tenders = pub.query("SELECT id, max_shifts FROM pub_tenders WHERE active = 1")
    history = {int(r["tender_id"]): int(r["n"])
               for r in pub.query(HISTORY_SQL, [week, picker.HISTORY_WEEKS])}
    subs = pub.query("SELECT tender_id, max_shifts FROM pub_availability WHERE week_of = %s",
                     [week])
    this_week = {int(r["tender_id"]): r["max_shifts"] for r in subs}
    picks = pub.query("SELECT tender_id, shift_id FROM pub_availability_shifts "
                      "WHERE week_of = %s", [week])
    active = {int(t["id"]) for t in tenders}
    availability: dict[str, list[str]] = {}
    for p in picks:
        if int(p["tender_id"]) in active:
            availability.setdefault(str(p["tender_id"]), []).append(str(p["shift_id"]))
    return picker.pick(
        date.fromisoformat(week),
        [picker.Shift(str(s.id), date.fromisoformat(s.night), s.slots) for s in week_shifts],
        [picker.Tender(str(t["id"]), history.get(int(t["id"]), 0), t["max_shifts"],
                       this_week.get(int(t["id"]))) for t in tenders],
        availability)


def generate_body(pub: Pub, week: str, now: datetime,
                  open_fenced: Callable[[], AbstractContextManager[Any]]) -> dict[str, Any]:
    """Pick, then write the assignments in place under the fence; what was filled."""
    roster = roster_for(pub, week)
    with open_fenced() as tx:
        tx.execute("DELETE FROM pub_assignments WHERE week_of = %s", [week])
        for shift_id, tender_ids in sorted(roster.assignments.items()):
            for tender_id in tender_ids:
                tx.execute("INSERT INTO pub_assignments (week_of, shift_id, tender_id, "
                           "assigned_at) VALUES (%s, %s, %s, %s)",
                           [week, int(shift_id), int(tender_id), now])
    unfilled = sum(roster.unfilled.values())
    return {"filled": roster.filled, "unfilled": unfilled}


def assignments(pub: Pub, week: str) -> dict[int, list[str]]:
    """shift id -> the assigned tenders' emails."""
    rows = pub.query("SELECT a.shift_id, t.email FROM pub_assignments a JOIN pub_tenders t "
                     "ON t.id = a.tender_id WHERE a.week_of = %s ORDER BY a.shift_id, t.email",
                     [week])
    out: dict[int, list[str]] = {}
    for r in rows:
        out.setdefault(int(r["shift_id"]), []).append(str(r["email"]))
    return out
