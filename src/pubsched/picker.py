"""The fair picker: who works which shift this week.

Pure: no database, no clock, no I/O. The caller hands in the week's shifts, the tenders
(with their history and maxima) and who said they can work what; the picker hands back a
`Roster`. Same input, same roster, in any process (no reliance on ``hash()`` or on the
order of the caller's collections).

What the picker promises
========================
A *valid assignment* puts tenders on shifts so that

- a tender works only shifts they said they are available for;
- a shift gets at most ``slots`` tenders, each at most once;
- a tender works at most one shift per night (``Shift.night``: a shift crossing midnight
  belongs to the night it starts);
- a tender works at most ``Tender.cap`` shifts this week: the smaller of their general
  maximum (``max_per_week``) and this week's maximum (``max_this_week``), where set.

Among the valid assignments the picker returns one that

1. fills the most slots (no slot is left empty that some valid assignment fills: a greedy
   picker fails this, e.g. A free Fri and Sat with max 1, B free Fri only: putting A on
   Fri first leaves Sat empty), and
2. among those, is the *fairest*, by this definition, the one the tests also use:

   FAIRNESS. A tender's *adjusted load* is ``history + load``: the shifts they worked in
   the trailing `HISTORY_WEEKS` sent weeks plus the shifts they get this week. The
   *load vector* of an assignment is the adjusted loads of all tenders, sorted in
   descending order (`load_vector`). Assignment X is *fairer* than Y when X's load vector
   is lexicographically smaller than Y's: whoever ends up busiest is as little busy as
   possible, then the second busiest, and so on.

3. among equally fair ones, is chosen by a per-week tiebreak (a stable hash of week,
   tender and shift), so that the same week always gets the same roster while symmetric
   tenders are not always resolved in favour of the same one, week after week.

Slots no valid assignment can fill are reported in `Roster.unfilled`, never invented.

Why min-cost max-flow finds exactly that
========================================
The network: source -> one unit-capacity arc per (tender, k) for k = 1..cap -> tender
-> (tender, night) with capacity 1 -> each shift of that night the tender is available
for (capacity 1) -> shift -> sink with capacity ``slots``. Integral flows are exactly the
valid assignments; a maximum flow fills the most slots.

Give tender t's k-th arc the *level* ``L = history_t + k``: it is the adjusted load the
tender reaches by taking that shift. Number the distinct levels in use from the lowest,
``r(L) = 0, 1, 2, ...``, and let the k-th arc cost ``B ** r(L) * M`` with ``B`` = the
number of tenders + 1. A tender's arcs get dearer with k, so a min-cost flow uses a
prefix of them (swapping a used dearer arc for an unused cheaper one of the same tender
lowers the cost), and the flow's fairness cost is ``M * sum_L n_L * B ** r(L)`` where
``n_L`` counts the tenders whose adjusted load passes level L this week
(``history_t < L <= history_t + load_t``). Each tender passes each level at most once,
so ``n_L < B``: the sum is the number whose base-B digits are the ``n_L``, and comparing
costs compares the digit strings from the highest level down. The number of tenders with
adjusted load ``>= L`` is ``n_L`` plus the tenders whose history alone reaches L, a
constant; and sorted-descending vectors of the same length compare lexicographically
exactly as those counts do from the highest level down (the first level where the counts
differ is where the vectors first differ, and the vector with fewer entries there is the
smaller). So, among maximum flows, minimal fairness cost = lexicographically smallest
load vector. The tiebreak adds an integer in ``[0, TIEBREAK_RANGE)`` per (tender, shift)
arc; a flow carries at most ``total slots`` units, and ``M = TIEBREAK_RANGE * (total
slots + 1)`` exceeds any tiebreak sum, so the tiebreak orders only equally fair flows.
All costs are integers: networkx's min-cost flow needs them (float costs hang or
mislead, FACTS.md, networkx#2076 and #4641). Python integers do not overflow, and levels
are ranked (not raw histories) to keep the numbers small.

(Costs that merely grow with the level, e.g. linear in ``r(L)``, also pass the property
test: the load vectors of maximum assignments form an M-convex set, on which Frank and
Murota's "discrete decreasing minimization" shows any strictly convex separable cost has
the same minimisers. The base-B costs are kept because the argument above is elementary,
and it is what the tests check.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from types import MappingProxyType

import networkx as nx

__all__ = [
    "HISTORY_WEEKS",
    "TIEBREAK_RANGE",
    "PickerInputError",
    "Roster",
    "Shift",
    "Tender",
    "load_vector",
    "pick",
]

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


@dataclass(frozen=True)
class Shift:
    """One shift of the week: ``slots`` tenders wanted on ``night``.

    ``night`` is the date the shift starts on; a shift crossing midnight belongs to it.
    """

    id: str
    night: date
    slots: int

    def __post_init__(self) -> None:
        _require_id(self.id, "shift")
        if isinstance(self.night, datetime) or not isinstance(self.night, date):
            raise PickerInputError(f"shift {self.id!r}: night must be a date, got {self.night!r}")
        _require_count(self.slots, f"shift {self.id!r} slots")


@dataclass(frozen=True)
class Tender:
    """A tender as the picker sees them.

    ``history``: shifts worked in the trailing `HISTORY_WEEKS` sent weeks.
    ``max_per_week``: the tender's general maximum (their profile), None = no limit.
    ``max_this_week``: the maximum they gave on this week's form, None = no limit.
    """

    id: str
    history: int = 0
    max_per_week: int | None = None
    max_this_week: int | None = None

    def __post_init__(self) -> None:
        _require_id(self.id, "tender")
        _require_count(self.history, f"tender {self.id!r} history")
        if self.max_per_week is not None:
            _require_count(self.max_per_week, f"tender {self.id!r} max_per_week")
        if self.max_this_week is not None:
            _require_count(self.max_this_week, f"tender {self.id!r} max_this_week")

    @property
    def cap(self) -> int | None:
        """The smaller of the two maxima that are set; None when neither is."""
        limits = [m for m in (self.max_per_week, self.max_this_week) if m is not None]
        return min(limits) if limits else None


@dataclass(frozen=True)
class Roster:
    """The picker's answer.

    ``assignments``: shift id -> the tenders on it (sorted ids), every shift present.
    ``unfilled``: shift id -> slots no valid assignment could fill, every shift present.
    ``loads``: tender id -> shifts this week, every tender present.
    """

    assignments: Mapping[str, tuple[str, ...]]
    unfilled: Mapping[str, int]
    loads: Mapping[str, int]

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


def _tiebreak(week_of: date, tender_id: str, shift_id: str) -> int:
    # blake2b, not hash(): str hashes are salted per process (PYTHONHASHSEED).
    digest = hashlib.blake2b(
        f"{week_of.isoformat()}\x1f{tender_id}\x1f{shift_id}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big") % TIEBREAK_RANGE


def _check_input(
    shifts: Collection[Shift],
    tenders: Collection[Tender],
    availability: Mapping[str, Collection[str]],
) -> None:
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


def pick(
    week_of: date,
    shifts: Collection[Shift],
    tenders: Collection[Tender],
    availability: Mapping[str, Collection[str]],
) -> Roster:
    """Fill the week's shifts: the most slots, then the fairest load, then the tiebreak.

    ``week_of`` only seeds the tiebreak. ``availability`` maps a tender id to the shift
    ids they can work; a tender with no entry is available for nothing. Raises
    `PickerInputError` for inconsistent input (duplicate or unknown ids, negative counts).
    """
    if isinstance(week_of, datetime) or not isinstance(week_of, date):
        raise PickerInputError(f"week_of must be a date, got {week_of!r}")
    _check_input(shifts, tenders, availability)

    # Everything is built in sorted-id order with integer node labels, so networkx sees
    # the same graph whatever order the caller's collections came in.
    shift_by_id = {s.id: s for s in sorted(shifts, key=lambda s: s.id)}
    ordered_tenders = sorted(tenders, key=lambda t: t.id)
    available = {t.id: sorted(set(availability.get(t.id, ()))) for t in ordered_tenders}

    def nights_of(tender_id: str) -> int:
        return len({shift_by_id[s].night for s in available[tender_id]})

    caps: dict[str, int] = {}
    for t in ordered_tenders:
        reachable = nights_of(t.id)  # more than one shift a night is never allowed
        caps[t.id] = reachable if t.cap is None else min(t.cap, reachable)

    levels = sorted({t.history + k for t in ordered_tenders for k in range(1, caps[t.id] + 1)})
    rank = {level: r for r, level in enumerate(levels)}
    base = len(ordered_tenders) + 1
    unit = TIEBREAK_RANGE * (sum(s.slots for s in shift_by_id.values()) + 1)

    graph = nx.DiGraph()
    source, sink = 0, 1
    next_node = 2

    def new_node() -> int:
        nonlocal next_node
        next_node += 1
        return next_node - 1

    shift_node = {shift_id: new_node() for shift_id in shift_by_id}
    node_shift = {node: shift_id for shift_id, node in shift_node.items()}
    for shift_id, node in shift_node.items():
        graph.add_edge(node, sink, capacity=shift_by_id[shift_id].slots, weight=0)

    tender_of_arc: dict[tuple[int, int], str] = {}
    for t in ordered_tenders:
        if caps[t.id] == 0:
            continue
        tender_node = new_node()
        for k in range(1, caps[t.id] + 1):
            level_node = new_node()
            cost = base ** rank[t.history + k] * unit
            graph.add_edge(source, level_node, capacity=1, weight=cost)
            graph.add_edge(level_node, tender_node, capacity=1, weight=0)
        night_node: dict[date, int] = {}
        for shift_id in available[t.id]:
            night = shift_by_id[shift_id].night
            if night not in night_node:
                night_node[night] = new_node()
                graph.add_edge(tender_node, night_node[night], capacity=1, weight=0)
            arc = (night_node[night], shift_node[shift_id])
            graph.add_edge(*arc, capacity=1, weight=_tiebreak(week_of, t.id, shift_id))
            tender_of_arc[arc] = t.id

    on_shift: dict[str, list[str]] = {shift_id: [] for shift_id in shift_by_id}
    if graph.has_node(source):
        flow: dict[int, dict[int, int]] = nx.max_flow_min_cost(graph, source, sink)
        for (tender_night, node), tender_id in tender_of_arc.items():
            if flow[tender_night][node] > 0:
                on_shift[node_shift[node]].append(tender_id)

    assignments = {shift_id: tuple(sorted(ts)) for shift_id, ts in on_shift.items()}
    loads = {t.id: 0 for t in ordered_tenders}
    for ts in assignments.values():
        for tender_id in ts:
            loads[tender_id] += 1
    unfilled = {
        shift_id: shift_by_id[shift_id].slots - len(ts) for shift_id, ts in assignments.items()
    }
    return Roster(
        assignments=MappingProxyType(assignments),
        unfilled=MappingProxyType(unfilled),
        loads=MappingProxyType(loads),
    )
