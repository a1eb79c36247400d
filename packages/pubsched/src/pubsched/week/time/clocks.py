"""A shift's two wall times placed on the pub's clock, and what the clocks did to them in
the operator's words (the rule itself is the package docstring's, "Local times that do not
exist, or exist twice").

Why a shift needs more than :func:`~.days.local_to_utc` twice: a shift whose start falls
into the spring-forward gap moves forward by the gap, and its end may then come before it
(02:30-03:00 on the night the clocks go from 02:00 to 03:00: 03:30, then 03:00). Such a
shift moves whole: it starts where its start moved to and keeps its planned length
(03:30-04:00), so a week with one never fails to be made. Every shift whose time the
clocks touch (a time that does not exist, a time that happens twice, a length that is not
the one on the wall) carries a note saying so, for the operator to see when the week is
made and on its page. Pure, as the rest of the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from .days import local_to_utc, zone


@dataclass(frozen=True)
class Placed:
    """A shift's instants (UTC) and the note of what the clocks did to it ("": nothing)."""

    starts_at: datetime
    ends_at: datetime
    note: str = ""


def place_shift(night: date, start: time, end: time, tz: str | ZoneInfo) -> Placed:
    """The shift starting at ``start`` on ``night`` and ending at ``end`` (on the next day
    when at or before ``start``), by the package's rule; never of no length or less."""
    pub_zone = zone(tz)
    end_day = night + timedelta(days=1) if end <= start else night
    planned = datetime.combine(end_day, end) - datetime.combine(night, start)
    starts_at = local_to_utc(night, start, pub_zone)
    ends_at = local_to_utc(end_day, end, pub_zone)
    whole = ends_at <= starts_at  # its start moved past its end: the shift moves whole
    if whole:
        ends_at = starts_at + planned
    said = [s for s in (_clock(night, start, pub_zone), _clock(end_day, end, pub_zone)) if s]
    lasts = ends_at - starts_at
    if not said and lasts == planned:
        return Placed(starts_at, ends_at)
    begins, finishes = starts_at.astimezone(pub_zone), ends_at.astimezone(pub_zone)
    runs = (f"It runs {begins:%H:%M} {begins.tzname()} to {finishes:%H:%M} "
            f"{finishes.tzname()}")
    if whole:
        runs += f", its {_length(planned)} kept"
    elif lasts != planned:
        runs += f" ({_length(lasts)}, not {_length(planned)} as on the wall)"
    first = said[0] if said else (f"the clocks change during it ({_day(night)}, "
                                  f"{pub_zone.key})")
    rest = "; ".join(said[1:])
    return Placed(starts_at, ends_at, f"{first}{'; ' + rest if rest else ''}. {runs}.")


def _clock(day: date, at: time, tz: ZoneInfo) -> str:
    """What the clocks do to ``at`` on ``day``: "" when it happens once, as written."""
    before = datetime.combine(day, at.replace(fold=0), tzinfo=tz)
    after = before.replace(fold=1)
    early, late = before.utcoffset(), after.utcoffset()
    if early is None or late is None or early == late:
        return ""
    step = _length(abs(late - early))
    where = f"{_day(day)}, {tz.key}"
    if early < late:  # a gap: fold=0 reads it with the offset before the change
        moved = before.astimezone(UTC).astimezone(tz)
        return (f"{at:%H:%M} does not exist on {where} (the clocks go forward {step}), so "
                f"it reads as {moved:%H:%M} {moved.tzname()}")
    return (f"{at:%H:%M} happens twice on {where} (the clocks go back {step}), so the "
            f"first is taken, {before:%H:%M} {before.tzname()}")


def _day(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b %Y}"


def _length(span: timedelta) -> str:
    """``30 minutes``, ``an hour``, ``8 h``, ``6 h 30 min``."""
    minutes = int(span.total_seconds()) // 60
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} minutes"
    if hours == 1 and not rest:
        return "an hour"
    return f"{hours} h" + (f" {rest} min" if rest else "")


__all__ = ["Placed", "place_shift"]
