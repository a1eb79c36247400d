"""The fair picker against the examples that matter and against a brute-force search.

The property: on small random instances the picker fills as many slots as the best valid
assignment, and no valid assignment has a lexicographically smaller load vector (the
FAIRNESS definition of ``pubsched.picker``, through the same ``load_vector``). The brute
force enumerates every valid assignment, shift by shift, keeping only what the verdict
depends on (each tender's load, and who already works the current night); it is itself
checked against a plain enumeration of whole assignments on tiny instances.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pubsched.picker import (
    PickerInputError,
    Roster,
    Shift,
    Tender,
    load_vector,
    pick,
)

MONDAY = date(2026, 11, 30)  # the picker's week: it breaks ties by the week, so the rosters
# asserted below are this one's
THU, FRI, SAT = date(2026, 12, 3), date(2026, 12, 4), date(2026, 12, 5)


@dataclass(frozen=True)
class Instance:
    week_of: date
    shifts: tuple[Shift, ...]
    tenders: tuple[Tender, ...]
    availability: Mapping[str, tuple[str, ...]]

    def pick(self) -> Roster:
        return pick(self.week_of, self.shifts, self.tenders, self.availability)


# -- the oracle ----------------------------------------------------------------------------


def _cap(tender: Tender) -> int:
    return 99 if tender.cap is None else tender.cap


def reachable_loads(instance: Instance) -> set[tuple[int, ...]]:
    """Every load tuple (in ``instance.tenders`` order) some valid assignment gives.

    Shifts are taken night by night; per shift every subset of its available tenders of
    at most ``slots`` members is tried, skipping a tender at their cap or already on a
    shift that night.
    """
    index = {t.id: i for i, t in enumerate(instance.tenders)}
    caps = [_cap(t) for t in instance.tenders]
    candidates = {
        s.id: sorted(index[t] for t, avail in instance.availability.items() if s.id in avail)
        for s in instance.shifts
    }
    states: set[tuple[tuple[int, ...], frozenset[int]]] = {
        ((0,) * len(instance.tenders), frozenset())
    }
    night: date | None = None
    for shift in sorted(instance.shifts, key=lambda s: s.night):
        if shift.night != night:
            night = shift.night
            states = {(loads, frozenset()) for loads, _ in states}
        next_states = set()
        for loads, tonight in states:
            free = [i for i in candidates[shift.id] if i not in tonight and loads[i] < caps[i]]
            for size in range(min(shift.slots, len(free)) + 1):
                for chosen in itertools.combinations(free, size):
                    new_loads = tuple(n + (i in chosen) for i, n in enumerate(loads))
                    next_states.add((new_loads, tonight | frozenset(chosen)))
        states = next_states
    return {loads for loads, _ in states}


def best_possible(instance: Instance) -> tuple[int, tuple[int, ...]]:
    """(most slots any valid assignment fills, the smallest load vector among those)."""
    by_loads = [dict(zip((t.id for t in instance.tenders), loads, strict=True))
                for loads in reachable_loads(instance)]
    most = max(sum(loads.values()) for loads in by_loads)
    fairest = min(
        load_vector(loads, instance.tenders) for loads in by_loads if sum(loads.values()) == most
    )
    return most, fairest


def assert_valid(instance: Instance, roster: Roster) -> None:
    tenders = {t.id: t for t in instance.tenders}
    assert set(roster.assignments) == {s.id for s in instance.shifts}
    assert set(roster.loads) == set(tenders)
    nights: dict[str, list[date]] = {t: [] for t in tenders}
    for shift in instance.shifts:
        on_it = roster.assignments[shift.id]
        assert len(on_it) == len(set(on_it)) <= shift.slots
        assert roster.unfilled[shift.id] == shift.slots - len(on_it)
        for tender_id in on_it:
            assert shift.id in instance.availability.get(tender_id, ())
            nights[tender_id].append(shift.night)
    for tender_id, worked in nights.items():
        assert len(worked) == len(set(worked)), "two shifts on one night"
        assert roster.loads[tender_id] == len(worked)
        cap = tenders[tender_id].cap
        assert cap is None or len(worked) <= cap


# -- the strategies ------------------------------------------------------------------------

_maxima = st.one_of(st.none(), st.integers(0, 3))


@st.composite
def instances(draw: st.DrawFn, max_tenders: int = 5, max_shifts: int = 5) -> Instance:
    """<= 5 tenders, <= 5 shifts with 0-2 slots on 3 nights, random availability."""
    week_of = MONDAY + timedelta(weeks=draw(st.integers(0, 3)))
    nights = [week_of + timedelta(days=d) for d in (3, 4, 5)]
    shifts = tuple(
        Shift(f"s{i}", draw(st.sampled_from(nights)), draw(st.integers(0, 2)))
        for i in range(draw(st.integers(0, max_shifts)))
    )
    tenders = tuple(
        Tender(f"t{i}", draw(st.integers(0, 4)), draw(_maxima), draw(_maxima))
        for i in range(draw(st.integers(0, max_tenders)))
    )
    shift_ids = [s.id for s in shifts]
    availability = {
        t.id: tuple(draw(st.lists(st.sampled_from(shift_ids), unique=True)) if shift_ids else ())
        for t in tenders
        if draw(st.integers(0, 4)) > 0  # most tenders answer the form, a few do not
    }
    return Instance(week_of, shifts, tenders, availability)


def check_against_brute_force(instance: Instance) -> None:
    roster = instance.pick()
    assert_valid(instance, roster)
    most, fairest = best_possible(instance)
    assert roster.filled == most
    assert load_vector(roster.loads, instance.tenders) == fairest


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_picker_fills_most_and_is_fairest(instance: Instance) -> None:
    check_against_brute_force(instance)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_picker_fills_most_and_is_fairest_long(instance: Instance) -> None:
    check_against_brute_force(instance)


def naive_best(instance: Instance) -> tuple[int, tuple[int, ...]]:
    """The oracle's answer by enumerating whole assignments (tiny instances only)."""
    options = [
        [
            combo
            for size in range(shift.slots + 1)
            for combo in itertools.combinations(
                sorted(t for t, a in instance.availability.items() if shift.id in a), size
            )
        ]
        for shift in instance.shifts
    ]
    best: tuple[int, tuple[int, ...]] | None = None
    for choice in itertools.product(*options):
        roster = _roster_of(instance, choice)
        try:
            assert_valid(instance, roster)
        except AssertionError:
            continue
        key = (-roster.filled, load_vector(roster.loads, instance.tenders))
        if best is None or key < best:
            best = key
    assert best is not None  # the empty assignment is always valid
    return -best[0], best[1]


