"""A week's shifts: the weekly templates (``ShiftTemplate``), their JSON form, and the
concrete shifts of one week in UTC (``shifts_for_week``), by the wall-clock rules of
:mod:`pubsched.week.time.days` (see the package docstring for DST)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from .clocks import place_shift
from .days import (
    WEEKDAY_BY_NAME,
    BadSettings,
    parse_hh_mm,
    parse_override,
    week_of,
    zone,
)

# -- shifts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShiftTemplate:
    """A weekly shift: ``weekday`` 0 = Monday; an ``end`` at or before ``start`` is on
    the next day (at the start: a 24-hour shift). ``label`` and ``needs`` (the skills it
    needs) ride along to the week's shift; the pub's own template is the database's
    ``pub_shift_template`` (:mod:`pubsched.week.template`), read into these."""

    weekday: int
    start: time
    end: time
    slots: int = 2
    label: str = ""
    needs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.weekday, bool) or self.weekday not in range(7):
            raise BadSettings(f"weekday must be 0 (Monday) to 6 (Sunday), got {self.weekday!r}")
        for name in ("start", "end"):
            value = getattr(self, name)
            if not isinstance(value, time) or value.tzinfo is not None:
                raise BadSettings(f"shift {name} must be a naive local time, got {value!r}")
        if isinstance(self.slots, bool) or not isinstance(self.slots, int) or self.slots < 0:
            raise BadSettings(f"slots must be a non-negative integer, got {self.slots!r}")

    @property
    def crosses_midnight(self) -> bool:
        return self.end <= self.start


DEFAULT_TEMPLATE: tuple[ShiftTemplate, ...] = tuple(
    ShiftTemplate(weekday, time(18), time(2), 2, label=f"{name} night")
    for weekday, name in ((3, "Thursday"), (4, "Friday"), (5, "Saturday"))
)
"""What migration 0038 seeds into ``pub_shift_template``, kept here for the pure functions'
callers (tests, a rehearsal): the app never reads it, it reads the table, and
``tests/pubsched/test_template.py`` keeps the two equal on a fresh database."""


@dataclass(frozen=True)
class WeekShift:
    """A concrete shift of one week, its instants in UTC.

    ``key`` (``2026-12-03T18:00``: the night and the local start) is unique in a week
    and stable, for the database's natural key and the picker's shift id. ``note`` says
    what the clocks did to its times (:mod:`.clocks`; "": nothing).
    """

    key: str
    night: date
    starts_at: datetime
    ends_at: datetime
    slots: int
    label: str = ""
    needs: tuple[str, ...] = ()
    note: str = ""


def template_from_json(items: object) -> tuple[ShiftTemplate, ...]:
    """Templates from JSON-shaped data: ``[{"day": "thu", "start": "18:00",
    "end": "02:00", "slots": 2}, ...]`` (``slots`` optional, default 2)."""
    if not isinstance(items, list):
        raise BadSettings(f"shift templates must be a list, got {items!r}")
    templates = []
    for item in items:
        if not isinstance(item, dict) or not {"day", "start", "end"} <= item.keys():
            raise BadSettings(f"a shift template needs day, start and end: {item!r}")
        unknown = sorted(set(item) - {"day", "start", "end", "slots"})
        if unknown:
            raise BadSettings(f"unknown shift template keys {unknown} in {item!r}")
        day = item["day"]
        if not isinstance(day, str) or day.lower() not in WEEKDAY_BY_NAME:
            raise BadSettings(f"shift day must be a weekday name such as 'thu', got {day!r}")
        templates.append(
            ShiftTemplate(
                weekday=WEEKDAY_BY_NAME[day.lower()],
                start=parse_hh_mm(item["start"]),
                end=parse_hh_mm(item["end"]),
                slots=item.get("slots", 2),
            )
        )
    return tuple(templates)


def shifts_for_week(
    week: str | date,
    tz: str | ZoneInfo,
    template: Sequence[ShiftTemplate] = DEFAULT_TEMPLATE,
    override: Mapping[str, object] | str | None = None,
) -> tuple[WeekShift, ...]:
    """The week's shifts from ``template`` (or the override's ``"shifts"``), in time order.

    Raises `BadWeek` for a bad week and `BadSettings` for two templates with the same
    night and start. A shift the clocks touch is placed by :func:`.clocks.place_shift`
    (never refused: a start in the spring-forward gap moves the shift whole) and says so
    in its ``note``.
    """
    monday, pub_zone = week_of(week), zone(tz)
    overrides = parse_override(override)
    if "shifts" in overrides:
        template = template_from_json(overrides["shifts"])
    shifts: dict[str, WeekShift] = {}
    for item in template:
        if not isinstance(item, ShiftTemplate):
            raise BadSettings(f"templates must be ShiftTemplate objects, got {item!r}")
        night = monday + timedelta(days=item.weekday)
        key = f"{night.isoformat()}T{item.start:%H:%M}"
        if key in shifts:
            raise BadSettings(f"two shift templates start at {key}")
        placed = place_shift(night, item.start, item.end, pub_zone)
        shifts[key] = WeekShift(key, night, placed.starts_at, placed.ends_at, item.slots,
                                item.label, item.needs, placed.note)
    return tuple(sorted(shifts.values(), key=lambda s: (s.starts_at, s.key)))
