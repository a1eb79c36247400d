"""The pub week and its local times: which Monday a week is, when its shifts are, when its
form opens and closes, when it is generated and sent.

Pure: no database, no clock (``now`` is always an argument), no environment read (the app
passes the zone, ``PUBSCHED_TZ``, default `DEFAULT_TZ`). Every instant handed out is an
aware UTC ``datetime``; local times exist only as rules ("Friday 18:00 in the pub's zone")
until they are turned into instants here.

A week
======
A week is named by its Monday (``week_of``), an ISO date ``YYYY-MM-DD`` or a ``date``.
Anything else (another weekday, ``2026-W49-1``, ``20261130``, a datetime) is `BadWeek`.

Local times that do not exist, or exist twice
=============================================
One rule, `local_to_utc`, turns every local wall time into an instant (PEP 495's
``fold=0``):

- A time that does not exist (clocks spring forward over it) moves forward by the length
  of the gap: 02:30 on 2026-03-08 in New York is 03:30 EDT (07:30 UTC).
- A time that exists twice (clocks fall back over it) is its first occurrence, still on
  summer time: 01:30 on 2026-11-01 in New York is 01:30 EDT (05:30 UTC).

The pub runs by the clock on the wall, so a shift's length follows it. The default
18:00-02:00 shift on the night of Sat 2026-03-07 in New York runs 23:00-07:00 UTC (8 h:
02:00 does not exist and becomes 03:00 EDT, the same instant as 02:00 EST); on the night of
Sat 2026-10-31 it runs 22:00-07:00 UTC (9 h: 01:00-02:00 happens twice, and 02:00 comes
once, after both). In London the clocks change at 01:00 GMT: the night of Sat 2026-03-28
runs 18:00-01:00 UTC (7 h) and the night of Sat 2026-10-24 runs 17:00-02:00 UTC (9 h).
Moving forward by the gap keeps a span's length (02:15-02:45 becomes 03:15-03:45) but not
the order of times around it: on 2026-03-08 in New York 02:30 (= 03:30 EDT) comes after
03:00 (java.time's rule as well). A shift that would end before it starts because of it
(say 02:30-03:15 on that night) is refused as `BadSettings`, never given a length of zero
or less.

Shifts
======
A `ShiftTemplate` is a weekday, a local start and end, and a number of slots; an end at or
before the start is on the next day (the shift crosses midnight) and belongs to the night
it starts (`WeekShift.night`, what the picker's one-shift-a-night rule counts). The
default, `DEFAULT_TEMPLATE`, is Thu, Fri and Sat 18:00-02:00 with 2 slots each.

The run's times, and their defaults
===================================
`RunSettings` places each of the run's moments as a `LocalMoment`: a day relative to the
week's Monday (``-7`` = the Monday before) and a local time. The defaults, chosen so that
tenders answer early in the week before and know their shifts by the weekend before:

==================  ================================  =========================
opens_at            Monday of the week before, 10:00  the form opens
deadline_at         Wednesday before, 20:00           tenders should have answered
generate_at         Thursday before, 10:00            autopilot generates
send_window_start   Thursday before, 12:00            the operator may send
send_window_end     Friday before, 18:00              past it: "approved but not sent"
==================  ================================  =========================

The deadline does not end submissions (the close does); it drives the nudge and the
autopilot. The moments must come in the order of the table (opens < deadline <= generate
<= send window start < send window end), or `BadSettings`.

A week's ``settings_override`` (migration 0033's JSON) is applied on top: an object whose
keys are those names (and ``"shifts"``, a list of templates for that week only), each
value either ``{"day": -5, "at": "22:00"}`` (relative, as above), ``"2026-11-26T12:00"``
(a local wall time, by the rules above) or ``"2026-11-26T17:00:00Z"`` (an exact instant,
any offset). An unknown key is `BadSettings`: a misspelt override must not silently
leave the default in force.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from typing import Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "DEFAULT_SETTINGS",
    "DEFAULT_TEMPLATE",
    "DEFAULT_TZ",
    "TZ_ENV",
    "WEEKDAY_BY_NAME",
    "BadSettings",
    "BadWeek",
    "LocalMoment",
    "NaiveTimeError",
    "RunMoment",
    "RunSettings",
    "RunTimes",
    "ShiftTemplate",
    "WeekShift",
    "WeekTimeError",
    "as_utc",
    "local_to_utc",
    "parse_override",
    "run_times",
    "shifts_for_week",
    "template_from_json",
    "week_containing",
    "week_of",
    "with_moment",
    "zone",
    "zone_from_env",
]

DEFAULT_TZ = "America/New_York"
TZ_ENV = "PUBSCHED_TZ"

_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAY_BY_NAME = {
    name: number for number, day in enumerate(_DAY_NAMES) for name in (day, day[:3])
}
"""``"thu"`` or ``"thursday"`` (any case) -> 3, as ``date.weekday()`` numbers them."""

RunMoment = Literal[
    "opens_at", "deadline_at", "generate_at", "send_window_start", "send_window_end"
]
RUN_MOMENTS: tuple[RunMoment, ...] = get_args(RunMoment)
OVERRIDE_KEYS = (*RUN_MOMENTS, "shifts")


# -- errors ---------------------------------------------------------------------------------


class WeekTimeError(ValueError):
    """Root of this module's errors: bad input from the caller, never a lost race."""


