"""The picker with skills, pins and exclusions, against a brute force of its definition.

The definition (``pubsched.picker``'s docstring), implemented again here without a flow:
a shift's tenders must *fit* its slots (each need reserves a slot for a tender with that
skill, one slot per tender; a pinned tender may take a reserved slot without the skill,
but only as many as the pins alone need); pins are always on, exclusions never; the
ranking is the most slots filled, then the fewest needs missing, then the fairest load
vector. Fitting is decided by trying every placement of the tenders into the slots, and
"missing" by trying every matching, so the oracle shares no code with the picker but
``load_vector``. The oracle is itself checked against a plain enumeration of whole
assignments on tiny instances.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pubsched.picker import PickerInputError, Roster, Shift, Tender, load_vector, pick

MONDAY = date(2026, 11, 30)  # the picker's week (test_picker.py's): ties are broken by it
THU, FRI, SAT = date(2026, 12, 3), date(2026, 12, 4), date(2026, 12, 5)
SKILLS = ("cellar", "keys", "till")


@dataclass(frozen=True)
class Instance:
    shifts: tuple[Shift, ...]
    tenders: tuple[Tender, ...]
    availability: Mapping[str, tuple[str, ...]]
    pins: frozenset[tuple[str, str]]
    exclusions: frozenset[tuple[str, str]]

    def pick(self) -> Roster:
        return pick(MONDAY, self.shifts, self.tenders, self.availability,
                    pins=self.pins, exclusions=self.exclusions)


# -- the oracle ----------------------------------------------------------------------------


def _placements(shift: Shift, people: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every injective placement: for each person, the label of the slot they take."""
    labels = [f"need:{n}" for n in shift.needs] + ["general"] * (shift.slots - len(shift.needs))
    return [tuple(labels[i] for i in chosen)
            for chosen in itertools.permutations(range(len(labels)), len(people))]


def _overrides(placement: tuple[str, ...], people: tuple[str, ...],
               skills: Mapping[str, tuple[str, ...]]) -> int:
    return sum(1 for label, p in zip(placement, people, strict=True)
               if label.startswith("need:") and label[5:] not in skills[p])


def fits(instance: Instance, shift: Shift, on_it: tuple[str, ...]) -> bool:
    skills = {t.id: t.skills for t in instance.tenders}
    pinned = tuple(sorted(t for t, s in instance.pins if s == shift.id))
    least = min(_overrides(p, pinned, skills) for p in _placements(shift, pinned))
    for placement in _placements(shift, on_it):
        ok = all(not label.startswith("need:") or label[5:] in skills[p]
                 or (p, shift.id) in instance.pins
                 for label, p in zip(placement, on_it, strict=True))
        if ok and _overrides(placement, on_it, skills) == least:
            return True
    return False


def missing_count(shift: Shift, on_it: tuple[str, ...],
                  skills: Mapping[str, tuple[str, ...]]) -> int:
    best = 0
    for size in range(len(shift.needs) + 1):
        for needs in itertools.combinations(shift.needs, size):
            for people in itertools.permutations(on_it, size):
                if all(n in skills[p] for n, p in zip(needs, people, strict=True)):
                    best = max(best, size)
    return len(shift.needs) - best


def options(instance: Instance, shift: Shift) -> list[tuple[str, ...]]:
    """The sets of tenders that may work ``shift`` (ignoring nights and caps)."""
    pinned = {t for t, s in instance.pins if s == shift.id}
    free = sorted(t for t, a in instance.availability.items()
                  if shift.id in a and (t, shift.id) not in instance.exclusions
                  and t not in pinned)
    out = []
    for size in range(shift.slots - len(pinned) + 1):
        for extra in itertools.combinations(free, size):
            on_it = tuple(sorted(pinned | set(extra)))
            if fits(instance, shift, on_it):
                out.append(on_it)
    return out


def _free_cap(instance: Instance, tender: Tender) -> int:
    pins = sum(1 for t, _ in instance.pins if t == tender.id)
    return 99 if tender.cap is None else max(0, tender.cap - pins)


Key = tuple[int, int, tuple[int, ...]]


