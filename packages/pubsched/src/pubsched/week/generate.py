"""Generate: run the fair picker over a week's submissions and write its assignments.

The body is the same for both engines (the seed's ``runGenerateShifts``: the picker only,
it does not close the survey); only the fence differs. The assignments are written through
``open_fenced()``, a unit of work that commits only while the caller's lease is still the
run's (v2: ``lease.atomic()``), so a zombie generate whose lease was reclaimed writes
nothing. Regenerate replaces the week's assignments in place (delete + insert in one unit)
and sees every submission stored so far, those that arrived after a reopen included.

It also sees the operator's hand edits (``pub_roster_edits``, written by
:mod:`pubsched.week.roster`): every pin stays on its shift, no excluded tender is put back on
theirs, and the picker fills around them; the skills a shift needs and a tender has
(``pub_shifts.needs``, ``pub_tenders.skills``) are the picker's too. The edits of a
tender no longer active are not passed (they left the roster), and a reopen keeps them.

Time off (:mod:`pubsched.people.time_off`): a tender's ticks for a shift on a night they are
away are not passed to the picker (:func:`without_away`), so it never picks them for it,
whatever they ticked before the time off was marked. A pin is the operator's own choice
and stands (``tender away`` warns about it).

No tender on two shifts at once: the picker is given each shift's times and never puts one
tender on two that overlap, though on two nights (:mod:`pubsched.picker`); and a shift
that overlaps one the tender works in another week is kept from them
(:func:`busy_elsewhere`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import date, datetime
from typing import Any

from .. import picker
from ..db.instants import instant
from ..people import skills
from ..people.time_off import away_on
from ..pub import Pub
from .runs import clash_clause, shifts

_HISTORY = (
    "SELECT a.tender_id, COUNT(*) AS n FROM pub_assignments a WHERE a.week_of IN ("
    " SELECT r.week_of FROM pub_schedule_runs r WHERE r.status = 'sent' AND r.week_of < %s"
    " ORDER BY r.week_of DESC LIMIT %s) GROUP BY a.tender_id")


def shifts_before(pub: Pub, week: str) -> dict[int, int]:
    """Each tender's shifts in the sent weeks before ``week`` that the picker weighs (its
    history: the fairness it keeps), by tender id."""
    return {int(r["tender_id"]): int(r["n"])
            for r in pub.query(_HISTORY, [week, picker.HISTORY_WEEKS])}


def words(raw: Any) -> tuple[str, ...]:
    """A stored JSON list of skill words (``needs``, ``skills``), sorted, without repeats
    (:func:`pubsched.people.skills.stored`: lenient, a hand-written oddity reads as none)."""
    return tuple(sorted(skills.stored(raw)))


def edits(pub: Pub, week: str) -> dict[str, set[tuple[str, str]]]:
    """The week's hand edits: ``{"pin": {(tender id, shift id)}, "exclude": {...}}``, of
    active tenders only, as the picker's string ids."""
    if not pub.schema.roster_edits:  # 0041: the hand edits
        return {"pin": set(), "exclude": set()}
    rows = pub.query("SELECT e.tender_id, e.shift_id, e.kind FROM pub_roster_edits e "
                     "JOIN pub_tenders t ON t.id = e.tender_id "
                     "WHERE e.week_of = %s AND t.active = 1", [week])
    out: dict[str, set[tuple[str, str]]] = {"pin": set(), "exclude": set()}
    for r in rows:
        out[str(r["kind"])].add((str(r["tender_id"]), str(r["shift_id"])))
    return out


def without_away(availability: Mapping[str, list[str]], nights: Mapping[str, date],
                 away: Mapping[date, frozenset[int]]) -> dict[str, list[str]]:
    """``availability`` (tender id -> shift ids, the picker's strings) less each tick of a
    shift whose night (``nights``: shift id -> its night) the tender is away on (``away``:
    night -> the ids of the tenders away, :func:`pubsched.people.time_off.away_on`)."""
    def is_away(tender: str, shift: str) -> bool:
        night = nights.get(shift)
        return night is not None and int(tender) in away.get(night, frozenset())

    out: dict[str, list[str]] = {}
    for tender, picked in availability.items():
        kept = [s for s in picked if not is_away(tender, s)]
        if kept:
            out[tender] = kept
    return out


