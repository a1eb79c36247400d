"""The week, the zone and the local wall clock: the rules the rest of :mod:`pubsched.week.time`
builds on (which Monday a week is, which zone, how a local time becomes an instant, how a
week's ``settings_override`` is read), and the errors of the package. Pure: no database,
no clock, no environment read (``zone_from_env`` is handed the environment)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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


class OutOfRange(WeekTimeError):
    """A week or an instant so near the calendar's first or last day (year 1, year 9999)
    that one of its derived instants (a moment up to four weeks before the Monday, a
    shift ending after the Sunday, either in any zone) could not be represented."""


EDGE_MARGIN = timedelta(days=40)
"""How far from ``date.min``/``date.max`` a week's Monday or an instant must stay: four
weeks of run moments before the Monday, the week and its last shift after, a day of zone
offsets either side, and room to spare."""
FIRST_DAY = date.min + EDGE_MARGIN
LAST_DAY = date.max - EDGE_MARGIN


# -- weeks and zones ------------------------------------------------------------------------

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_HH_MM = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")


def week_of(value: str | date) -> date:
    """The week's Monday, from ``YYYY-MM-DD`` or a ``date``; anything else is `BadWeek`,
    said as the operator would put it (the CLI's argument and the web's field alike), with
    the Monday of a day that is not one."""
    if isinstance(value, str):
        if not _ISO_DATE.fullmatch(value):
            raise BadWeek(f"a week is named by its Monday, as YYYY-MM-DD (such as "
                          f"2026-12-07), got {value!r}")
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise BadWeek(f"there is no day {value} on the calendar: a week is named by its "
                          "Monday, as YYYY-MM-DD") from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        day = value
    else:
        raise BadWeek(f"a week is named by its Monday, as YYYY-MM-DD, got {value!r}")
    if day.weekday() != 0:
        monday = day - timedelta(days=day.weekday())
        raise BadWeek(f"a week is named by its Monday: {day.isoformat()} is a {day:%A}; "
                      f"its week is {monday.isoformat()}")
    if not FIRST_DAY <= day <= LAST_DAY:
        raise BadWeek(f"week {day.isoformat()} is too near the calendar's edge: weeks run "
                      f"from {FIRST_DAY.isoformat()} to {LAST_DAY.isoformat()}")
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
    return in_range(now)


def in_range(at: datetime) -> datetime:
    """An aware ``at`` as UTC, if its week and every instant derived from it can be
    represented (`OutOfRange` otherwise: year 1 at +14:00 is before UTC's first day)."""
    try:
        value = at.astimezone(UTC)
    except OverflowError:
        value = None
    if value is None or not FIRST_DAY <= value.date() <= LAST_DAY:
        raise OutOfRange(f"{at.isoformat()} is too near the calendar's edge: instants run "
                         f"from {FIRST_DAY.isoformat()} to {LAST_DAY.isoformat()}")
    return value


def local_to_utc(day: date, at: time, tz: str | ZoneInfo) -> datetime:
    """The instant of wall time ``at`` on ``day``: a time in a gap moves forward by the
    gap, a time that happens twice is its first occurrence (``fold=0``; module docstring).
    """
    if at.tzinfo is not None:
        raise BadSettings(f"local time must be naive (the zone is the pub's), got {at!r}")
    local = datetime.combine(day, at.replace(fold=0), tzinfo=zone(tz))
    try:
        return in_range(local)
    except OutOfRange as exc:
        raise BadSettings(str(exc)) from None


def wall_clock_before(at: datetime, hours: float, tz: str | ZoneInfo) -> datetime:
    """The instant the pub's clock on the wall reads ``hours`` earlier than it reads at
    ``at``: 24 hours before Sunday 20:00 is Saturday 20:00, and 6 hours before 05:00 is
    23:00 the evening before, whether or not the clocks change between (a reminder "a day
    before" comes at the time of day a person expects). The wall time found obeys
    :func:`local_to_utc`'s rule (a gap moves forward, a repeated hour is its first)."""
    local = as_utc(at).astimezone(zone(tz)).replace(tzinfo=None) - timedelta(hours=hours)
    return local_to_utc(local.date(), local.time(), tz)


def parse_hh_mm(value: object) -> time:
    match = _HH_MM.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise BadSettings(f"expected a local time HH:MM, got {value!r}")
    return time(int(match.group(1)), int(match.group(2)))


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