def best_possible(instance: Instance) -> Key:
    """(most slots filled, then fewest needs missing, then the smallest load vector)."""
    index = {t.id: i for i, t in enumerate(instance.tenders)}
    skills = {t.id: t.skills for t in instance.tenders}
    free_caps = [_free_cap(instance, t) for t in instance.tenders]
    n = len(instance.tenders)
    # state: (loads, free loads, who works tonight) -> fewest needs missing so far
    states: dict[tuple[tuple[int, ...], tuple[int, ...], frozenset[int]], int] = {
        ((0,) * n, (0,) * n, frozenset()): 0}
    night: date | None = None
    for shift in sorted(instance.shifts, key=lambda s: (s.night, s.id)):
        if shift.night != night:
            night = shift.night
            merged: dict[tuple[tuple[int, ...], tuple[int, ...], frozenset[int]], int] = {}
            for (loads, free, _), missing in states.items():
                key = (loads, free, frozenset[int]())
                merged[key] = min(missing, merged.get(key, missing))
            states = merged
        after: dict[tuple[tuple[int, ...], tuple[int, ...], frozenset[int]], int] = {}
        choices = options(instance, shift)
        for (loads, free, tonight), missing in states.items():
            for on_it in choices:
                ids = {index[t] for t in on_it}
                unpinned = {index[t] for t in on_it if (t, shift.id) not in instance.pins}
                if ids & tonight or any(free[i] >= free_caps[i] for i in unpinned):
                    continue
                key = (tuple(x + (i in ids) for i, x in enumerate(loads)),
                       tuple(x + (i in unpinned) for i, x in enumerate(free)),
                       tonight | ids)
                cost = missing + missing_count(shift, on_it, skills)
                after[key] = min(cost, after.get(key, cost))
        states = after
    return min(_key(instance, loads, missing) for (loads, _, _), missing in states.items())


def _key(instance: Instance, loads: tuple[int, ...], missing: int) -> Key:
    by_id = dict(zip((t.id for t in instance.tenders), loads, strict=True))
    return (-sum(loads), missing, load_vector(by_id, instance.tenders))


def naive_best(instance: Instance) -> Key:
    """The same answer by enumerating whole assignments (tiny instances only)."""
    skills = {t.id: t.skills for t in instance.tenders}
    best: Key | None = None
    shifts = instance.shifts
    for choice in itertools.product(*(options(instance, s) for s in shifts)):
        roster = {s.id: c for s, c in zip(shifts, choice, strict=True)}
        if not _nights_and_caps_hold(instance, roster):
            continue
        loads = tuple(sum(t.id in c for c in choice) for t in instance.tenders)
        missing = sum(missing_count(s, roster[s.id], skills) for s in shifts)
        key = _key(instance, loads, missing)
        best = key if best is None or key < best else best
    assert best is not None  # the pins alone are always a valid assignment
    return best


def _nights_and_caps_hold(instance: Instance, roster: Mapping[str, tuple[str, ...]]) -> bool:
    nights = {s.id: s.night for s in instance.shifts}
    for tender in instance.tenders:
        worked = [s for s, ts in roster.items() if tender.id in ts]
        if len({nights[s] for s in worked}) != len(worked):
            return False
        free = [s for s in worked if (tender.id, s) not in instance.pins]
        if len(free) > _free_cap(instance, tender):
            return False
    return True


def assert_valid(instance: Instance, roster: Roster) -> None:
    skills = {t.id: t.skills for t in instance.tenders}
    assert set(roster.assignments) == {s.id for s in instance.shifts}
    assert _nights_and_caps_hold(instance, roster.assignments)
    for shift in instance.shifts:
        on_it = roster.assignments[shift.id]
        assert on_it in options(instance, shift), (shift, on_it)
        assert roster.unfilled[shift.id] == shift.slots - len(on_it)
        missing = roster.missing[shift.id]
        assert set(missing) <= set(shift.needs) and list(missing) == sorted(set(missing))
        assert len(missing) == missing_count(shift, on_it, skills)
        # what is reported missing is really uncovered once the rest is covered
        assert missing_count(Shift(shift.id, shift.night, shift.slots,
                                   tuple(n for n in shift.needs if n not in missing)),
                             on_it, skills) == 0
    for tender_id, shift_id in instance.pins:
        assert tender_id in roster.assignments[shift_id]
    for tender_id, shift_id in instance.exclusions:
        assert tender_id not in roster.assignments[shift_id]


# -- the strategy --------------------------------------------------------------------------

_maxima = st.one_of(st.none(), st.integers(0, 3))