class BadWeek(WeekTimeError):
    """A ``week_of`` that is not the ISO date of a Monday."""


class BadSettings(WeekTimeError):
    """A zone, template, setting or ``settings_override`` that cannot be used."""


class NaiveTimeError(WeekTimeError):
    """A ``datetime`` without a zone where an instant is needed (``now`` above all)."""


# -- weeks and zones ------------------------------------------------------------------------

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_HH_MM = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")


def week_of(value: str | date) -> date:
    """The week's Monday, from ``YYYY-MM-DD`` or a ``date``; anything else is `BadWeek`."""
    if isinstance(value, str):
        if not _ISO_DATE.fullmatch(value):
            raise BadWeek(f"week_of must be an ISO date YYYY-MM-DD, got {value!r}")
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise BadWeek(f"week_of is not a calendar date: {value!r}") from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        day = value
    else:
        raise BadWeek(f"week_of must be an ISO date string or a date, got {value!r}")
    if day.weekday() != 0:
        raise BadWeek(f"week_of must be a Monday, got {day.isoformat()} ({day:%A})")
    return day


def week_containing(at: date | datetime, tz: str | ZoneInfo) -> date:
    """The Monday of the week that ``at`` falls in, on the pub's local calendar."""
    day = as_utc(at).astimezone(zone(tz)).date() if isinstance(at, datetime) else at
    return day - timedelta(days=day.weekday())


