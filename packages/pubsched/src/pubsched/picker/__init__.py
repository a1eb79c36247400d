"""The fair picker: who works which shift this week.

Pure: no database, no clock, no I/O. The caller hands in the week's shifts (with the skills
they need), the tenders (with their history, maxima and skills), who said they can work
what, and the operator's hand edits (pins and exclusions); the picker hands back a
`Roster`. The parts: ``model`` (the data and its checks), ``needs`` (which needs a set of
tenders meets), ``network`` (the flow, `pick`). Same input, same roster, in any process
(no reliance on ``hash()`` or on the order of the caller's collections).

What the picker promises
========================
A *valid assignment* puts tenders on shifts so that

- every *pin* (tender, shift) is in it, whatever the tender's availability (the
  operator's choice stands); no *exclusion* (tender, shift) is;
- otherwise a tender works only shifts they said they are available for;
- a shift gets at most ``slots`` tenders, each at most once;
- SKILLS. Each need of a shift (``Shift.needs``) reserves one of its slots, the others are
  *general*. The tenders on a shift must fit its slots: a general slot takes anyone, a
  reserved slot a tender with that skill, one slot per tender (a tender with ``keys`` and
  ``cellar`` fills one of the two). Only pins may sit in a reserved slot without its skill
  (an *override*), and only as many as placing every pin requires: ``needs.overrides``,
  ``max(0, pins - general - m)`` with ``m`` the largest matching of the pins to the needs.
  So a reserved slot stays empty rather than go to someone without the skill;
- a tender works at most one shift per night (``Shift.night``: a shift crossing midnight
  belongs to the night it starts), and never two shifts that overlap in time
  (``Shift.starts``/``ends``, when given: Thursday 18:00-02:00 and Friday 01:00-05:00
  are on two nights, and still one person cannot work both; `Shift.clashes`);
- a tender works at most ``Tender.cap`` shifts this week: the smaller of their general
  maximum (``max_per_week``) and this week's maximum (``max_this_week``), where set; pins
  count toward it, and pins beyond it stand (the picker adds nothing more).

Among the valid assignments the picker returns one that

1. fills the most slots (no slot is left empty that some valid assignment fills: a greedy
   picker fails this, e.g. A free Fri and Sat with max 1, B free Fri only: putting A on
   Fri first leaves Sat empty), and
2. among those, meets the most needs (``Roster.missing``: the needs a maximum matching of
   the shift's tenders to its needs leaves unmet, `needs.unmet`; the fewest in total), and
3. among those, is the *fairest*, by this definition, the one the tests also use:

   FAIRNESS. A tender's *adjusted load* is ``history + load``: the shifts they worked in
   the trailing `HISTORY_WEEKS` sent weeks plus the shifts they get this week (pins
   included). The *load vector* of an assignment is the adjusted loads of all tenders,
   sorted in descending order (`load_vector`). Assignment X is *fairer* than Y when X's load vector
   is lexicographically smaller than Y's: whoever ends up busiest is as little busy as
   possible, then the second busiest, and so on.

4. among equally fair ones, is chosen by a per-week tiebreak (a stable hash of week,
   tender and shift), so that the same week always gets the same roster while symmetric
   tenders are not always resolved in favour of the same one, week after week.

Slots no valid assignment can fill are reported in `Roster.unfilled`, never invented.

Why min-cost max-flow finds exactly that
========================================
(Of the rules above, the flow keeps all but the overlap of two shifts on two nights; the
branch and bound around it, ``network._best``, keeps that one too, and why it loses
nothing is in its docstring. What follows is the flow's.)

The network: source -> one unit-capacity arc per (tender, k) for k = 1..cap' (parallel
arcs straight into the tender's node) -> tender -> (tender, night) with capacity 1 -> the
shift's *need nodes* for the skills the tender has, and the shift's *general node*
(capacity 1 each), for each shift of that night the tender is free for. The night node
carries one unit, so it puts the tender on one shift of that night in one slot; when the
tender is free for a single shift that night and none of its needs is theirs, the one arc
from the tender node into its general node carries at most one unit already, and the
night node is left out. A need node goes to the sink with capacity 1, the general node
with capacity ``slots - len(needs)``. Here cap' is the cap less the tender's pins, and
"free for" means available, not excluded, not pinned there and not on a night of one of
their pins. Each pin is its own node: source -> pin (cost ``-P``) -> the shift's need
nodes for the pinned tender's skills and its general node, and, when ``needs.overrides``
is positive, into an *override* hub that passes at most that many units on to any need
node. Integral flows that saturate every pin are exactly the valid assignments placed into
slots. A flow that saturates the pins and is maximum exists: the pins fit (they are
validated: at most ``slots`` per shift, one per night), and augmenting paths from the
source never empty a source arc. Every other cost sums, over any flow, to less than ``P``,
so the min-cost maximum flows saturate every pin. The min-cost maximum flow is found by
one network simplex with a bypass arc source -> sink dearer than every other cost of a
flow together (``network._max_flow_min_cost``): a unit left to the bypass always costs more
than anything it could buy, so the cheapest flow is a maximum one.

The general node's arc to the sink costs ``W`` per unit, ``W`` above every fairness and
tiebreak cost a flow can sum to. With the slots filled fixed (a maximum flow) and the
pins in, fewer general units is more reserved slots used; the overrides are then exactly
``needs.overrides`` (fewer cannot place the pins, the hub allows no more), so the other
reserved units are tenders with the skill: the most needs met. For a given set of
tenders on a shift the cheapest placement uses a maximum matching of them to the needs
(the rest fit the general slots whenever any placement fits), so this count is the one
`needs.unmet` reports.

Give tender t's k-th arc the *level* ``L = history_t + pins_t + k``: it is the adjusted
load the tender reaches by taking that shift. Number the distinct levels in use from the
lowest, ``r(L) = 0, 1, 2, ...``, and let the k-th arc cost ``B ** r(L) * M`` with ``B`` =
the number of tenders + 1. A tender's arcs get dearer with k, so a min-cost flow uses a
prefix of them (swapping a used dearer arc for an unused cheaper one of the same tender
lowers the cost; the pins fix ``pins_t`` of the load at no level cost), and the flow's
fairness cost is ``M * sum_L n_L * B ** r(L)`` where ``n_L`` counts the tenders whose
adjusted load passes level L this week (``history_t + pins_t < L <= history_t + load_t``).
Each tender passes each level at most once, so ``n_L < B``: the sum is the number whose
base-B digits are the ``n_L``, and comparing costs compares the digit strings from the
highest level down. The number of tenders with adjusted load ``>= L`` is ``n_L`` plus the
tenders whose history and pins alone reach L, a constant; and sorted-descending vectors of
the same length compare lexicographically exactly as those counts do from the highest
level down (the first level where the counts differ is where the vectors first differ, and
the vector with fewer entries there is the smaller). So, among maximum flows with the pins
in and the most needs met, minimal fairness cost = lexicographically smallest load vector.
The tiebreak adds an integer in ``[0, TIEBREAK_RANGE)`` per (tender, shift) arc; a flow
carries at most ``total slots`` units, and ``M = TIEBREAK_RANGE * (total slots + 1)``
exceeds any tiebreak sum, so the tiebreak orders only equally fair flows. All costs are
integers: networkx's min-cost flow needs them (float costs hang or mislead, FACTS.md,
networkx#2076 and #4641). Python integers do not overflow, and levels are ranked (not raw
histories) to keep the numbers small.

(Without skills and pins, costs that merely grow with the level, e.g. linear in ``r(L)``,
also pass the property test: the load vectors of maximum assignments form an M-convex set,
on which Frank and Murota's "discrete decreasing minimization" shows any strictly convex
separable cost has the same minimisers. The base-B costs are kept because the argument
above is elementary, and it is what the tests check.)
"""

from __future__ import annotations

from .model import (
    HISTORY_WEEKS,
    TIEBREAK_RANGE,
    Pair,
    PickerInputError,
    Roster,
    Shift,
    Tender,
    load_vector,
)
from .needs import unmet
from .network import pick

__all__ = [
    "HISTORY_WEEKS",
    "TIEBREAK_RANGE",
    "Pair",
    "PickerInputError",
    "Roster",
    "Shift",
    "Tender",
    "load_vector",
    "pick",
    "unmet",
]