def _roster_of(instance: Instance, choice: tuple[tuple[str, ...], ...]) -> Roster:
    assignments = {s.id: c for s, c in zip(instance.shifts, choice, strict=True)}
    loads = {t.id: sum(t.id in c for c in choice) for t in instance.tenders}
    unfilled = {s.id: s.slots - len(c) for s, c in zip(instance.shifts, choice, strict=True)}
    return Roster(assignments, unfilled, loads)


@settings(max_examples=80, deadline=None)
@given(instances(max_tenders=4, max_shifts=3))
def test_brute_force_agrees_with_plain_enumeration(instance: Instance) -> None:
    assert best_possible(instance) == naive_best(instance)


# -- the examples ----------------------------------------------------------------------------


def test_greedy_trap_both_nights_filled() -> None:
    # Fri comes first everywhere: a greedy picker puts A (free Fri and Sat, max 1) on Fri.
    shifts = [Shift("fri", FRI, 1), Shift("sat", SAT, 1)]
    tenders = [Tender("A", max_per_week=1), Tender("B")]
    roster = pick(MONDAY, shifts, tenders, {"A": ["fri", "sat"], "B": ["fri"]})
    assert dict(roster.assignments) == {"fri": ("B",), "sat": ("A",)}
    assert dict(roster.unfilled) == {"fri": 0, "sat": 0}


def test_unfillable_slots_are_reported_not_invented() -> None:
    shifts = [Shift("thu", THU, 2), Shift("fri", FRI, 2), Shift("sat", SAT, 1)]
    roster = pick(MONDAY, shifts, [Tender("A"), Tender("B")], {"A": ["thu", "fri"], "B": ["thu"]})
    assert dict(roster.assignments) == {"thu": ("A", "B"), "fri": ("A",), "sat": ()}
    assert dict(roster.unfilled) == {"thu": 0, "fri": 1, "sat": 1}
    assert roster.filled == 3


def test_history_sends_the_shift_to_the_less_worked_tender() -> None:
    # Over many weeks (many tiebreak seeds) the one who worked less always gets it.
    for week in range(20):
        roster = pick(
            MONDAY + timedelta(weeks=week),
            [Shift("fri", FRI, 1)],
            [Tender("busy", history=3), Tender("fresh", history=2)],
            {"busy": ["fri"], "fresh": ["fri"]},
        )
        assert roster.assignments["fri"] == ("fresh",)


def test_load_this_week_is_spread_before_history_is_equalised() -> None:
    # Four shifts, two tenders free for all, equal history: two each, never 3 + 1.
    shifts = [Shift(f"s{d}", MONDAY + timedelta(days=d), 1) for d in range(4)]
    roster = pick(MONDAY, shifts, [Tender("A"), Tender("B")], {"A": [s.id for s in shifts],
                                                             "B": [s.id for s in shifts]})
    assert dict(roster.loads) == {"A": 2, "B": 2}


