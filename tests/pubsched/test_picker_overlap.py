"""No tender on two shifts at once (issue 29, item 16): the picker's overlap rule against a
minute-by-minute check, and the picker with shifts that cross midnight and shifts in the
small hours against a plain enumeration of every valid roster.

The rule (`Shift.clashes`): one night, or times that overlap. The brute force knows
nothing of it: two shifts clash when they share a night or some minute is inside both.
The roster oracle enumerates whole assignments (each shift: any subset of its candidates,
the pins in), keeps those where no tender works two shifts that clash by the minute check
and nobody is over their maximum, and ranks them as the picker's docstring does (the most
slots filled, then the smallest load vector)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pubsched.picker import PickerInputError, Roster, Shift, Tender, load_vector, pick

MONDAY = date(2026, 11, 30)
NIGHTS = (date(2026, 12, 3), date(2026, 12, 4), date(2026, 12, 5))  # Thu, Fri, Sat
MINUTE = timedelta(minutes=1)


def at(night: date, hour: int, minute: int = 0) -> datetime:
    return datetime(night.year, night.month, night.day, tzinfo=UTC) + timedelta(
        hours=hour, minutes=minute)


def shift(shift_id: str, night: date, hour: int, hours: int, slots: int = 1) -> Shift:
    return Shift(shift_id, night, slots, starts=at(night, hour),
                 ends=at(night, hour) + timedelta(hours=hours))


def clash_by_the_minute(a: Shift, b: Shift) -> bool:
    """The brute force: one night, or a minute inside both."""
    if a.night == b.night:
        return True
    assert a.starts and a.ends and b.starts and b.ends
    minute = min(a.starts, b.starts)
    while minute < max(a.ends, b.ends):
        if a.starts <= minute < a.ends and b.starts <= minute < b.ends:
            return True
        minute += MINUTE
    return False


# -- the rule ----------------------------------------------------------------------------------


@st.composite
def timed_shifts(draw: st.DrawFn, shift_id: str) -> Shift:
    night = draw(st.sampled_from(NIGHTS))
    starts = at(night, draw(st.integers(0, 23)), draw(st.sampled_from([0, 15, 30, 59])))
    length = timedelta(minutes=draw(st.integers(1, 16 * 60)))
    return Shift(shift_id, night, 1, starts=starts, ends=starts + length)


@settings(max_examples=150, deadline=None)
@given(timed_shifts("a"), timed_shifts("b"))
def test_the_overlap_rule_agrees_with_a_minute_by_minute_check(a: Shift, b: Shift) -> None:
    assert a.clashes(b) == b.clashes(a) == clash_by_the_minute(a, b)


def test_the_examples_of_the_rule() -> None:
    thursday = shift("thu", NIGHTS[0], 18, 8)  # 18:00-02:00
    assert thursday.clashes(shift("fri-early", NIGHTS[1], 1, 4))  # 01:00-05:00: overlaps
    assert not thursday.clashes(shift("fri-late", NIGHTS[1], 2, 3))  # from 02:00: touches
    assert not thursday.clashes(shift("fri", NIGHTS[1], 18, 8))
    assert thursday.clashes(shift("thu-lunch", NIGHTS[0], 12, 3))  # one night: one shift
    # no times: nights only, as before
    assert not Shift("a", NIGHTS[0], 1).clashes(Shift("b", NIGHTS[1], 1))


@pytest.mark.parametrize(("starts", "ends", "why"), [
    (at(NIGHTS[0], 18), None, "both or neither"),
    (at(NIGHTS[0], 18).replace(tzinfo=None), at(NIGHTS[0], 20).replace(tzinfo=None),
     "aware datetimes"),
    (at(NIGHTS[0], 18), at(NIGHTS[0], 18), "ends before it starts")])
def test_bad_times_are_refused(starts: datetime, ends: datetime | None, why: str) -> None:
    with pytest.raises(PickerInputError, match=why):
        Shift("s", NIGHTS[0], 1, starts=starts, ends=ends)


# -- the picker --------------------------------------------------------------------------------


def test_the_red_teams_week_never_double_books() -> None:
    """Thursday 18:00-02:00 and Friday 01:00-05:00, one tender free for both, nobody else:
    one of the two, never both (before: both)."""
    shifts = [shift("thu", NIGHTS[0], 18, 8), shift("fri-early", NIGHTS[1], 1, 4)]
    roster = pick(MONDAY, shifts, [Tender("ann")], {"ann": ["thu", "fri-early"]})
    assert roster.loads["ann"] == 1 and roster.filled == 1


def test_the_clash_goes_to_whoever_keeps_every_slot_filled() -> None:
    """Ann can work both, Bob only Thursday: Ann takes the early Friday, Bob Thursday."""
    shifts = [shift("thu", NIGHTS[0], 18, 8), shift("fri-early", NIGHTS[1], 1, 4)]
    roster = pick(MONDAY, shifts, [Tender("ann"), Tender("bob", history=5)],
                  {"ann": ["thu", "fri-early"], "bob": ["thu"]})
    assert dict(roster.assignments) == {"thu": ("bob",), "fri-early": ("ann",)}


def test_a_pin_keeps_its_tender_off_the_shift_it_overlaps() -> None:
    shifts = [shift("thu", NIGHTS[0], 18, 8), shift("fri-early", NIGHTS[1], 1, 4)]
    roster = pick(MONDAY, shifts, [Tender("ann")], {"ann": ["fri-early"]},
                  pins=[("ann", "thu")])
    assert dict(roster.assignments) == {"thu": ("ann",), "fri-early": ()}
    with pytest.raises(PickerInputError, match="pinned on two shifts that overlap"):
        pick(MONDAY, shifts, [Tender("ann")], {}, pins=[("ann", "thu"), ("ann", "fri-early")])


@dataclass(frozen=True)
class Instance:
    shifts: tuple[Shift, ...]
    tenders: tuple[Tender, ...]
    availability: Mapping[str, tuple[str, ...]]
    pins: frozenset[tuple[str, str]]

    def pick(self) -> Roster:
        return pick(MONDAY, self.shifts, self.tenders, self.availability, pins=self.pins)


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    """<= 4 tenders, <= 4 shifts on three nights, evening shifts that cross midnight and
    shifts in the small hours, random availability and a few pins that do not clash."""
    shifts = tuple(
        shift(f"s{i}", draw(st.sampled_from(NIGHTS)), draw(st.sampled_from([0, 1, 3, 12, 18, 22])),
              draw(st.sampled_from([2, 4, 8])), draw(st.integers(0, 2)))
        for i in range(draw(st.integers(0, 4))))
    tenders = tuple(Tender(f"t{i}", draw(st.integers(0, 3)),
                           draw(st.one_of(st.none(), st.integers(0, 3))))
                    for i in range(draw(st.integers(0, 4))))
    ids = [s.id for s in shifts]
    availability = {t.id: tuple(draw(st.lists(st.sampled_from(ids), unique=True)) if ids else ())
                    for t in tenders}
    pins: set[tuple[str, str]] = set()
    by_id = {s.id: s for s in shifts}
    for t in tenders:
        for s in shifts:
            taken = sum(1 for _, x in pins if x == s.id)
            mine = [by_id[x] for u, x in pins if u == t.id]
            if draw(st.integers(0, 6)) == 0 and taken < s.slots and not any(
                    clash_by_the_minute(s, m) for m in mine):
                pins.add((t.id, s.id))
    return Instance(shifts, tenders, availability, frozenset(pins))


def _valid(instance: Instance, roster: Mapping[str, tuple[str, ...]]) -> bool:
    by_id = {s.id: s for s in instance.shifts}
    for tender in instance.tenders:
        worked = sorted(s for s, ts in roster.items() if tender.id in ts)
        if any(clash_by_the_minute(by_id[a], by_id[b])
               for a, b in itertools.combinations(worked, 2)):
            return False
        pins = sum(1 for t, _ in instance.pins if t == tender.id)
        free = len(worked) - sum(1 for s in worked if (tender.id, s) in instance.pins)
        if tender.cap is not None and free > max(0, tender.cap - pins):
            return False
    return True


def best_by_enumeration(instance: Instance) -> tuple[int, tuple[int, ...]]:
    options = []
    for s in instance.shifts:
        pinned = {t for t, x in instance.pins if x == s.id}
        free = sorted(t for t, a in instance.availability.items() if s.id in a
                      and t not in pinned)
        options.append([tuple(sorted(pinned | set(extra)))
                        for size in range(s.slots - len(pinned) + 1)
                        for extra in itertools.combinations(free, size)])
    best: tuple[int, tuple[int, ...]] | None = None
    for choice in itertools.product(*options):
        roster = {s.id: c for s, c in zip(instance.shifts, choice, strict=True)}
        if not _valid(instance, roster):
            continue
        loads = {t.id: sum(t.id in c for c in choice) for t in instance.tenders}
        key = (-sum(loads.values()), load_vector(loads, instance.tenders))
        best = key if best is None or key < best else best
    assert best is not None  # the pins alone are valid
    return best


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_the_picker_never_double_books_and_is_still_the_best(instance: Instance) -> None:
    roster = instance.pick()
    assignments = dict(roster.assignments)
    assert _valid(instance, assignments)
    for tender_id, shift_id in instance.pins:
        assert tender_id in assignments[shift_id]
    for shift_id, on_it in assignments.items():
        for tender_id in on_it:
            assert (shift_id in instance.availability.get(tender_id, ())
                    or (tender_id, shift_id) in instance.pins)
    assert (-roster.filled, load_vector(roster.loads, instance.tenders)) == \
        best_by_enumeration(instance)
