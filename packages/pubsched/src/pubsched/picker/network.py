"""The flow network the picker solves (the proof is in the package's docstring).

One function builds it and reads the answer back; the costs are computed here and nowhere
else, in the order of the promises: pins first, then the needs, then fairness, then the
tiebreak.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from datetime import date, datetime
from types import MappingProxyType

import networkx as nx

from . import needs as needs_of
from .model import (
    TIEBREAK_RANGE,
    Pair,
    PickerInputError,
    Roster,
    Shift,
    Tender,
    check_input,
    load_vector,
)


def _tiebreak(week_of: date, tender_id: str, shift_id: str) -> int:
    # blake2b, not hash(): str hashes are salted per process (PYTHONHASHSEED).
    digest = hashlib.blake2b(
        f"{week_of.isoformat()}\x1f{tender_id}\x1f{shift_id}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big") % TIEBREAK_RANGE


class _Graph:
    """A MultiDiGraph with integer nodes handed out in build order (source 0, sink 1), that
    keeps the sums of its positive and negative arc costs (the bypass must outweigh both)."""

    def __init__(self) -> None:
        self.g = nx.MultiDiGraph()
        self.next = 2
        self.positive = 0
        self.negative = 0

    def node(self) -> int:
        self.next += 1
        return self.next - 1

    def arc(self, a: int, b: int, capacity: int, weight: int = 0) -> int | None:
        """The arc's key among its parallels (None: no capacity, no arc)."""
        if capacity <= 0:
            return None
        if weight > 0:
            self.positive += weight * capacity
        else:
            self.negative -= weight * capacity
        key: int = self.g.add_edge(a, b, capacity=capacity, weight=weight)
        return key


def _max_flow_min_cost(net: _Graph, source: int, sink: int, most: int
                       ) -> dict[int, dict[int, dict[int, int]]]:
    """The min-cost maximum flow, by one network simplex: ``most`` units must leave the
    source, and a bypass arc source -> sink takes whatever the network cannot carry, at a
    cost above every other cost a flow can sum to (all positive costs plus all the pins'
    rewards). So a flow that leaves one unit more on the bypass is always dearer: the
    cheapest flow carries the most units the network can, and among those it is the
    cheapest, exactly what networkx's ``max_flow_min_cost`` gives (which first runs a
    separate maximum-flow search, a third of the time for a big pub)."""
    bypass = net.positive + net.negative + 1
    net.g.add_edge(source, sink, capacity=most, weight=bypass)
    net.g.nodes[source]["demand"] = -most
    net.g.nodes[sink]["demand"] = most
    _cost, flow = nx.network_simplex(net.g)
    return flow  # type: ignore[no-any-return]


def pick(
    week_of: date,
    shifts: Collection[Shift],
    tenders: Collection[Tender],
    availability: Mapping[str, Collection[str]],
    pins: Collection[Pair] = (),
    exclusions: Collection[Pair] = (),
) -> Roster:
    """Fill the week's shifts: the pins, the most slots, the most needs met, the fairest
    load, then the tiebreak; never one tender on two shifts that clash.

    ``week_of`` only seeds the tiebreak. ``availability`` maps a tender id to the shift
    ids they can work; a tender with no entry is available for nothing. ``pins`` are
    (tender, shift) pairs put on the roster whatever their availability; ``exclusions``
    pairs the picker never uses. Raises `PickerInputError` for inconsistent input
    (duplicate or unknown ids, negative counts, a pair both pinned and excluded, more pins
    than slots, a tender pinned twice on one night or on two shifts that overlap).

    The flow keeps a tender to one shift a night; two shifts of different nights that
    overlap in time (Thursday 18:00-02:00 and Friday 01:00-05:00) are kept apart by a
    branch and bound around it (`_best`).
    """
    if isinstance(week_of, datetime) or not isinstance(week_of, date):
        raise PickerInputError(f"week_of must be a date, got {week_of!r}")
    pinned, excluded = check_input(shifts, tenders, availability, pins, exclusions)
    return _best(week_of, shifts, tenders, availability, pinned, excluded)


Rank = tuple[int, int, tuple[int, ...], int]


def _rank(week_of: date, roster: Roster, tenders: Collection[Tender],
          pinned: frozenset[Pair]) -> Rank:
    """The promises' order as one key, smaller better: the most slots filled, the fewest
    needs missing, the smallest load vector, the smallest tiebreak sum (pins carry none)."""
    tiebreak = sum(_tiebreak(week_of, t, s) for s, ts in roster.assignments.items()
                   for t in ts if (t, s) not in pinned)
    return (-roster.filled, sum(len(m) for m in roster.missing.values()),
            load_vector(roster.loads, tenders), tiebreak)


