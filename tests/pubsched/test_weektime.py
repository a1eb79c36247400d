"""Week and local-time rules, on the 2026 clock-change days of New York and London.

New York: clocks spring forward 2026-03-08 at 02:00 EST (02:00-03:00 does not exist) and
fall back 2026-11-01 at 02:00 EDT (01:00-02:00 happens twice). London: 2026-03-29 at 01:00
GMT (01:00-02:00 does not exist) and 2026-10-25 at 02:00 BST (01:00-02:00 twice).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from pubsched.week.time import (
    DEFAULT_SETTINGS,
    DEFAULT_TEMPLATE,
    BadSettings,
    BadWeek,
    LocalMoment,
    NaiveTimeError,
    RunSettings,
    ShiftTemplate,
    WeekTimeError,
    as_utc,
    local_to_utc,
    parse_override,
    run_times,
    shifts_for_week,
    template_from_json,
    week_containing,
    week_of,
    with_moment,
    zone,
    zone_from_env,
)

NY, LONDON = "America/New_York", "Europe/London"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# -- weeks ----------------------------------------------------------------------------------


def test_week_of_is_a_monday() -> None:
    assert week_of("2026-11-30") == date(2026, 11, 30)
    assert week_of(date(2026, 11, 30)) == date(2026, 11, 30)


@pytest.mark.parametrize(
    "value",
    [
        "2026-12-01",  # a Tuesday
        "2026-11-29",  # a Sunday
        "2026-W49-1",  # ISO week notation: fromisoformat accepts it, we do not
        "20261130",  # basic format: the same
        "2026-11-31",
        " 2026-11-30",
        "2026-11-30T00:00",
        "",
        datetime(2026, 11, 30),  # a datetime is not a week
        20261130,
        None,
    ],
)
def test_week_of_refuses_anything_but_a_monday(value: object) -> None:
    with pytest.raises(BadWeek):
        week_of(value)  # type: ignore[arg-type]


def test_errors_are_value_errors_of_one_family() -> None:
    for error in (BadWeek, BadSettings, NaiveTimeError):
        assert issubclass(error, WeekTimeError)
    assert issubclass(WeekTimeError, ValueError)


def test_week_containing_follows_the_local_calendar() -> None:
    # 04:30 UTC on Monday 2 Nov is still Sunday 23:30 in New York: the week before.
    assert week_containing(utc(2026, 11, 2, 4, 30), NY) == date(2026, 10, 26)
    assert week_containing(utc(2026, 11, 2, 4, 30), LONDON) == date(2026, 11, 2)
    assert week_containing(date(2026, 12, 6), NY) == date(2026, 11, 30)
    with pytest.raises(NaiveTimeError):
        week_containing(datetime(2026, 11, 2, 4, 30), NY)


# -- zones and instants ---------------------------------------------------------------------


def test_zone_by_name_and_from_the_environment() -> None:
    assert zone(NY) == ZoneInfo(NY)
    assert zone_from_env({}) == ZoneInfo(NY)
    assert zone_from_env({"PUBSCHED_TZ": LONDON}) == ZoneInfo(LONDON)
    for bad in ("Mars/Olympus_Mons", "", "../etc/passwd", 5):
        with pytest.raises(BadSettings):
            zone(bad)  # type: ignore[arg-type]


def test_as_utc_refuses_naive_times() -> None:
    eastern = timezone(timedelta(hours=-5))
    assert as_utc(datetime(2026, 12, 1, 8, tzinfo=eastern)) == utc(2026, 12, 1, 13)
    with pytest.raises(NaiveTimeError):
        as_utc(datetime(2026, 12, 1, 8))
    with pytest.raises(NaiveTimeError):
        as_utc(date(2026, 12, 1))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tz", "day", "wall", "expected"),
    [
        # New York, spring forward on 2026-03-08: a time in the gap moves forward by it.
        (NY, date(2026, 3, 8), time(1, 59), utc(2026, 3, 8, 6, 59)),
        (NY, date(2026, 3, 8), time(2, 0), utc(2026, 3, 8, 7, 0)),  # = 03:00 EDT
        (NY, date(2026, 3, 8), time(2, 30), utc(2026, 3, 8, 7, 30)),  # = 03:30 EDT
        (NY, date(2026, 3, 8), time(3, 0), utc(2026, 3, 8, 7, 0)),
        # New York, fall back on 2026-11-01: a time that happens twice is the first.
        (NY, date(2026, 11, 1), time(0, 59), utc(2026, 11, 1, 4, 59)),
        (NY, date(2026, 11, 1), time(1, 30), utc(2026, 11, 1, 5, 30)),  # EDT, not EST
        (NY, date(2026, 11, 1), time(2, 0), utc(2026, 11, 1, 7, 0)),  # once, EST
        # London, spring forward on 2026-03-29 at 01:00 GMT.
        (LONDON, date(2026, 3, 29), time(0, 59), utc(2026, 3, 29, 0, 59)),
        (LONDON, date(2026, 3, 29), time(1, 30), utc(2026, 3, 29, 1, 30)),  # = 02:30 BST
        (LONDON, date(2026, 3, 29), time(2, 0), utc(2026, 3, 29, 1, 0)),
        # London, fall back on 2026-10-25 at 02:00 BST.
        (LONDON, date(2026, 10, 25), time(1, 30), utc(2026, 10, 25, 0, 30)),  # BST, first
        (LONDON, date(2026, 10, 25), time(2, 0), utc(2026, 10, 25, 2, 0)),
    ],
)
def test_local_to_utc_on_the_change_days(
    tz: str, day: date, wall: time, expected: datetime
) -> None:
    assert local_to_utc(day, wall, tz) == expected


@pytest.mark.parametrize(
    ("tz", "day", "gap_start"),
    [
        (NY, date(2026, 3, 8), time(2)),
        (NY, date(2026, 11, 1), None),
        (LONDON, date(2026, 3, 29), time(1)),
        (LONDON, date(2026, 10, 25), None),
    ],
)
def test_every_minute_of_the_change_days(tz: str, day: date, gap_start: time | None) -> None:
    """Each wall minute maps to itself, or (in the gap) to itself one hour later; the
    repeated hour maps to its first, summer-time, occurrence."""
    pub_zone = ZoneInfo(tz)
    minute = datetime.combine(day, time())
    while minute.date() == day:
        instant = local_to_utc(day, minute.time(), tz)
        back = instant.astimezone(pub_zone)
        in_gap = gap_start is not None and gap_start <= minute.time() < time(gap_start.hour + 1)
        assert back.replace(tzinfo=None) == (minute + timedelta(hours=1) if in_gap else minute)
        if gap_start is None and time(1) <= minute.time() < time(2):
            assert back.fold == 0 and back.dst() == timedelta(hours=1)
        minute += timedelta(minutes=1)


def test_the_change_days_are_the_2026_ones() -> None:
    for tz, day in ((NY, date(2026, 3, 8)), (NY, date(2026, 11, 1)),
                    (LONDON, date(2026, 3, 29)), (LONDON, date(2026, 10, 25))):
        before = local_to_utc(day, time(0), tz).astimezone(ZoneInfo(tz)).utcoffset()
        after = local_to_utc(day, time(12), tz).astimezone(ZoneInfo(tz)).utcoffset()
        assert before != after, (tz, day)


# -- shifts ---------------------------------------------------------------------------------


def test_default_template_is_thu_fri_sat_evenings() -> None:
    shifts = shifts_for_week("2026-11-30", NY)
    assert [s.key for s in shifts] == ["2026-12-03T18:00", "2026-12-04T18:00", "2026-12-05T18:00"]
    assert [s.night for s in shifts] == [date(2026, 12, 3), date(2026, 12, 4), date(2026, 12, 5)]
    assert all(s.slots == 2 for s in shifts)
    thursday = shifts[0]
    # Crosses midnight, belongs to the night it starts: Thursday 18:00 to Friday 02:00 EST.
    assert (thursday.starts_at, thursday.ends_at) == (utc(2026, 12, 3, 23), utc(2026, 12, 4, 7))
    assert thursday.starts_at.tzinfo is UTC


@pytest.mark.parametrize(
    ("tz", "week", "starts_at", "ends_at", "hours"),
    [
        # The Saturday shift runs over each 2026 change; the pub shuts at 02:00 on the wall.
        (NY, "2026-03-02", utc(2026, 3, 7, 23), utc(2026, 3, 8, 7), 8),
        (NY, "2026-10-26", utc(2026, 10, 31, 22), utc(2026, 11, 1, 7), 9),
        (LONDON, "2026-03-23", utc(2026, 3, 28, 18), utc(2026, 3, 29, 1), 7),
        (LONDON, "2026-10-19", utc(2026, 10, 24, 17), utc(2026, 10, 25, 2), 9),
    ],
)
def test_a_shift_across_the_change(
    tz: str, week: str, starts_at: datetime, ends_at: datetime, hours: int
) -> None:
    saturday = shifts_for_week(week, tz)[-1]
    assert saturday.night.weekday() == 5
    assert (saturday.starts_at, saturday.ends_at) == (starts_at, ends_at)
    assert saturday.ends_at - saturday.starts_at == timedelta(hours=hours)


def test_shift_ends_in_the_gap_or_the_repeated_hour() -> None:
    spring = shifts_for_week("2026-03-02", NY, [ShiftTemplate(5, time(22), time(2, 30))])
    assert spring[0].ends_at == utc(2026, 3, 8, 7, 30)  # 02:30 does not exist: 03:30 EDT
    autumn = shifts_for_week("2026-10-26", NY, [ShiftTemplate(5, time(22), time(1, 30))])
    assert autumn[0].ends_at == utc(2026, 11, 1, 5, 30)  # the first 01:30, EDT


def test_a_shift_whose_start_the_gap_moves_past_its_end_moves_whole() -> None:
    # Sunday 2026-03-08 02:30-03:00 and 02:30-03:15: 02:30 becomes 03:30 EDT, after the
    # end: each shift moves whole, its length kept, with a note; the next Sunday is plain
    for end, ends_at, length in ((time(3), utc(2026, 3, 8, 8), "30 minutes"),
                                 (time(3, 15), utc(2026, 3, 8, 8, 15), "45 minutes")):
        template = [ShiftTemplate(6, time(2, 30), end)]
        (gap,) = shifts_for_week("2026-03-02", NY, template)
        assert (gap.starts_at, gap.ends_at) == (utc(2026, 3, 8, 7, 30), ends_at)
        assert "02:30 does not exist on Sun 8 Mar 2026" in gap.note
        assert f"{length} kept" in gap.note and "03:30 EDT" in gap.note
        (plain,) = shifts_for_week("2026-03-09", NY, template)
        assert plain.note == "" and plain.starts_at == utc(2026, 3, 15, 6, 30)


def test_the_repeated_hour_and_a_night_across_a_change_are_noted() -> None:
    # 01:30 happens twice on Sun 1 Nov 2026 in New York: the first (EDT) is taken
    (twice,) = shifts_for_week("2026-10-26", NY, [ShiftTemplate(6, time(1, 30), time(3))])
    assert twice.starts_at == utc(2026, 11, 1, 5, 30)
    assert "01:30 happens twice" in twice.note and "the first is taken, 01:30 EDT" in twice.note
    # the default Saturday night over the fall-back: 9 hours, said so
    saturday = shifts_for_week("2026-10-26", NY)[-1]
    assert "9 h, not 8 h" in saturday.note
    assert all(s.note == "" for s in shifts_for_week("2026-12-07", NY))


def test_template_from_json_and_the_override_shifts() -> None:
    template = template_from_json(
        [{"day": "fri", "start": "17:00", "end": "23:30", "slots": 3},
         {"day": "Saturday", "start": "20:00", "end": "03:00"}]
    )
    assert template == (
        ShiftTemplate(4, time(17), time(23, 30), 3),
        ShiftTemplate(5, time(20), time(3), 2),
    )
    assert not template[0].crosses_midnight and template[1].crosses_midnight
    holiday = {"shifts": [{"day": "thu", "start": "12:00", "end": "20:00", "slots": 4}]}
    shifts = shifts_for_week("2026-11-23", NY, DEFAULT_TEMPLATE, holiday)
    assert [(s.key, s.slots) for s in shifts] == [("2026-11-26T12:00", 4)]


@pytest.mark.parametrize(
    "items",
    [
        {"day": "fri"},
        [{"day": "fri", "start": "18:00"}],
        [{"day": "friyay", "start": "18:00", "end": "02:00"}],
        [{"day": "fri", "start": "6pm", "end": "02:00"}],
        [{"day": "fri", "start": "24:00", "end": "02:00"}],
        [{"day": "fri", "start": "18:00", "end": "02:00", "slots": -1}],
        [{"day": "fri", "start": "18:00", "end": "02:00", "colour": "red"}],
    ],
)
def test_bad_templates_are_refused(items: object) -> None:
    with pytest.raises(BadSettings):
        template_from_json(items)


def test_an_end_at_the_start_is_the_next_day() -> None:
    """Issue 18's rule: an end at or before the start ends the next day (24 h at the start)."""
    whole_day = template_from_json([{"day": "fri", "start": "18:00", "end": "18:00"}])
    (shift,) = shifts_for_week("2026-11-30", NY, whole_day)
    assert shift.ends_at - shift.starts_at == timedelta(hours=24)


