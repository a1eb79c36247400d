"""Weeks: one run row per week (created through the engine's door, the seed's
``ensureRow``) and the week's shifts, made from the pub's own template (the
``pub_shift_template`` table, :mod:`pubsched.week.template`) in the pub's local time, read in
the unit of work that writes them. A week's shifts are then its own rows: a later template
change does not touch them.

A week is named by its Monday (``week_of``, an ISO date); anything else is
:class:`~pubsched.verdicts.BadInput` with nothing written. The run's times (opens-at,
deadline, generate time, send window) are computed from the pub's settings and the week's
``settings_override`` and stored in UTC, so the tick compares instants, never local times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from ..db.instants import instant
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from . import template
from .time import (
    BadSettings,
    BadWeek,
    RunTimes,
    WeekShift,
    parse_override,
    run_times,
    shifts_for_week,
)
from .time import week_of as monday_of


def week_key(week: str | date) -> str:
    """The Monday's ISO date, or :class:`BadInput`."""
    try:
        return monday_of(week).isoformat()
    except BadWeek as exc:
        raise BadInput(str(exc)) from None


@dataclass(frozen=True)
class Shift:
    id: int
    week_of: str
    night: str
    label: str
    starts_at: datetime
    ends_at: datetime
    slots: int
    needs: tuple[str, ...] = ()
    clock_note: str = ""  # what the clocks did to its times (week.time.clocks; 0052)

    @classmethod
    def of(cls, row: dict[str, Any]) -> Shift:
        return cls(int(row["id"]), str(row["week_of"]), str(row["night"]), str(row["label"]),
                   row["starts_at"], row["ends_at"], int(row["slots"]),
                   template.needs_of(row.get("needs")), str(row.get("clock_note") or ""))


def _first_start(pub: Pub, week: str, override: Any) -> datetime | None:
    """When the week's first shift starts: its own shifts once it has them (a one-off or a
    removed night counts), else what the template would give it."""
    rows = pub.query("SELECT starts_at FROM pub_shifts WHERE week_of = %s "
                     "ORDER BY starts_at LIMIT 1", [week])
    if rows:
        return instant(rows[0]["starts_at"])
    with pub.atomic() as tx:
        made = _from_template(pub, tx, week, override)
    return made[0].starts_at if made else None


def _from_template(pub: Pub, tx: Any, week: str, override: Any) -> tuple[WeekShift, ...]:
    """The week's shifts from the template as ``tx`` reads it (or, for a week made by
    older code with one, the override's ``"shifts"``), or :class:`BadInput`."""
    try:
        return shifts_for_week(week, pub.config.tz, template.weekly(tx), override)
    except BadSettings as exc:
        raise BadInput(str(exc)) from None


def times_of(pub: Pub, week: str, override: Any = None) -> RunTimes:
    """The week's moments (the settings with its override), or :class:`BadInput`. A
    deadline the override moves (an extension) must come before the week's first shift
    starts: past it the survey would ask for shifts already being worked."""
    try:
        times = run_times(week, pub.config.tz, pub.config.times, override)
    except BadSettings as exc:
        raise BadInput(str(exc)) from None
    if "deadline_at" in _override(override):
        first = _first_start(pub, week, override)
        if first is not None and times.deadline_at >= first:
            tz = pub.config.tz
            raise BadInput(
                f"the deadline {times.deadline_at.astimezone(tz):%a %d %b %Y %H:%M} "
                f"comes after the week's first shift starts "
                f"({first.astimezone(tz):%a %d %b %Y %H:%M}, {tz.key})")
    return times


def new_deadline(pub: Pub, week: str, current: Any, deadline: datetime
                 ) -> tuple[dict[str, Any], RunTimes]:
    """The week's override and moments with its deadline moved to ``deadline`` (an aware
    instant), as an open with a deadline and an extension write them, or
    :class:`BadInput`: the generate time follows a later deadline, the moments stay in
    order, the deadline comes before the week's first shift. ``current`` is the week's
    override now (None for a week not yet made)."""
    new = utc(deadline)
    override: dict[str, Any] = {**_override(current), "deadline_at": new.isoformat()}
    if times_of(pub, week, current).generate_at < new:
        override["generate_at"] = new.isoformat()  # the generate time follows the deadline
    return override, times_of(pub, week, override)