def test_history_is_folded_into_the_level() -> None:
    # A worked 2 more in the trailing weeks: B gets 3 of 4 shifts, A one (adjusted 3 and 3).
    shifts = [Shift(f"s{d}", MONDAY + timedelta(days=d), 1) for d in range(4)]
    everything = [s.id for s in shifts]
    roster = pick(MONDAY, shifts, [Tender("A", history=2), Tender("B")],
                  {"A": everything, "B": everything})
    assert dict(roster.loads) == {"A": 1, "B": 3}


@pytest.mark.parametrize(
    ("max_per_week", "max_this_week", "expected"),
    [(None, None, 3), (2, None, 2), (None, 1, 1), (2, 1, 1), (1, 2, 1), (0, None, 0)],
)
def test_the_smaller_maximum_wins(
    max_per_week: int | None, max_this_week: int | None, expected: int
) -> None:
    shifts = [Shift("thu", THU, 1), Shift("fri", FRI, 1), Shift("sat", SAT, 1)]
    tender = Tender("A", max_per_week=max_per_week, max_this_week=max_this_week)
    roster = pick(MONDAY, shifts, [tender], {"A": ["thu", "fri", "sat"]})
    assert roster.loads["A"] == expected
    assert sum(roster.unfilled.values()) == 3 - expected


def test_at_most_one_shift_per_night() -> None:
    # An early and a late shift on Friday; the late one crosses midnight but is Friday's.
    shifts = [Shift("fri-early", FRI, 1), Shift("fri-late", FRI, 1), Shift("sat", SAT, 1)]
    roster = pick(MONDAY, shifts, [Tender("A")], {"A": ["fri-early", "fri-late", "sat"]})
    assert roster.loads["A"] == 2
    assert roster.assignments["sat"] == ("A",)
    assert sum(roster.unfilled.values()) == 1


def test_empty_and_degenerate_weeks() -> None:
    assert pick(MONDAY, [], [], {}).filled == 0
    roster = pick(MONDAY, [Shift("fri", FRI, 0)], [Tender("A")], {"A": ["fri"]})
    assert dict(roster.assignments) == {"fri": ()} and dict(roster.unfilled) == {"fri": 0}
    # A tender who did not answer is available for nothing, and still has a load.
    roster = pick(MONDAY, [Shift("fri", FRI, 1)], [Tender("A"), Tender("B")], {"B": ["fri"]})
    assert dict(roster.loads) == {"A": 0, "B": 1}


def test_load_vector_definition() -> None:
    tenders = [Tender("A", history=1), Tender("B", history=0), Tender("C", history=4)]
    assert load_vector({"A": 2, "B": 1}, tenders) == (4, 3, 1)
    assert load_vector({"A": 1, "B": 2}, tenders) < load_vector({"A": 2, "B": 1}, tenders)


def test_roster_shifts_of_a_tender() -> None:
    shifts = [Shift("fri", FRI, 1), Shift("sat", SAT, 1)]
    roster = pick(MONDAY, shifts, [Tender("A")], {"A": ["sat", "fri"]})
    assert roster.shifts_of("A") == ("fri", "sat")
    assert roster.shifts_of("nobody") == ()


# -- determinism -----------------------------------------------------------------------------

SYMMETRIC_SHIFTS = tuple(Shift(f"s{d}", MONDAY + timedelta(days=d), 2) for d in range(3, 6))
SYMMETRIC_TENDERS = tuple(Tender(f"t{i}") for i in range(5))
SYMMETRIC_AVAILABILITY = {t.id: tuple(s.id for s in SYMMETRIC_SHIFTS) for t in SYMMETRIC_TENDERS}


def test_same_input_in_any_order_gives_the_same_roster() -> None:
    expected = pick(MONDAY, SYMMETRIC_SHIFTS, SYMMETRIC_TENDERS, SYMMETRIC_AVAILABILITY)
    shuffle = random.Random(11)
    for _ in range(20):
        shifts, tenders = list(SYMMETRIC_SHIFTS), list(SYMMETRIC_TENDERS)
        shuffle.shuffle(shifts)
        shuffle.shuffle(tenders)
        items = list(SYMMETRIC_AVAILABILITY.items())
        shuffle.shuffle(items)
        availability = {t: tuple(shuffle.sample(a, len(a))) for t, a in items}
        assert pick(MONDAY, shifts, tenders, availability) == expected


_IN_SUBPROCESS = """
import json
from datetime import date, timedelta
from pubsched.picker import Shift, Tender, pick
week = date(2026, 11, 30)
shifts = [Shift(f"s{d}", week + timedelta(days=d), 2) for d in range(3, 6)]
tenders = [Tender(f"t{i}") for i in range(5)]
roster = pick(week, shifts, tenders, {t.id: [s.id for s in shifts] for t in tenders})
print(json.dumps(dict(roster.assignments)))
"""