@st.composite
def instances(draw: st.DrawFn, max_tenders: int = 5, max_shifts: int = 4) -> Instance:
    """<= 5 tenders with 0-3 skills, <= 4 shifts of 0-4 slots with needs on 3 nights,
    random availability, and pins and exclusions the operator could have made."""
    nights = (THU, FRI, SAT)
    shifts = []
    for i in range(draw(st.integers(0, max_shifts))):
        slots = draw(st.integers(0, 4))
        needs = draw(st.lists(st.sampled_from(SKILLS), unique=True, max_size=min(slots, 3)))
        shifts.append(Shift(f"s{i}", draw(st.sampled_from(nights)), slots, tuple(needs)))
    tenders = tuple(
        Tender(f"t{i}", draw(st.integers(0, 3)), draw(_maxima), draw(_maxima),
               tuple(draw(st.lists(st.sampled_from(SKILLS), unique=True))))
        for i in range(draw(st.integers(0, max_tenders))))
    shift_ids = [s.id for s in shifts]
    availability = {
        t.id: tuple(draw(st.lists(st.sampled_from(shift_ids), unique=True)) if shift_ids else ())
        for t in tenders if draw(st.integers(0, 4)) > 0}
    pins: set[tuple[str, str]] = set()
    exclusions: set[tuple[str, str]] = set()
    for t in tenders:
        for s in shifts:
            what = draw(st.sampled_from(["", "", "", "", "pin", "exclude"]))
            taken = sum(1 for _, x in pins if x == s.id)
            busy = {x.night for x in shifts if (t.id, x.id) in pins}
            if what == "pin" and taken < s.slots and s.night not in busy:
                pins.add((t.id, s.id))
            elif what == "exclude":
                exclusions.add((t.id, s.id))
    return Instance(tuple(shifts), tenders, availability, frozenset(pins), frozenset(exclusions))


def check_against_brute_force(instance: Instance) -> None:
    roster = instance.pick()
    assert_valid(instance, roster)
    most, fewest_missing, fairest = best_possible(instance)
    assert roster.filled == -most
    assert sum(len(m) for m in roster.missing.values()) == fewest_missing
    assert load_vector(roster.loads, instance.tenders) == fairest


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_picker_with_skills_pins_and_exclusions_is_best(instance: Instance) -> None:
    check_against_brute_force(instance)


@pytest.mark.slow
@settings(max_examples=4000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_picker_with_skills_pins_and_exclusions_is_best_long(instance: Instance) -> None:
    check_against_brute_force(instance)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_tenders=4, max_shifts=3))
def test_skills_oracle_agrees_with_plain_enumeration(instance: Instance) -> None:
    assert best_possible(instance) == naive_best(instance)


# -- the examples ----------------------------------------------------------------------------


def _pick(shifts: list[Shift], tenders: list[Tender], availability: dict[str, list[str]],
          pins: tuple[tuple[str, str], ...] = (), exclusions: tuple[tuple[str, str], ...] = (),
          week: date = MONDAY) -> Roster:
    return pick(week, shifts, tenders, availability, pins=pins, exclusions=exclusions)


def test_a_need_reserves_a_slot_for_a_tender_with_the_skill() -> None:
    shifts = [Shift("fri", FRI, 2, ("keys",))]
    everyone = {"A": ["fri"], "B": ["fri"], "C": ["fri"]}
    tenders = [Tender("A", history=9, skills=("keys",)), Tender("B"), Tender("C")]
    for week in range(8):  # whatever the tiebreak, A (the busiest) is on: the keys
        roster = _pick(shifts, tenders, everyone, week=MONDAY + timedelta(weeks=week))
        assert "A" in roster.assignments["fri"] and roster.missing["fri"] == ()
    # Nobody with keys: the reserved slot stays empty and the need is reported.
    roster = _pick(shifts, [Tender("B"), Tender("C")], {"B": ["fri"], "C": ["fri"]})
    assert len(roster.assignments["fri"]) == 1
    assert dict(roster.unfilled) == {"fri": 1} and dict(roster.missing) == {"fri": ("keys",)}


def test_one_tender_meets_one_need() -> None:
    shifts = [Shift("fri", FRI, 2, ("keys", "cellar"))]
    roster = _pick(shifts, [Tender("A", skills=("keys", "cellar"))], {"A": ["fri"]})
    assert roster.assignments["fri"] == ("A",)
    assert roster.missing["fri"] == ("keys",)  # sorted needs: A is matched to cellar first
    roster = _pick(shifts, [Tender("A", skills=("keys", "cellar")), Tender("B", skills=("keys",))],
                   {"A": ["fri"], "B": ["fri"]})
    assert roster.assignments["fri"] == ("A", "B") and roster.missing["fri"] == ()


def test_needs_are_met_before_the_load_is_spread() -> None:
    # A (keys) can work Fri (needs keys) or Sat (no needs), one shift at most: Fri, always.
    for week in range(12):
        shifts = [Shift("fri", FRI, 1, ("keys",)), Shift("sat", SAT, 1)]
        roster = _pick(shifts, [Tender("A", max_per_week=1, skills=("keys",))],
                       {"A": ["fri", "sat"]}, week=MONDAY + timedelta(weeks=week))
        assert roster.assignments["fri"] == ("A",) and roster.missing["fri"] == ()