def busy_elsewhere(pub: Pub, week: str) -> set[tuple[str, str]]:
    """(tender id, shift id) of ``week``, as the picker's strings, for each shift of the
    week that clashes with one the tender works in another week (a Sunday 20:00-04:00
    before a Monday 02:00): the picker sees one week, so these are kept from it."""
    rows = pub.query("SELECT DISTINCT a.tender_id, c.id FROM pub_assignments a "
                     "JOIN pub_shifts s ON s.id = a.shift_id JOIN pub_shifts c "
                     f"ON c.week_of = %s AND {clash_clause('s', 'c')} "
                     "WHERE a.week_of <> %s", [week, week])
    return {(str(r["tender_id"]), str(r["id"])) for r in rows}


def without_pairs(availability: Mapping[str, list[str]], pairs: set[tuple[str, str]]
                  ) -> dict[str, list[str]]:
    """``availability`` less the (tender, shift) ``pairs``."""
    out: dict[str, list[str]] = {}
    for tender, picked in availability.items():
        kept = [s for s in picked if (tender, s) not in pairs]
        if kept:
            out[tender] = kept
    return out


def roster_for(pub: Pub, week: str) -> picker.Roster:
    """The picker's roster for the week, from what is stored now (reads only)."""
    week_shifts = shifts(pub, week)
    skilled = pub.schema.skills  # 0038: the skills
    needs = {int(r["id"]): words(r["needs"]) for r in pub.query(
        "SELECT id, needs FROM pub_shifts WHERE week_of = %s", [week])} if skilled else {}
    skills = ", skills" if skilled else ", '[]' AS skills"
    tenders = pub.query(f"SELECT id, max_shifts{skills} FROM pub_tenders WHERE active = 1")
    history = shifts_before(pub, week)
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
    nights = {str(s.id): date.fromisoformat(s.night) for s in week_shifts}
    availability = without_away(availability, nights, away_on(pub, nights.values()))
    availability = without_pairs(availability, busy_elsewhere(pub, week))
    hand = edits(pub, week)
    return picker.pick(
        date.fromisoformat(week),
        [picker.Shift(str(s.id), date.fromisoformat(s.night), s.slots, needs.get(s.id, ()),
                      instant(s.starts_at), instant(s.ends_at))
         for s in week_shifts],
        [picker.Tender(str(t["id"]), history.get(int(t["id"]), 0), t["max_shifts"],
                       this_week.get(int(t["id"])), words(t["skills"])) for t in tenders],
        availability, pins=hand["pin"], exclusions=hand["exclude"])


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


def pinned(pub: Pub, week: str, kind: str = "pin") -> dict[int, list[str]]:
    """shift id -> the emails pinned on it by hand (``week show``'s ``pinned``), or with
    ``kind="exclude"`` taken off it (``excluded``)."""
    if not pub.schema.roster_edits:  # 0041: the hand edits
        return {}
    rows = pub.query("SELECT e.shift_id, t.email FROM pub_roster_edits e JOIN pub_tenders t "
                     "ON t.id = e.tender_id WHERE e.week_of = %s AND e.kind = %s "
                     "ORDER BY e.shift_id, t.email", [week, kind])
    out: dict[int, list[str]] = {}
    for r in rows:
        out.setdefault(int(r["shift_id"]), []).append(str(r["email"]))
    return out


def missing(pub: Pub, week: str) -> dict[int, list[str]]:
    """shift id -> the needs the tenders now on it leave unmet (``picker.unmet``, the one
    reading of "missing"), every shift of the week present."""
    if not pub.schema.skills:
        return {int(r["id"]): [] for r in pub.query(
            "SELECT id FROM pub_shifts WHERE week_of = %s", [week])}
    rows = pub.query("SELECT s.id, s.needs, t.id AS tender_id, t.skills FROM pub_shifts s "
                     "LEFT JOIN pub_assignments a ON a.shift_id = s.id "
                     "LEFT JOIN pub_tenders t ON t.id = a.tender_id "
                     "WHERE s.week_of = %s", [week])
    needs: dict[int, tuple[str, ...]] = {}
    skills: dict[int, dict[str, tuple[str, ...]]] = {}
    for r in rows:
        needs[int(r["id"])] = words(r["needs"])
        on_it = skills.setdefault(int(r["id"]), {})
        if r["tender_id"] is not None:
            on_it[str(r["tender_id"])] = words(r["skills"])
    return {shift_id: list(picker.unmet(needs[shift_id], skills[shift_id]))
            for shift_id in needs}