def test_two_templates_at_the_same_start_are_refused() -> None:
    twice = [ShiftTemplate(4, time(18), time(2)), ShiftTemplate(4, time(18), time(23))]
    with pytest.raises(BadSettings, match="two shift templates"):
        shifts_for_week("2026-11-30", NY, twice)
    with pytest.raises(BadSettings):
        ShiftTemplate(7, time(18), time(2))


# -- the run's times ------------------------------------------------------------------------


def test_default_run_times() -> None:
    times = run_times("2026-11-30", NY)
    assert times.week_of == date(2026, 11, 30)
    assert times.opens_at == utc(2026, 11, 23, 15)  # Mon 23 Nov 10:00 EST
    assert times.deadline_at == utc(2026, 11, 26, 1)  # Wed 25 Nov 20:00 EST
    assert times.generate_at == utc(2026, 11, 26, 15)  # Thu 26 Nov 10:00 EST
    assert times.send_window_start == utc(2026, 11, 26, 17)  # Thu 12:00
    assert times.send_window_end == utc(2026, 11, 27, 23)  # Fri 27 Nov 18:00 EST


def test_each_moment_takes_the_offset_of_its_own_day() -> None:
    # Week of 2026-11-02: the form opens on Mon 26 Oct (EDT), the rest falls after the change.
    times = run_times("2026-11-02", NY)
    assert times.opens_at == utc(2026, 10, 26, 14)  # 10:00 EDT
    assert times.deadline_at == utc(2026, 10, 29, 0)  # Wed 28 Oct 20:00 EDT
    london = run_times("2026-11-02", LONDON)
    assert london.opens_at == utc(2026, 10, 26, 10)  # 10:00 GMT, London changed on the 25th


