"""The pub's own week: the weekly shifts a new week is created with (``pub_shift_template``,
migration 0038), and the checks every shift a person types must pass.

Why a table and not a setting: the operator changes the week from the CLI or the web while
the app runs, and every instance must agree on it at the instant a week is created. So the
table is the ONE source of the template; :func:`pubsched.week.runs.plan_week` reads it in the
unit that creates the week, and a week keeps the shifts it was created with (a template
change applies to weeks created afterwards, a removed template shift stays in the weeks
that have it).

The checks (:func:`check_label`, :func:`check_day`, :func:`check_time`,
:func:`check_slots`, :func:`check_needs`) live here once, for the template and for a
week's one-off shifts (:mod:`pubsched.week.shifts`), for the CLI and for the web: bad input
is :class:`~pubsched.verdicts.BadInput` before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..db.migrate import TABLE as MIGRATIONS
from ..people import skills
from ..pub import Pub
from ..verdicts import BadInput, Verdict
from .time import DEFAULT_TEMPLATE, WEEKDAY_BY_NAME, BadSettings, ShiftTemplate, parse_hh_mm

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_TITLES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
LABEL_MAX = 40
NEEDS_MAX = 10
SLOTS = range(1, 21)


# -- the checks ------------------------------------------------------------------------------


def check_label(raw: object) -> str:
    """A shift's name as people read it: not empty, at most 40 characters, one line."""
    label = " ".join(raw.split()) if isinstance(raw, str) else ""
    if not label:
        raise BadInput("a shift needs a label (its name, such as 'Friday night')")
    if len(label) > LABEL_MAX:
        raise BadInput(f"a shift's label is at most {LABEL_MAX} characters, got {len(label)}")
    return label


def check_day(raw: object) -> int:
    """``mon`` .. ``sun`` (or the full name, any case) as 0 (Monday) .. 6."""
    name = raw.strip().lower() if isinstance(raw, str) else ""
    if name not in WEEKDAY_BY_NAME:
        raise BadInput(f"the day is one of {', '.join(DAYS)}, got {raw!r}")
    return WEEKDAY_BY_NAME[name]


def check_time(raw: object, what: str) -> str:
    """A local wall time ``HH:MM`` (00:00 to 23:59), as stored."""
    try:
        return f"{parse_hh_mm(raw.strip() if isinstance(raw, str) else raw):%H:%M}"
    except BadSettings:
        raise BadInput(f"the {what} is a local time HH:MM (00:00 to 23:59), got {raw!r}"
                       ) from None


def check_slots(raw: object) -> int:
    """How many people the shift needs: 1 to 20."""
    if isinstance(raw, bool) or not isinstance(raw, int) or raw not in SLOTS:
        raise BadInput(f"a shift has 1 to 20 slots, got {raw!r}")
    return raw


def check_needs(raw: Iterable[object]) -> tuple[str, ...]:
    """The skills a shift needs, by the one rule of :mod:`pubsched.people.skills` (the same words
    a tender can have)."""
    return skills.check(raw, most=NEEDS_MAX, whose="a shift")


def needs_of(raw: object) -> tuple[str, ...]:
    """The stored ``needs`` column as a tuple (:func:`pubsched.people.skills.stored`)."""
    return skills.stored(raw)


def span(start: str, end: str) -> str:
    """``18:00-02:00 (next day)``: how a shift's times read."""
    return f"{start}-{end}" + (" (next day)" if end <= start else "")


# -- the template ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TemplateShift:
    """One row of the pub's week."""

    id: int
    label: str
    weekday: int
    start: str
    end: str
    slots: int
    needs: tuple[str, ...]

    @classmethod
    def of(cls, row: dict[str, Any]) -> TemplateShift:
        return cls(int(row["id"]), str(row["label"]), int(row["weekday"]),
                   str(row["start_time"]), str(row["end_time"]), int(row["slots"]),
                   needs_of(row["needs"]))

    def as_json(self) -> dict[str, Any]:
        """``shift list --json``'s shape (docs/cli.md)."""
        return {"id": self.id, "label": self.label, "day": DAYS[self.weekday],
                "start": self.start, "end": self.end, "slots": self.slots,
                "needs": list(self.needs)}

    def as_weekly(self) -> ShiftTemplate:
        return ShiftTemplate(self.weekday, parse_hh_mm(self.start), parse_hh_mm(self.end),
                             self.slots, label=self.label, needs=self.needs)

    def describe(self) -> str:
        needs = f", needs {', '.join(self.needs)}" if self.needs else ""
        return (f"{self.label} ({DAY_TITLES[self.weekday]} {span(self.start, self.end)}, "
                f"{self.slots} slot{'s' if self.slots != 1 else ''}{needs})")


_SELECT = ("SELECT id, label, weekday, start_time, end_time, slots, needs "
           "FROM pub_shift_template")


