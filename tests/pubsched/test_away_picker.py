"""Time off and the picker (issue 19): generate hands the picker a tender's ticks less those
of the nights they are away (:func:`pubsched.week.generate.without_away`), so the roster never
has a tender on a shift of a night they are away, on any instance; and the filter takes
out exactly those ticks, nothing else (a tender away on Friday keeps Thursday)."""

from __future__ import annotations

from datetime import date, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from pubsched.picker import Shift, Tender, pick
from pubsched.week.generate import without_away

MONDAY = date(2026, 12, 14)  # any week: the property holds for each
NIGHTS = [MONDAY + timedelta(days=i) for i in range(3, 7)]  # Thu .. Sun


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[Shift], list[Tender], dict[str, list[str]],
                                        dict[date, frozenset[int]]]:
    shifts = [Shift(str(100 + i), draw(st.sampled_from(NIGHTS)), draw(st.integers(1, 3)))
              for i in range(draw(st.integers(1, 6)))]
    people = [str(i) for i in range(1, draw(st.integers(1, 5)) + 1)]
    tenders = [Tender(t, draw(st.integers(0, 3)), draw(st.none() | st.integers(0, 4)))
               for t in people]
    ids = [s.id for s in shifts]
    availability = {t: draw(st.lists(st.sampled_from(ids), unique=True)) for t in people}
    away = {night: frozenset(int(t) for t in draw(st.lists(st.sampled_from(people),
                                                           unique=True)))
            for night in NIGHTS}
    return shifts, tenders, availability, away


@settings(max_examples=300, deadline=None)
@given(instances())
def test_an_away_tender_is_never_picked_for_that_night(
        case: tuple[list[Shift], list[Tender], dict[str, list[str]],
                    dict[date, frozenset[int]]]) -> None:
    shifts, tenders, availability, away = case
    nights = {s.id: s.night for s in shifts}
    kept = without_away(availability, nights, away)
    # exactly the away ticks are gone
    assert {(t, s) for t, picked in kept.items() for s in picked} == {
        (t, s) for t, picked in availability.items() for s in picked
        if int(t) not in away[nights[s]]}
    roster = pick(MONDAY, shifts, tenders, kept)
    for shift_id, on_it in roster.assignments.items():
        assert not {int(t) for t in on_it} & away[nights[shift_id]], (shift_id, on_it)
    # and the rule costs nothing else: with nobody away, the same instance fills as before
    if not any(away.values()):
        assert roster == pick(MONDAY, shifts, tenders, availability)


def test_away_on_friday_keeps_thursday() -> None:
    thu, fri = Shift("1", NIGHTS[0], 1), Shift("2", NIGHTS[1], 1)
    kept = without_away({"7": ["1", "2"], "8": ["2"]}, {"1": thu.night, "2": fri.night},
                        {fri.night: frozenset({7})})
    assert kept == {"7": ["1"], "8": ["2"]}
    roster = pick(MONDAY, [thu, fri], [Tender("7"), Tender("8")], kept)
    assert {k: list(v) for k, v in roster.assignments.items()} == {"1": ["7"], "2": ["8"]}