def opening_deadline(pub: Pub, week: str, current: Any, deadline: datetime, now: datetime
                     ) -> tuple[dict[str, Any], RunTimes]:
    """:func:`new_deadline` for a form opened at ``now`` with the deadline the operator
    chose: refused (:class:`BadInput`, nothing written) unless it is still to come. A
    deadline before the form's planned opening (a form opened early, answers wanted early)
    makes the opening ``now``, so the moments keep their order."""
    at, new = utc(now), utc(deadline)
    tz = pub.config.tz
    if new <= at:
        raise BadInput(f"the deadline {_local(new, tz)} has passed (it is now "
                       f"{_local(at, tz)}): give one still to come")
    planned = times_of(pub, week, current)
    if planned.opens_at >= new:
        current = {**_override(current), "opens_at": at.isoformat()}
    return new_deadline(pub, week, current, new)


def _local(at: datetime, tz: Any) -> str:
    here = at.astimezone(tz)
    return f"{here:%a} {here.day} {here:%b %Y %H:%M} {here.tzname()}"


def stamp_form_moved(pub: Pub, tx: Any, week: str, at: datetime) -> None:
    """In ``tx``: the form of ``week`` opened, or its deadline moved, at ``at`` (the
    action's instant): no form reminder goes out in the hour after
    (:mod:`pubsched.tick.reminders`). A database before 0052 has no stamp to write."""
    if pub.schema.week_record:
        tx.execute("UPDATE pub_schedule_runs SET form_moved_at = %s WHERE week_of = %s",
                   [at, week])


def stamp_closed(tx: Any, week: str, at: datetime) -> datetime:
    """In the close's unit, once it holds the week: ``closed_at`` is ``at`` or, when later,
    the last answer's ``updated_at``; the instant written. An answer read its clock before
    the close claimed the week and committed while the close waited for it, so its time can
    be after the close's own: the stamp says when the form stopped taking answers, and no
    answer is stored after it."""
    latest = tx.execute("SELECT MAX(updated_at) AS latest FROM pub_availability "
                        "WHERE week_of = %s", [week])[0]["latest"]
    closed = at if latest is None else max(at, instant(latest))
    tx.execute("UPDATE pub_schedule_runs SET closed_at = %s WHERE week_of = %s",
               [closed, week])
    return closed


def _override(override: Any) -> Any:
    try:
        return parse_override(override)
    except BadSettings as exc:
        raise BadInput(str(exc)) from None


def _label(s: WeekShift, pub: Pub) -> str:
    """The template's label; a shift from an old week's override has none: its times."""
    if s.label:
        return s.label
    start = s.starts_at.astimezone(pub.config.tz)
    end = s.ends_at.astimezone(pub.config.tz)
    return f"{start:%a %d %b} {start:%H:%M}-{end:%H:%M}"


@dataclass(frozen=True)
class WeekPlan:
    """What a week's creation writes, computed (and checked) before anything is written:
    whether the run row is new, its times, its override, and the shifts the template gives
    it now (what :func:`write_week` writes is re-read in its own unit: see there)."""

    key: str
    new: bool
    times: RunTimes
    shifts: tuple[WeekShift, ...]
    override: Any = None


def plan_week(pub: Pub, week: str | date) -> WeekPlan:
    """The week's run times and shifts, from the settings, the pub's template and the
    week's override (or :class:`BadInput`): nothing written, so a bad week fails before its
    first write. Called inside the caller's unit it reads in that unit. Reads only the
    legacy schema's columns (0033's override) of the run, so the legacy engine can use it."""
    key = week_key(week)
    rows = pub.query("SELECT settings_override FROM pub_schedule_runs WHERE week_of = %s",
                     [key])
    override = rows[0]["settings_override"] if rows else None
    times = times_of(pub, key, override)
    with pub.atomic() as tx:
        made = _from_template(pub, tx, key, override)
    return WeekPlan(key, not rows, times, made, override)