def _first_clash(roster: Roster, by_id: Mapping[str, Shift]) -> tuple[str, str, str] | None:
    """The first (tender, shift, shift) of the roster that clash in time, in id order."""
    worked: dict[str, list[str]] = {}
    for shift_id in sorted(roster.assignments):
        for tender_id in roster.assignments[shift_id]:
            worked.setdefault(tender_id, []).append(shift_id)
    for tender_id in sorted(worked):
        theirs = worked[tender_id]
        for i, a in enumerate(theirs):
            for b in theirs[i + 1:]:
                if by_id[a].clashes(by_id[b]):
                    return tender_id, a, b
    return None


def _best(week_of: date, shifts: Collection[Shift], tenders: Collection[Tender],
          availability: Mapping[str, Collection[str]], pinned: frozenset[Pair],
          excluded: frozenset[Pair]) -> Roster:
    """The best roster with no clash, by branch and bound over the flow.

    Why it is the picker's promise: the flow (`_flow`) returns the best roster of a
    *relaxation* (one shift a night, but shifts of two nights may overlap). If it has no
    clash, it is the answer. Otherwise some tender t works shifts a and b that overlap; no
    valid roster has both, so every valid roster is a roster of the relaxation with (t, a)
    excluded or of the one with (t, b) excluded (a pinned one is never excluded: two pins
    that clash are refused as input). Solving both and keeping the better answer, down to
    rosters without a clash, finds the best valid one; and the best of a relaxation is
    never worse than the best below it, so a branch no better than the best found is
    dropped. Ties keep the first found, the branches taken in id order, so the same input
    gives the same roster. (Rostering with overlapping shifts is NP-hard in general, so
    no single flow can do it; in a pub's week clashes are few, and with none the flow runs
    once.)"""
    by_id = {s.id: s for s in shifts}
    best: tuple[Rank, Roster] | None = None
    branches = [excluded]
    while branches:
        without = branches.pop()
        roster = _flow(week_of, shifts, tenders, availability, pinned, without)
        rank = _rank(week_of, roster, tenders, pinned)
        if best is not None and rank >= best[0]:
            continue
        clash = _first_clash(roster, by_id)
        if clash is None:
            best = (rank, roster)
            continue
        tender_id, a, b = clash
        # depth first, (t, a) excluded first: pushed last
        branches += [without | {(tender_id, s)} for s in (b, a)
                     if (tender_id, s) not in pinned]
    assert best is not None  # the pins alone never clash, so a branch without one exists
    return best[1]