def zone(tz: str | ZoneInfo) -> ZoneInfo:
    """The zone named ``tz`` (an IANA name such as ``Europe/London``), or `BadSettings`."""
    if isinstance(tz, ZoneInfo):
        return tz
    if not isinstance(tz, str) or not tz:
        raise BadSettings(f"time zone must be an IANA name, got {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadSettings(f"unknown time zone {tz!r}") from None


def zone_from_env(environ: Mapping[str, str]) -> ZoneInfo:
    """The zone ``PUBSCHED_TZ`` names in ``environ`` (pass ``os.environ``), default NY."""
    return zone(environ.get(TZ_ENV) or DEFAULT_TZ)


def as_utc(now: datetime) -> datetime:
    """``now`` as UTC; a naive datetime is `NaiveTimeError`, never guessed at."""
    if not isinstance(now, datetime):
        raise NaiveTimeError(f"expected an aware datetime, got {now!r}")
    if now.tzinfo is None or now.utcoffset() is None:
        raise NaiveTimeError(f"datetime without a zone: {now!r} (pass an aware UTC time)")
    return now.astimezone(UTC)


def local_to_utc(day: date, at: time, tz: str | ZoneInfo) -> datetime:
    """The instant of wall time ``at`` on ``day``: a time in a gap moves forward by the
    gap, a time that happens twice is its first occurrence (``fold=0``; module docstring).
    """
    if at.tzinfo is not None:
        raise BadSettings(f"local time must be naive (the zone is the pub's), got {at!r}")
    local = datetime.combine(day, at.replace(fold=0), tzinfo=zone(tz))
    return local.astimezone(UTC)


# -- shifts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShiftTemplate:
    """A weekly shift: ``weekday`` 0 = Monday; an ``end`` at or before ``start`` is on
    the next day."""

    weekday: int
    start: time
    end: time
    slots: int = 2

    def __post_init__(self) -> None:
        if isinstance(self.weekday, bool) or self.weekday not in range(7):
            raise BadSettings(f"weekday must be 0 (Monday) to 6 (Sunday), got {self.weekday!r}")
        for name in ("start", "end"):
            value = getattr(self, name)
            if not isinstance(value, time) or value.tzinfo is not None:
                raise BadSettings(f"shift {name} must be a naive local time, got {value!r}")
        if self.start == self.end:
            raise BadSettings(f"shift starts and ends at {self.start}: length unclear")
        if isinstance(self.slots, bool) or not isinstance(self.slots, int) or self.slots < 0:
            raise BadSettings(f"slots must be a non-negative integer, got {self.slots!r}")

    @property
    def crosses_midnight(self) -> bool:
        return self.end < self.start


DEFAULT_TEMPLATE: tuple[ShiftTemplate, ...] = tuple(
    ShiftTemplate(weekday, time(18), time(2), 2) for weekday in (3, 4, 5)
)


@dataclass(frozen=True)
class WeekShift:
    """A concrete shift of one week, its instants in UTC.

    ``key`` (``2026-12-03T18:00``: the night and the local start) is unique in a week
    and stable, for the database's natural key and the picker's shift id.
    """

    key: str
    night: date
    starts_at: datetime
    ends_at: datetime
    slots: int


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
                start=_parse_hh_mm(item["start"]),
                end=_parse_hh_mm(item["end"]),
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
    night and start, or a shift whose span vanishes into a DST gap.
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
        end_day = night + timedelta(days=1) if item.end < item.start else night
        starts_at = local_to_utc(night, item.start, pub_zone)
        ends_at = local_to_utc(end_day, item.end, pub_zone)
        if ends_at <= starts_at:
            raise BadSettings(
                f"shift {key}-{item.end:%H:%M} has no length in {pub_zone.key} "
                "(its start and end fall into a daylight-saving gap)"
            )
        shifts[key] = WeekShift(key, night, starts_at, ends_at, item.slots)
    return tuple(sorted(shifts.values(), key=lambda s: (s.starts_at, s.key)))


# -- the run's times ------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalMoment:
    """A local wall time ``at`` on the day ``day`` days after the week's Monday."""

    day: int
    at: time

    def __post_init__(self) -> None:
        if isinstance(self.day, bool) or not isinstance(self.day, int) or abs(self.day) > 28:
            raise BadSettings(f"day must be an integer within 4 weeks of Monday, got {self.day!r}")
        if not isinstance(self.at, time) or self.at.tzinfo is not None:
            raise BadSettings(f"at must be a naive local time, got {self.at!r}")

    def instant(self, monday: date, tz: str | ZoneInfo) -> datetime:
        return local_to_utc(monday + timedelta(days=self.day), self.at, tz)


@dataclass(frozen=True)
class RunSettings:
    """Where the run's moments fall, relative to the week's Monday (module docstring)."""

    opens_at: LocalMoment = LocalMoment(-7, time(10))
    deadline_at: LocalMoment = LocalMoment(-5, time(20))
    generate_at: LocalMoment = LocalMoment(-4, time(10))
    send_window_start: LocalMoment = LocalMoment(-4, time(12))
    send_window_end: LocalMoment = LocalMoment(-3, time(18))

    def __post_init__(self) -> None:
        for item in fields(self):
            if not isinstance(getattr(self, item.name), LocalMoment):
                raise BadSettings(f"{item.name} must be a LocalMoment")


DEFAULT_SETTINGS = RunSettings()


@dataclass(frozen=True)
class RunTimes:
    """One week's moments as UTC instants, in order (checked when built)."""

    week_of: date
    opens_at: datetime
    deadline_at: datetime
    generate_at: datetime
    send_window_start: datetime
    send_window_end: datetime

    def __post_init__(self) -> None:
        order = [(name, getattr(self, name)) for name in RUN_MOMENTS]
        for (earlier, first), (later, second) in pairwise(order):
            strict = earlier in ("opens_at", "send_window_start")
            if second < first or (strict and second == first):
                raise BadSettings(
                    f"{later} ({second.isoformat()}) must come "
                    f"{'after' if strict else 'no earlier than'} {earlier} "
                    f"({first.isoformat()}) for week {self.week_of.isoformat()}"
                )

    def has_passed(self, moment: RunMoment, now: datetime) -> bool:
        """Whether ``now`` is at or past ``moment`` (``"deadline_at"``, ...)."""
        if moment not in RUN_MOMENTS:
            raise BadSettings(f"unknown run moment {moment!r}; one of {RUN_MOMENTS}")
        instant: datetime = getattr(self, moment)
        return as_utc(now) >= instant


def parse_override(override: Mapping[str, object] | str | None) -> Mapping[str, object]:
    """A week's ``settings_override``, from its JSON text or the decoded object; None and
    ``""`` mean no override. Unknown keys are `BadSettings`."""
    if override is None or override == "":
        return {}
    if isinstance(override, str):
        try:
            override = json.loads(override)
        except json.JSONDecodeError as exc:
            raise BadSettings(f"settings_override is not JSON: {exc}") from None
    if not isinstance(override, Mapping):
        raise BadSettings(f"settings_override must be a JSON object, got {override!r}")
    unknown = sorted(str(key) for key in override if key not in OVERRIDE_KEYS)
    if unknown:
        raise BadSettings(f"unknown settings_override keys {unknown}; known: {OVERRIDE_KEYS}")
    return override


def run_times(
    week: str | date,
    tz: str | ZoneInfo,
    settings: RunSettings = DEFAULT_SETTINGS,
    override: Mapping[str, object] | str | None = None,
) -> RunTimes:
    """The week's opens-at, deadline, generate time and send window, as UTC instants:
    ``settings`` with the week's ``override`` applied on top."""
    monday, pub_zone = week_of(week), zone(tz)
    if not isinstance(settings, RunSettings):
        raise BadSettings(f"settings must be RunSettings, got {settings!r}")
    overrides = parse_override(override)
    instants: dict[str, datetime] = {}
    for name in RUN_MOMENTS:
        if name in overrides:
            instants[name] = _override_instant(name, overrides[name], monday, pub_zone)
        else:
            instants[name] = getattr(settings, name).instant(monday, pub_zone)
    return RunTimes(week_of=monday, **instants)


def with_moment(settings: RunSettings, name: RunMoment, moment: LocalMoment) -> RunSettings:
    """``settings`` with one moment moved (for configuration code)."""
    if name not in RUN_MOMENTS:
        raise BadSettings(f"unknown run moment {name!r}; one of {RUN_MOMENTS}")
    return replace(settings, **{name: moment})


def _override_instant(name: str, value: object, monday: date, tz: ZoneInfo) -> datetime:
    if isinstance(value, dict):
        if set(value) != {"day", "at"}:
            raise BadSettings(f"{name}: a relative override is {{'day': int, 'at': 'HH:MM'}}")
        return LocalMoment(value["day"], _parse_hh_mm(value["at"])).instant(monday, tz)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise BadSettings(f"{name}: not an ISO date-time: {value!r}") from None
        if parsed.tzinfo is None:
            return local_to_utc(parsed.date(), parsed.time(), tz)
        return parsed.astimezone(UTC)
    raise BadSettings(f"{name}: expected {{'day', 'at'}} or an ISO date-time, got {value!r}")


def _parse_hh_mm(value: object) -> time:
    match = _HH_MM.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise BadSettings(f"expected a local time HH:MM, got {value!r}")
    return time(int(match.group(1)), int(match.group(2)))