def write_week(pub: Pub, tx: Any, plan: WeekPlan, at: datetime, *, door: bool = True) -> int:
    """Inside the caller's unit ``tx``: the run row (if new) and, for a week with no shifts
    yet, the template's, read again in ``tx`` (so a template edit racing the creation
    lands wholly before or after it); the number of shifts written. The row and its
    shifts commit together, so a crash cannot leave a week without shifts; and a week left
    so by older code gets them here (never one whose nights the operator removed).

    ``door``: created through the engine's door (``ensureRow``: ``v2_state`` DRAFT, its
    due times and a birth event), as the v2 engine creates its weeks. The legacy engine
    passes False: a plain row of the legacy columns, ``v2_state`` left NULL ("not yet
    adopted": v2 derives DRAFT from the status and seeds it when it first moves the week,
    and the cutover gives it its due times), so the legacy engine writes no v2 state."""
    if plan.new and door:
        times = plan.times
        pub.runs.ensure(plan.key, opens_at=times.opens_at, deadline_at=times.deadline_at,
                        generate_at=times.generate_at, send_window_at=times.send_window_end,
                        created_at=at, by=pub.actor)  # its birth says who
    elif plan.new:
        tx.execute("INSERT INTO pub_schedule_runs (week_of, status, created_at) "
                   "VALUES (%s, 'pending', %s) ON CONFLICT (week_of) DO NOTHING",
                   [plan.key, at])
    if tx.execute("SELECT id FROM pub_shifts WHERE week_of = %s LIMIT 1", [plan.key]):
        return 0
    if (not plan.new and template.migrated(tx, "0042") and tx.execute(
            "SELECT id FROM pub_removed_shifts WHERE week_of = %s LIMIT 1", [plan.key])):
        return 0  # every night closed by the operator: not refilled behind their back
    made = _from_template(pub, tx, plan.key, plan.override)
    needs = template.migrated(tx, "0038")  # the legacy schema has no needs column
    noted = needs and template.migrated(tx, "0052")  # nor a note of the clocks
    for s in made:
        tx.execute(
            f"INSERT INTO pub_shifts (week_of, night, label, starts_at, ends_at, slots"
            f"{', needs' if needs else ''}{', clock_note' if noted else ''}) "
            f"VALUES (%s, %s, %s, %s, %s, %s{', %s' if needs else ''}"
            f"{', %s' if noted else ''}) ON CONFLICT (week_of, starts_at) DO NOTHING",
            [plan.key, s.night.isoformat(), _label(s, pub), s.starts_at, s.ends_at, s.slots,
             *([json.dumps(list(s.needs))] if needs else []),
             *([s.note or None] if noted else [])])
    return len(made)


def ensure_week(pub: Pub, week: str | date, *, now: datetime | None = None) -> dict[str, Any]:
    """The week's run row (created in DRAFT if new, with its times) and its shifts, in one
    unit of work."""
    at = utc(now)
    plan = plan_week(pub, week)
    with pub.atomic() as tx:
        write_week(pub, tx, plan, at)
    row = pub.runs.get(plan.key)
    assert row is not None
    return row


# the first key of the two-key advisory lock a week's creation takes on PostgreSQL (the
# second is the week's name hashed); the two-key space never meets the flag's one-key lock
WEEK_LOCK_CLASS = 0x57454B