def _dst_settings(deadline: time) -> RunSettings:
    # The deadline on the Sunday before the week: the change day for the weeks below.
    return RunSettings(
        opens_at=LocalMoment(-7, time(10)),
        deadline_at=LocalMoment(-1, deadline),
        generate_at=LocalMoment(-1, time(10)),
        send_window_start=LocalMoment(-1, time(12)),
        send_window_end=LocalMoment(0, time(12)),
    )


@pytest.mark.parametrize(
    ("tz", "week", "deadline", "expected"),
    [
        (NY, "2026-03-09", time(2, 30), utc(2026, 3, 8, 7, 30)),  # gap: 03:30 EDT
        (NY, "2026-11-02", time(1, 30), utc(2026, 11, 1, 5, 30)),  # twice: the first, EDT
        (LONDON, "2026-03-30", time(1, 30), utc(2026, 3, 29, 1, 30)),  # gap: 02:30 BST
        (LONDON, "2026-10-26", time(1, 30), utc(2026, 10, 25, 0, 30)),  # twice: BST
    ],
)
def test_deadline_on_the_change_days(
    tz: str, week: str, deadline: time, expected: datetime
) -> None:
    times = run_times(week, tz, _dst_settings(deadline))
    assert times.deadline_at == expected
    assert not times.has_passed("deadline_at", expected - timedelta(microseconds=1))
    assert times.has_passed("deadline_at", expected)
    # The same wall time given as an override means the same instant.
    local = f"{times.deadline_at.astimezone(ZoneInfo(tz)).date()}T{deadline:%H:%M}"
    assert run_times(week, tz, _dst_settings(time(0)), {"deadline_at": local}) == times