def test_pins_stand_without_availability_and_count_toward_the_cap() -> None:
    shifts = [Shift("thu", THU, 1), Shift("fri", FRI, 1), Shift("sat", SAT, 1)]
    tenders = [Tender("A", max_per_week=2), Tender("B", history=5)]
    roster = _pick(shifts, tenders, {"A": ["fri", "sat"], "B": ["fri", "sat"]},
                   pins=(("A", "thu"),))
    assert roster.assignments["thu"] == ("A",)
    assert roster.loads["A"] == 2 and roster.loads["B"] == 1
    # A pin beyond the cap stands; the picker adds nothing more to that tender.
    roster = _pick(shifts, [Tender("A", max_per_week=0), Tender("B")],
                   {"A": ["sat"], "B": ["sat"]}, pins=(("A", "thu"),))
    assert roster.assignments["thu"] == ("A",) and roster.assignments["sat"] == ("B",)


def test_a_pin_takes_the_night() -> None:
    shifts = [Shift("fri-early", FRI, 1), Shift("fri-late", FRI, 1)]
    roster = _pick(shifts, [Tender("A")], {"A": ["fri-early", "fri-late"]},
                   pins=(("A", "fri-late"),))
    assert dict(roster.assignments) == {"fri-early": (), "fri-late": ("A",)}


def test_an_exclusion_is_never_used_even_if_it_leaves_a_slot_empty() -> None:
    roster = _pick([Shift("fri", FRI, 1)], [Tender("A")], {"A": ["fri"]},
                   exclusions=(("A", "fri"),))
    assert roster.assignments["fri"] == () and roster.unfilled["fri"] == 1


def test_a_pinned_tender_with_the_skill_fills_the_reserved_slot() -> None:
    shifts = [Shift("fri", FRI, 2, ("keys",))]
    tenders = [Tender("P", skills=("keys",)), Tender("B"), Tender("K", history=5,
                                                                  skills=("keys",))]
    everyone = {"B": ["fri"], "K": ["fri"]}
    roster = _pick(shifts, tenders, everyone, pins=(("P", "fri"),))
    assert roster.assignments["fri"] == ("B", "P")  # the general slot goes to the fairest
    plain = [Tender("P"), *tenders[1:]]
    roster = _pick(shifts, plain, everyone, pins=(("P", "fri"),))
    assert roster.assignments["fri"] == ("K", "P")  # P lacks keys: K must come


def test_surplus_pins_override_as_few_reserved_slots_as_they_must() -> None:
    # 4 slots, 3 needs (1 general). Pins P (keys), Q, R: Q takes the general slot, R one
    # reserved slot without its skill. P holds keys, so K (keys) has no slot left: adding K
    # would need P to override too, which placing the pins does not require.
    shifts = [Shift("fri", FRI, 4, ("cellar", "keys", "till"))]
    tenders = [Tender("P", skills=("keys",)), Tender("Q"), Tender("R"),
               Tender("K", skills=("keys",))]
    roster = _pick(shifts, tenders, {"K": ["fri"]},
                   pins=(("P", "fri"), ("Q", "fri"), ("R", "fri")))
    assert roster.assignments["fri"] == ("P", "Q", "R")
    assert roster.missing["fri"] == ("cellar", "till") and roster.unfilled["fri"] == 1


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Shift("fri", FRI, 1, ("keys", "cellar")), "2 skills but has 1 slots"),
        (lambda: Shift("fri", FRI, 2, ("keys", "keys")), "needs a skill twice"),
        (lambda: Shift("fri", FRI, 2, "keys"), "collection of words"),
        (lambda: Shift("fri", FRI, 2, ("",)), "non-empty"),
        (lambda: Tender("A", skills="keys"), "collection of words"),
        (lambda: Tender("A", skills=(3,)), "non-empty string"),  # type: ignore[arg-type]
    ],
)
def test_bad_needs_and_skills_are_refused_when_built(build: object, message: str) -> None:
    with pytest.raises(PickerInputError, match=message):
        build()  # type: ignore[operator]


_FRI = [Shift("fri", FRI, 1), Shift("fri2", FRI, 1)]
_AB = [Tender("A"), Tender("B")]


@pytest.mark.parametrize(
    ("pins", "exclusions", "message"),
    [
        ((("C", "fri"),), (), "pin of unknown tender"),
        ((("A", "sat"),), (), "pin on unknown shift"),
        ((), (("A", "sat"),), "exclusion on unknown shift"),
        ((("A", "fri"),), (("A", "fri"),), "pinned and excluded"),
        ((("A", "fri"), ("B", "fri")), (), "2 pins for 1 slots"),
        ((("A", "fri"), ("A", "fri2")), (), "pinned twice on one night"),
        (("A", "fri"), (), "pairs"),
    ],
)
def test_inconsistent_pins_and_exclusions_are_refused(
    pins: tuple[tuple[str, str], ...], exclusions: tuple[tuple[str, str], ...], message: str
) -> None:
    with pytest.raises(PickerInputError, match=message):
        pick(MONDAY, _FRI, _AB, {}, pins=pins, exclusions=exclusions)
