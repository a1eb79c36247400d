"""What the picker reads and what it answers: shifts, tenders, the roster, the checks.

Kept apart from the network (``network.py``) so that the data a caller builds, and the
rules a value must obey to be built at all, can be read without the flow.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from types import MappingProxyType

HISTORY_WEEKS = 8
"""How many trailing *sent* weeks the caller counts into `Tender.history`."""

TIEBREAK_RANGE = 2**16
"""Each (tender, shift) arc's tiebreak is an integer in ``[0, TIEBREAK_RANGE)``."""


class PickerInputError(ValueError):
    """The picker's input is inconsistent (a programming error of the caller)."""


def _require_id(value: object, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise PickerInputError(f"{what} id must be a non-empty string, got {value!r}")


def _require_count(value: object, what: str) -> None:
    # bool is an int subclass; True slots is a bug, not one slot.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PickerInputError(f"{what} must be a non-negative integer, got {value!r}")


def _check_times(shift: Shift) -> None:
    times = (shift.starts, shift.ends)
    if times == (None, None):
        return
    for t in times:
        if not isinstance(t, datetime) or t.tzinfo is None:
            raise PickerInputError(f"shift {shift.id!r}: starts and ends are aware datetimes, "
                                   f"both or neither, got {times!r}")
    assert shift.starts is not None and shift.ends is not None
    if shift.ends <= shift.starts:
        raise PickerInputError(f"shift {shift.id!r} ends before it starts: {times!r}")


def _words(value: object, what: str) -> tuple[str, ...]:
    # A bare string is a collection of letters: refused, as the availability's is.
    if isinstance(value, str) or not isinstance(value, Collection):
        raise PickerInputError(f"{what} must be a collection of words, got {value!r}")
    words = tuple(value)
    for word in words:
        if not isinstance(word, str) or not word:
            raise PickerInputError(f"{what}: a skill must be a non-empty string, got {word!r}")
    return words


@dataclass(frozen=True)
class Shift:
    """One shift of the week: ``slots`` tenders wanted on ``night``.

    ``night`` is the date the shift starts on; a shift crossing midnight belongs to it.
    ``needs``: the skills it needs, each reserving one of its slots for a tender who has
    it (kept sorted; a skill needed twice is refused, as are more needs than slots).
    ``starts``/``ends``: when it is worked (aware datetimes, both or neither, ``ends``
    after ``starts``); given, no tender works it and another shift that overlaps it in
    time (`clashes`), whatever their nights.
    """

    id: str
    night: date
    slots: int
    needs: tuple[str, ...] = ()
    starts: datetime | None = None
    ends: datetime | None = None

    def clashes(self, other: Shift) -> bool:
        """Whether one tender may not work both: one night, or times that overlap (a
        shift ending at 02:00 and one starting at 02:00 do not). The one rule of
        "already working then", in Python; the database's twin is
        :func:`pubsched.week.runs.clash_clause`."""
        if self.night == other.night:
            return True
        if self.starts is None or self.ends is None or other.starts is None \
                or other.ends is None:
            return False
        return self.starts < other.ends and other.starts < self.ends

    def __post_init__(self) -> None:
        _check_times(self)
        _require_id(self.id, "shift")
        if isinstance(self.night, datetime) or not isinstance(self.night, date):
            raise PickerInputError(f"shift {self.id!r}: night must be a date, got {self.night!r}")
        _require_count(self.slots, f"shift {self.id!r} slots")
        needs = _words(self.needs, f"shift {self.id!r} needs")
        if len(set(needs)) != len(needs):
            raise PickerInputError(f"shift {self.id!r} needs a skill twice: {sorted(needs)}")
        if len(needs) > self.slots:
            raise PickerInputError(
                f"shift {self.id!r} needs {len(needs)} skills but has {self.slots} slots")
        object.__setattr__(self, "needs", tuple(sorted(needs)))

    @property
    def general(self) -> int:
        """The slots no need reserves."""
        return self.slots - len(self.needs)


@dataclass(frozen=True)
class Tender:
    """A tender as the picker sees them.

    ``history``: shifts worked in the trailing `HISTORY_WEEKS` sent weeks.
    ``max_per_week``: the tender's general maximum (their profile), None = no limit.
    ``max_this_week``: the maximum they gave on this week's form, None = no limit.
    ``skills``: what they can do (free words), kept as a sorted tuple without repeats.
    """

    id: str
    history: int = 0
    max_per_week: int | None = None
    max_this_week: int | None = None
    skills: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _require_id(self.id, "tender")
        _require_count(self.history, f"tender {self.id!r} history")
        if self.max_per_week is not None:
            _require_count(self.max_per_week, f"tender {self.id!r} max_per_week")
        if self.max_this_week is not None:
            _require_count(self.max_this_week, f"tender {self.id!r} max_this_week")
        skills = _words(self.skills, f"tender {self.id!r} skills")
        object.__setattr__(self, "skills", tuple(sorted(set(skills))))

    @property
    def cap(self) -> int | None:
        """The smaller of the two maxima that are set; None when neither is."""
        limits = [m for m in (self.max_per_week, self.max_this_week) if m is not None]
        return min(limits) if limits else None


def _empty() -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Roster:
    """The picker's answer.

    ``assignments``: shift id -> the tenders on it (sorted ids), every shift present.
    ``unfilled``: shift id -> slots no valid assignment could fill, every shift present.
    ``loads``: tender id -> shifts this week, every tender present.
    ``missing``: shift id -> the needs no tender on it meets (sorted), every shift present
    (`pick` fills it; a hand-built roster may leave it empty).
    """

    assignments: Mapping[str, tuple[str, ...]]
    unfilled: Mapping[str, int]
    loads: Mapping[str, int]
    missing: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)

    @property
    def filled(self) -> int:
        return sum(len(tenders) for tenders in self.assignments.values())

    def shifts_of(self, tender_id: str) -> tuple[str, ...]:
        """The shifts one tender works, sorted by id."""
        return tuple(sorted(s for s, ts in self.assignments.items() if tender_id in ts))