def test_override_forms() -> None:
    week = "2026-11-30"
    relative = run_times(week, NY, override={"deadline_at": {"day": -4, "at": "09:00"}})
    assert relative.deadline_at == utc(2026, 11, 26, 14)
    local = run_times(week, NY, override={"deadline_at": "2026-11-26T09:00"})
    exact = run_times(week, NY, override='{"deadline_at": "2026-11-26T14:00:00Z"}')
    assert relative == local == exact
    assert relative.opens_at == DEFAULT_SETTINGS.opens_at.instant(date(2026, 11, 30), NY)
    assert run_times(week, NY, override=None) == run_times(week, NY, override="") == run_times(
        week, NY, override={}
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"dedline_at": "2026-11-26T09:00"}, "unknown settings_override keys"),
        ("{not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ({"deadline_at": "tomorrow"}, "ISO date-time"),
        ({"deadline_at": 1700000000}, "expected"),
        ({"deadline_at": {"day": -4}}, "relative override"),
        ({"deadline_at": {"day": "-4", "at": "09:00"}}, "integer"),
        ({"deadline_at": {"day": -4, "at": "9am"}}, "HH:MM"),
        ({"deadline_at": "2026-11-20T09:00"}, "must come after opens_at"),
        ({"generate_at": "2026-11-25T09:00"}, "no earlier than deadline_at"),
        ({"send_window_end": {"day": -4, "at": "12:00"}}, "must come after send_window_start"),
    ],
)
def test_bad_overrides_are_refused(override: object, message: str) -> None:
    with pytest.raises(BadSettings, match=message):
        run_times("2026-11-30", NY, override=override)  # type: ignore[arg-type]