def _flow(week_of: date, shifts: Collection[Shift], tenders: Collection[Tender],
          availability: Mapping[str, Collection[str]], pinned: frozenset[Pair],
          excluded: frozenset[Pair]) -> Roster:
    """The flow's roster: every promise, one shift a night (the clash of shifts of two
    nights is `_best`'s)."""
    # Everything is built in sorted-id order with integer node labels, so networkx sees
    # the same graph whatever order the caller's collections came in.
    shift_by_id = {s.id: s for s in sorted(shifts, key=lambda s: s.id)}
    ordered_tenders = sorted(tenders, key=lambda t: t.id)
    skills = {t.id: t.skills for t in ordered_tenders}
    pins_of = {t.id: sorted(s for p, s in pinned if p == t.id) for t in ordered_tenders}
    pinned_on = {s: sorted(t for t, p in pinned if p == s) for s in shift_by_id}

    # What is left to the picker per tender: their free shifts (available, not excluded,
    # not pinned, not on a pinned night) and their free cap (the cap less their pins).
    free: dict[str, list[str]] = {}
    caps: dict[str, int] = {}
    start: dict[str, int] = {}  # history + pins: the level their first free shift lifts
    for t in ordered_tenders:
        pinned_shifts = [shift_by_id[s] for s in pins_of[t.id]]
        free[t.id] = sorted(
            s for s in set(availability.get(t.id, ()))
            if (t.id, s) not in excluded
            and not any(shift_by_id[s].clashes(p) for p in pinned_shifts))
        reachable = len({shift_by_id[s].night for s in free[t.id]})
        left = None if t.cap is None else max(0, t.cap - len(pins_of[t.id]))
        caps[t.id] = reachable if left is None else min(left, reachable)
        start[t.id] = t.history + len(pins_of[t.id])

    levels = sorted({start[t.id] + k for t in ordered_tenders for k in range(1, caps[t.id] + 1)})
    rank = {level: r for r, level in enumerate(levels)}
    base = len(ordered_tenders) + 1
    total_slots = sum(s.slots for s in shift_by_id.values())
    unit = TIEBREAK_RANGE * (total_slots + 1)
    level_cost = {level: base ** rank[level] * unit for level in levels}
    # Each tier outweighs every cost of the tiers below it, summed over any flow.
    general_cost = sum(level_cost[start[t.id] + k] for t in ordered_tenders
                       for k in range(1, caps[t.id] + 1)) + unit
    pin_reward = general_cost * (total_slots + 1)

    net = _Graph()
    source, sink = 0, 1
    need_node: dict[tuple[str, str], int] = {}
    general_node: dict[str, int] = {}
    override_node: dict[str, int] = {}
    for shift_id, shift in shift_by_id.items():
        for need in shift.needs:
            need_node[shift_id, need] = net.node()
            net.arc(need_node[shift_id, need], sink, 1)
        general_node[shift_id] = net.node()
        net.arc(general_node[shift_id], sink, shift.general, general_cost)
        surplus = needs_of.overrides(shift.needs, shift.general,
                                     {t: skills[t] for t in pinned_on[shift_id]})
        if surplus:  # pins in, at most `surplus` through, onto any of the needs
            override_node[shift_id], spill = net.node(), net.node()
            net.arc(override_node[shift_id], spill, surplus)
            for need in shift.needs:
                net.arc(spill, need_node[shift_id, need], 1)

    def into_shift(node: int, tender_id: str, shift_id: str, cost: int = 0
                   ) -> list[tuple[int, int, int]]:
        """Arcs from ``node`` into the shift's slots the tender may fill (their needs, the
        general slots), each of capacity 1 and ``cost``: the arcs a unit that puts the
        tender on the shift leaves ``node`` by."""
        targets = [need_node[shift_id, need] for need in shift_by_id[shift_id].needs
                   if need in skills[tender_id]]
        made = [(node, target, net.arc(node, target, 1, cost))
                for target in (*targets, general_node[shift_id])]
        return [(a, b, key) for a, b, key in made if key is not None]

    pin_arcs: list[tuple[int, str, str]] = []
    for tender_id, shift_id in sorted(pinned):
        node = net.node()
        net.arc(source, node, 1, -pin_reward)
        into_shift(node, tender_id, shift_id)
        if shift_id in override_node:
            net.arc(node, override_node[shift_id], 1)
        pin_arcs.append((node, tender_id, shift_id))
    # (arc) -> (tender, shift) for every arc whose unit puts a tender on a shift
    tender_arcs: dict[tuple[int, int, int], tuple[str, str]] = {}
    for t in ordered_tenders:
        if caps[t.id] == 0:
            continue
        tender_node = net.node()
        for k in range(1, caps[t.id] + 1):  # the k-th shift's level: parallel arcs
            net.arc(source, tender_node, 1, level_cost[start[t.id] + k])
        by_night: dict[date, list[str]] = {}
        for shift_id in free[t.id]:
            by_night.setdefault(shift_by_id[shift_id].night, []).append(shift_id)
        for night in sorted(by_night):
            night_shifts = by_night[night]
            lone = len(night_shifts) == 1 and not (
                set(shift_by_id[night_shifts[0]].needs) & set(skills[t.id]))
            # one shift that night with one way in (its general slots): the tender's arc
            # into it carries at most one unit, so no night node is needed to cap the night
            into = tender_node if lone else net.node()
            if not lone:
                net.arc(tender_node, into, 1)
            for shift_id in night_shifts:
                for arc in into_shift(into, t.id, shift_id, _tiebreak(week_of, t.id,
                                                                       shift_id)):
                    tender_arcs[arc] = (t.id, shift_id)

    on_shift: dict[str, list[str]] = {shift_id: [] for shift_id in shift_by_id}
    if net.g.has_node(source) and net.g.has_node(sink):
        flow = _max_flow_min_cost(net, source, sink, total_slots)
        for node, tender_id, shift_id in pin_arcs:
            if sum(flow[source][node].values()) != 1:  # the docstring's proof: cannot happen
                raise AssertionError(f"pin {tender_id!r} on {shift_id!r} left out")
            on_shift[shift_id].append(tender_id)
        for (a, b, key), (tender_id, shift_id) in tender_arcs.items():
            if flow[a][b][key] > 0:
                on_shift[shift_id].append(tender_id)

    assignments = {shift_id: tuple(sorted(ts)) for shift_id, ts in on_shift.items()}
    loads = {t.id: 0 for t in ordered_tenders}
    for ts in assignments.values():
        for tender_id in ts:
            loads[tender_id] += 1
    unfilled = {
        shift_id: shift_by_id[shift_id].slots - len(ts) for shift_id, ts in assignments.items()
    }
    missing = {shift_id: needs_of.unmet(shift_by_id[shift_id].needs,
                                        {t: skills[t] for t in ts})
               for shift_id, ts in assignments.items()}
    return Roster(
        assignments=MappingProxyType(assignments),
        unfilled=MappingProxyType(unfilled),
        loads=MappingProxyType(loads),
        missing=MappingProxyType(missing),
    )