def test_same_roster_in_processes_with_different_hash_seeds() -> None:
    answers = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _IN_SUBPROCESS], env=env, capture_output=True, text=True,
            check=True,
        )
        answers.add(done.stdout)
    assert len(answers) == 1
    here = pick(MONDAY, SYMMETRIC_SHIFTS, SYMMETRIC_TENDERS, SYMMETRIC_AVAILABILITY)
    assert json.loads(answers.pop()) == {k: list(v) for k, v in here.assignments.items()}


def test_ties_are_broken_differently_from_week_to_week() -> None:
    # Five equal tenders, six slots: someone gets two, and who it is rotates with the week.
    rosters = []
    for week in range(12):
        week_of = MONDAY + timedelta(weeks=week)
        shifts = [Shift(s.id, s.night + timedelta(weeks=week), s.slots) for s in SYMMETRIC_SHIFTS]
        roster = pick(week_of, shifts, SYMMETRIC_TENDERS, SYMMETRIC_AVAILABILITY)
        assert sorted(roster.loads.values()) == [1, 1, 1, 1, 2]
        rosters.append(roster)
    doubled = {next(t for t, n in r.loads.items() if n == 2) for r in rosters}
    assert len(doubled) > 1


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Shift("fri", FRI, -1), "non-negative"),
        (lambda: Shift("fri", FRI, True), "non-negative"),
        (lambda: Shift("", FRI, 1), "non-empty"),
        (lambda: Shift("fri", datetime(2026, 12, 4, 18), 1), "must be a date"),
        (lambda: Tender("A", history=-1), "history"),
        (lambda: Tender("A", max_per_week=-1), "max_per_week"),
        (lambda: Tender("A", max_this_week=1.5), "max_this_week"),  # type: ignore[arg-type]
    ],
)
def test_bad_values_are_refused_when_built(build: object, message: str) -> None:
    with pytest.raises(PickerInputError, match=message):
        build()  # type: ignore[operator]


_FRI = [Shift("fri", FRI, 1)]
_A = [Tender("A")]


@pytest.mark.parametrize(
    ("shifts", "tenders", "availability", "message"),
    [
        (_FRI, _A, {"A": ["sat"]}, "unknown shifts"),
        (_FRI, _A, {"B": ["fri"]}, "unknown tender"),
        (_FRI, _A, {"A": "fri"}, "the string"),
        (_FRI * 2, _A, {}, "duplicate shift"),
        (_FRI, _A * 2, {}, "duplicate tender"),
        (["fri"], _A, {}, "Shift objects"),
        (_FRI, ["A"], {}, "Tender objects"),
    ],
)
def test_inconsistent_input_is_refused(
    shifts: Collection[Shift],
    tenders: Collection[Tender],
    availability: Mapping[str, Collection[str]],
    message: str,
) -> None:
    with pytest.raises(PickerInputError, match=message):
        pick(MONDAY, shifts, tenders, availability)


def test_week_must_be_a_date() -> None:
    with pytest.raises(PickerInputError, match="week_of"):
        pick("2026-11-30", _FRI, _A, {})  # type: ignore[arg-type]
    assert issubclass(PickerInputError, ValueError)


def test_a_busy_week_is_valid_and_fills_what_is_fillable() -> None:
    # Too big for the brute force: 60 tenders, 9 shifts on 7 nights. Every slot has more
    # than enough tenders available, so all of them must be filled.
    rng = random.Random(7)
    shifts = tuple(Shift(f"s{i}", MONDAY + timedelta(days=i % 7), rng.randint(1, 4))
                   for i in range(9))
    tenders = tuple(Tender(f"t{i:02}", rng.randint(0, 24), rng.choice([None, 1, 2]),
                           rng.choice([None, 1, 2, 3])) for i in range(60))
    availability = {t.id: tuple(s.id for s in shifts if rng.random() < 0.6) for t in tenders}
    instance = Instance(MONDAY, shifts, tenders, availability)
    roster = instance.pick()
    assert_valid(instance, roster)
    assert sum(roster.unfilled.values()) == 0
    # No single move of a shift from one tender to another makes it fairer (a necessary
    # condition of the fairest roster, checkable at this size).
    before = load_vector(roster.loads, tenders)
    night_of = {s.id: s.night for s in shifts}
    for shift_id, on_it in roster.assignments.items():
        for giver in on_it:
            for taker in tenders:
                busy_nights = {night_of[s] for s in roster.shifts_of(taker.id)}
                if (taker.id in on_it or shift_id not in availability[taker.id]
                        or night_of[shift_id] in busy_nights
                        or (taker.cap is not None and roster.loads[taker.id] >= taker.cap)):
                    continue
                moved = {**roster.loads, giver: roster.loads[giver] - 1,
                         taker.id: roster.loads[taker.id] + 1}
                assert load_vector(moved, tenders) >= before