def test_settings_are_checked() -> None:
    with pytest.raises(BadSettings):
        LocalMoment(40, time(10))
    with pytest.raises(BadSettings):
        RunSettings(opens_at="Monday")  # type: ignore[arg-type]
    later = with_moment(DEFAULT_SETTINGS, "deadline_at", LocalMoment(-4, time(9)))
    assert run_times("2026-11-30", NY, later).deadline_at == utc(2026, 11, 26, 14)
    with pytest.raises(BadSettings):
        with_moment(DEFAULT_SETTINGS, "lunch_at", LocalMoment(0, time(12)))  # type: ignore[arg-type]
    assert parse_override(None) == {}


def test_has_passed_needs_an_aware_now() -> None:
    times = run_times("2026-11-30", NY)
    with pytest.raises(NaiveTimeError):
        times.has_passed("deadline_at", datetime(2026, 11, 26, 2))
    with pytest.raises(BadSettings):
        times.has_passed("lunch_at", utc(2026, 11, 26, 2))  # type: ignore[arg-type]
    eastern = ZoneInfo(NY)
    assert times.has_passed("deadline_at", datetime(2026, 11, 25, 20, tzinfo=eastern))
    assert not times.has_passed("send_window_end", datetime(2026, 11, 25, 20, tzinfo=eastern))


def test_week_shifts_feed_the_picker() -> None:
    # The template's key and night are the picker's shift id and night: a tender free on
    # Friday and Saturday (both cross midnight) works both, one a night.
    from pubsched.picker import Shift, Tender, pick

    week = shifts_for_week("2026-10-26", NY)
    shifts = [Shift(s.key, s.night, s.slots) for s in week]
    fri_sat = [s.key for s in week if s.night.weekday() in (4, 5)]
    roster = pick(date(2026, 10, 26), shifts, [Tender("A")], {"A": fri_sat})
    assert roster.shifts_of("A") == tuple(sorted(fri_sat))