def load_vector(loads: Mapping[str, int], tenders: Collection[Tender]) -> tuple[int, ...]:
    """The FAIRNESS definition's load vector: ``history + load`` per tender, descending.

    A tender missing from ``loads`` has load 0. A smaller vector (lexicographically) is a
    fairer assignment.
    """
    return tuple(sorted((t.history + loads.get(t.id, 0) for t in tenders), reverse=True))


Pair = tuple[str, str]
"""(tender id, shift id): a pin or an exclusion."""


def _pairs(pairs: Collection[Pair], what: str, tenders: set[str],
           shifts: set[str]) -> frozenset[Pair]:
    if isinstance(pairs, str):
        raise PickerInputError(f"{what} must be (tender, shift) pairs, got {pairs!r}")
    out = set()
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise PickerInputError(f"{what} must be (tender, shift) pairs, got {pair!r}")
        tender_id, shift_id = pair
        if tender_id not in tenders:
            raise PickerInputError(f"{what} of unknown tender {tender_id!r}")
        if shift_id not in shifts:
            raise PickerInputError(f"{what} on unknown shift {shift_id!r}")
        out.add((tender_id, shift_id))
    return frozenset(out)


def check_input(
    shifts: Collection[Shift],
    tenders: Collection[Tender],
    availability: Mapping[str, Collection[str]],
    pins: Collection[Pair],
    exclusions: Collection[Pair],
) -> tuple[frozenset[Pair], frozenset[Pair]]:
    """Refuse inconsistent input (`PickerInputError`); the pins and exclusions as sets."""
    for shift in shifts:
        if not isinstance(shift, Shift):
            raise PickerInputError(f"shifts must be Shift objects, got {shift!r}")
    for tender in tenders:
        if not isinstance(tender, Tender):
            raise PickerInputError(f"tenders must be Tender objects, got {tender!r}")
    shift_ids = [s.id for s in shifts]
    tender_ids = [t.id for t in tenders]
    for kind, ids in (("shift", shift_ids), ("tender", tender_ids)):
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise PickerInputError(f"duplicate {kind} ids: {duplicates}")
    known_shifts, known_tenders = set(shift_ids), set(tender_ids)
    for tender_id, available in availability.items():
        if tender_id not in known_tenders:
            raise PickerInputError(f"availability for unknown tender {tender_id!r}")
        if isinstance(available, str):
            raise PickerInputError(
                f"availability of {tender_id!r} must be a collection of shift ids, "
                f"got the string {available!r}"
            )
        unknown = sorted(set(available) - known_shifts, key=repr)
        if unknown:
            raise PickerInputError(f"tender {tender_id!r} available for unknown shifts {unknown}")
    pinned = _pairs(pins, "pin", known_tenders, known_shifts)
    excluded = _pairs(exclusions, "exclusion", known_tenders, known_shifts)
    both = sorted(pinned & excluded)
    if both:
        raise PickerInputError(f"pinned and excluded at once: {both}")
    by_id = {s.id: s for s in shifts}
    for shift in shifts:
        on_it = sum(1 for _, s in pinned if s == shift.id)
        if on_it > shift.slots:
            raise PickerInputError(f"shift {shift.id!r} has {on_it} pins for {shift.slots} slots")
    nights = [(t, by_id[s].night) for t, s in pinned]
    twice = sorted({p for p in nights if nights.count(p) > 1})
    if twice:
        raise PickerInputError(f"a tender pinned twice on one night: {twice}")
    clashing = sorted((t, a, b) for t, a in pinned for u, b in pinned
                      if t == u and a < b and by_id[a].clashes(by_id[b]))
    if clashing:
        raise PickerInputError(f"a tender pinned on two shifts that overlap: {clashing}")
    return pinned, excluded