def create_week(pub: Pub, week: str | date, *, now: datetime | None = None,
                door: bool = True) -> Verdict:
    """``pubsched week create``: the week's row and its shifts (the pub's template as it
    is now) in one unit, the form not opened, so autopilot's first step (the tick opening
    the form at its time) has a DRAFT week to take. A week that exists is refused
    (WEEK_EXISTS) and left as it is: creating is not a way to repair or reset one.
    ``door`` as in :func:`write_week` (the v2 engine creates through the door; the legacy
    engine writes a plain pending row)."""
    at = utc(now)
    plan = plan_week(pub, week)  # BadInput (not a Monday, a bad template) before any write
    tz = pub.config.tz
    monday = date.fromisoformat(plan.key)
    name = f"the week of {monday:%a %d %b %Y}"
    exists = Verdict(False, "WEEK_EXISTS", message=(
        f"{name} exists already: nothing changed (see `pubsched week show {plan.key}`)"))
    if not plan.new:
        return exists
    with pub.atomic() as tx:
        # two creates of one week at once: the second waits here, then finds the first's
        # row (PostgreSQL: a lock on the week's name; SQLite's unit holds the writer lock)
        if pub.dialect == "postgresql":
            tx.execute("SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(%s, hashtext(%s)))"
                       " AS held", [WEEK_LOCK_CLASS, plan.key])
        if tx.execute("SELECT week_of FROM pub_schedule_runs WHERE week_of = %s", [plan.key]):
            return exists
        count = write_week(pub, tx, plan, at, door=door)
    opens = plan.times.opens_at.astimezone(tz)
    notes = clock_notes(plan.shifts, pub)
    return Verdict(True, message=(
        f"created {name} as a draft: {count} shifts, the form not open yet "
        f"(open it with `pubsched week open {plan.key}`, or autopilot opens it "
        f"{opens:%a %d %b %H:%M} {tz.key})" + "".join(f"\nNote: {n}" for n in notes)),
        detail={"week_of": plan.key, "state": "DRAFT", "shifts": count, "notes": notes})


def clock_notes(made: tuple[WeekShift, ...], pub: Pub) -> list[str]:
    """``Saturday night: 02:00 does not exist ...``: each shift the clocks touch, named
    (:mod:`pubsched.week.time.clocks`), for the operator who makes the week."""
    return [f"{_label(s, pub)}: {s.note}" for s in made if s.note]


def clash_clause(one: str, other: str) -> str:
    """An SQL condition, true when the ``pub_shifts`` rows aliased ``one`` and ``other``
    may not be worked by one tender: the same night, or times that overlap (one ending at
    02:00 and one starting at 02:00 do not). The database's twin of
    :meth:`pubsched.picker.Shift.clashes`: the cover's "already working then", a pin by
    hand and a generate's shifts of other weeks all ask it."""
    return (f"({one}.night = {other}.night OR ({one}.starts_at < {other}.ends_at "
            f"AND {other}.starts_at < {one}.ends_at))")


def shifts(pub: Pub, week: str) -> list[Shift]:
    # every column: ``needs`` (0038) is not there on the legacy schema the legacy engine
    # still runs on
    rows = pub.query("SELECT * FROM pub_shifts WHERE week_of = %s ORDER BY starts_at, id",
                     [week])
    return [Shift.of(r) for r in rows]


def shift_of(pub: Pub, week: str, shift_id: int) -> Shift:
    """Shift ``shift_id`` of ``week``, or :class:`BadInput` (not a whole number, no such
    shift, a shift of another week): what an edit of one shift checks first."""
    if isinstance(shift_id, bool) or not isinstance(shift_id, int):
        raise BadInput(f"a shift id is a whole number, got {shift_id!r}")
    rows = pub.query("SELECT * FROM pub_shifts WHERE id = %s", [shift_id])
    if not rows or str(rows[0]["week_of"]) != week:
        raise BadInput(f"shift {shift_id} is not a shift of week {week}")
    return Shift.of(rows[0])


def all_weeks(pub: Pub) -> list[dict[str, Any]]:
    return pub.query("SELECT week_of FROM pub_schedule_runs ORDER BY week_of")


def settings_override(row: dict[str, Any]) -> dict[str, Any]:
    raw = row.get("settings_override")
    if raw is None or raw == "":
        return {}
    value = json.loads(raw) if isinstance(raw, str) else raw
    return dict(value) if isinstance(value, dict) else {}


def set_autopilot(pub: Pub, week: str, on: bool) -> bool:
    """Autopilot on or off for one run: the tick may then advance its timed steps (never
    approve or send). A plain column, not a state: the timers' guards read it in the
    write, so turning it off between a tick's read and its write still holds the run."""
    key = week_key(week)
    with pub.atomic() as tx:
        rows = tx.execute("UPDATE pub_schedule_runs SET autopilot = %s WHERE week_of = %s "
                          "RETURNING week_of", [1 if on else 0, key])
    if not rows:
        raise BadInput(f"no week {key}")
    return on
