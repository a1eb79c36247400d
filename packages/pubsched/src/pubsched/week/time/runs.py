"""A run's moments: where they fall relative to the week's Monday (``RunSettings``), one
week's moments as checked UTC instants (``RunTimes``), and the week's ``settings_override``
applied on top (``run_times``); the table of defaults is in the package docstring."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import date, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from .days import (
    RUN_MOMENTS,
    BadSettings,
    OutOfRange,
    RunMoment,
    as_utc,
    in_range,
    local_to_utc,
    parse_hh_mm,
    parse_override,
    week_of,
    zone,
)

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
    defaults: dict[str, datetime] = {
        name: getattr(settings, name).instant(monday, pub_zone) for name in RUN_MOMENTS}
    instants: dict[str, datetime] = {}
    moved = False
    for earlier, name in zip((None, *RUN_MOMENTS), RUN_MOMENTS, strict=False):
        if name in overrides:
            instants[name] = _override_instant(name, overrides[name], monday, pub_zone)
            moved = True
        elif moved and earlier is not None:
            instants[name] = _following(earlier, name, instants[earlier], defaults)
        else:
            instants[name] = defaults[name]
    return RunTimes(week_of=monday, **instants)


def _following(earlier: str, name: str, before: datetime, defaults: dict[str, datetime]
               ) -> datetime:
    """A moment the override left alone, after one it moved: its default, unless that no
    longer comes after the moved one (an extended deadline past the generate time and the
    send window); then it follows, its default distance after the earlier moment kept
    (so the order holds and the operator keeps the time the settings give each step)."""
    value = defaults[name]
    strict = earlier in ("opens_at", "send_window_start")
    if value > before or (value == before and not strict):
        return value
    gap = max(defaults[name] - defaults[earlier], timedelta(0))
    try:
        return in_range(before + (gap if gap or not strict else timedelta(minutes=1)))
    except (OverflowError, OutOfRange):
        raise BadSettings(f"{name} cannot follow {earlier} ({before.isoformat()})") from None


def with_moment(settings: RunSettings, name: RunMoment, moment: LocalMoment) -> RunSettings:
    """``settings`` with one moment moved (for configuration code)."""
    if name not in RUN_MOMENTS:
        raise BadSettings(f"unknown run moment {name!r}; one of {RUN_MOMENTS}")
    return replace(settings, **{name: moment})


def _override_instant(name: str, value: object, monday: date, tz: ZoneInfo) -> datetime:
    if isinstance(value, dict):
        if set(value) != {"day", "at"}:
            raise BadSettings(f"{name}: a relative override is {{'day': int, 'at': 'HH:MM'}}")
        return LocalMoment(value["day"], parse_hh_mm(value["at"])).instant(monday, tz)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise BadSettings(f"{name}: not an ISO date-time: {value!r}") from None
        if parsed.tzinfo is None:
            return local_to_utc(parsed.date(), parsed.time(), tz)
        try:
            return in_range(parsed)
        except OutOfRange as exc:
            raise BadSettings(f"{name}: {exc}") from None
    raise BadSettings(f"{name}: expected {{'day', 'at'}} or an ISO date-time, got {value!r}")