def migrated(tx: Any, version: str) -> bool:
    """Whether the database has had migration ``version``. The legacy engine still runs on
    the legacy schema (a database at 0034: tests/pubsched/test_legacy.py), which has no
    template table, no ``needs`` and no record of removed shifts."""
    return bool(tx.execute(f"SELECT version FROM {MIGRATIONS} WHERE version = %s", [version]))


def read(tx: Any) -> list[TemplateShift]:
    """The template in week order (Monday first, then by start), inside the caller's unit
    ``tx``: a week's creation reads it in the unit that writes the week."""
    rows = tx.execute(f"{_SELECT} ORDER BY weekday, start_time, id")
    return [TemplateShift.of(r) for r in rows]


def weekly(tx: Any) -> tuple[ShiftTemplate, ...]:
    """The template as :func:`pubsched.week.time.shifts_for_week` takes it. A database from
    before 0038 has no table yet: its template is what 0038 will seed there (the three
    shifts the code had fixed), the one case the constant stands in for the table."""
    if not migrated(tx, "0038"):
        return DEFAULT_TEMPLATE
    return tuple(t.as_weekly() for t in read(tx))


def listing(pub: Pub) -> list[TemplateShift]:
    with pub.atomic() as tx:
        return read(tx)


def _one(tx: Any, shift_id: int) -> TemplateShift:
    rows = tx.execute(f"{_SELECT} WHERE id = %s", [shift_id])
    if not rows:
        raise BadInput(f"no shift {shift_id} in the pub's week (see `pubsched shift list`)")
    return TemplateShift.of(rows[0])


def _no_twin(tx: Any, weekday: int, start: str, own: int | None = None) -> None:
    """Two template shifts starting on one day at one minute would make every new week
    fail (a week's shifts are keyed by their start): refused here, and by 0042's index."""
    for other in read(tx):
        if other.weekday == weekday and other.start == start and other.id != own:
            raise BadInput(f"the pub's week has a shift on {DAY_TITLES[weekday]} at {start} "
                           f"already: {other.label}")


def add(pub: Pub, label: str, day: str, start: str, end: str, *, slots: int = 2,
        needs: Sequence[str] = ()) -> Verdict:
    """``pubsched shift add``: a new weekly shift, for the weeks created from now on."""
    made = (check_label(label), check_day(day), check_time(start, "start"),
            check_time(end, "end"), check_slots(slots), check_needs(needs))
    with pub.atomic() as tx:
        _no_twin(tx, made[1], made[2])
        rows = tx.execute(
            "INSERT INTO pub_shift_template (label, weekday, start_time, end_time, slots, "
            "needs) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            [*made[:5], json.dumps(list(made[5]))])
        shift = _one(tx, int(rows[0]["id"]))
    return Verdict(True, message=f"added {shift.describe()} to the pub's "
                   "week: weeks created from now on get it", detail=shift.as_json())


def edit(pub: Pub, shift_id: int, *, label: str | None = None, day: str | None = None,
         start: str | None = None, end: str | None = None, slots: int | None = None,
         needs: Sequence[str] | None = None) -> Verdict:
    """``pubsched shift edit``: change what is given (``needs=()`` clears the skills);
    weeks already created keep the shifts they were created with."""
    if all(v is None for v in (label, day, start, end, slots, needs)):
        raise BadInput("nothing to change: give --label, --day, --start, --end, --slots, "
                       "--needs or --no-needs")
    changes: dict[str, Any] = {}
    if label is not None:
        changes["label"] = check_label(label)
    if day is not None:
        changes["weekday"] = check_day(day)
    if start is not None:
        changes["start_time"] = check_time(start, "start")
    if end is not None:
        changes["end_time"] = check_time(end, "end")
    if slots is not None:
        changes["slots"] = check_slots(slots)
    if needs is not None:
        changes["needs"] = json.dumps(list(check_needs(needs)))
    with pub.atomic() as tx:
        old = _one(tx, shift_id)
        _no_twin(tx, changes.get("weekday", old.weekday), changes.get("start_time", old.start),
                 own=old.id)
        sets = ", ".join(f"{column} = %s" for column in changes)
        tx.execute(f"UPDATE pub_shift_template SET {sets} WHERE id = %s",
                   [*changes.values(), shift_id])
        shift = _one(tx, shift_id)
    return Verdict(True, message=f"the pub's week now has {shift.describe()}: weeks created "
                   "from now on get it so; weeks already created keep theirs",
                   detail=shift.as_json())


def remove(pub: Pub, shift_id: int) -> Verdict:
    """``pubsched shift remove``: out of the template; the weeks that have it keep it (a
    week's shifts are its own rows, copied when it was created)."""
    with pub.atomic() as tx:
        shift = _one(tx, shift_id)
        tx.execute("DELETE FROM pub_shift_template WHERE id = %s", [shift_id])
    return Verdict(True, message=f"removed {shift.describe()} from the "
                   "pub's week: weeks that have it keep it", detail=shift.as_json())
