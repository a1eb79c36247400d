"""The decisions, without I/O: a core composed of small parts, one job each.

Every operation is a generator (:data:`rowstate.protocol.Op`): it yields a
:class:`~rowstate.protocol.Batch` of statements (or a :class:`~rowstate.protocol.Call` to run
the caller's side effect) and receives the rows back. The sync and the async front ends only
drive these generators (:func:`rowstate.drive`), so the rules live here once and the twins
cannot disagree. Input is checked before the first yield: a bad key, an unknown field or an
edge the machine lacks raises before anything reaches the database.

The parts, in the order :class:`Core` builds them (each one's constructor names what it
uses; none reaches into another's private state):

=================  ===========================================================================
``context``        the binding, dialect, compiler, clock, door, the one plan cache, the memos
``inputs``         a call's arguments checked: key, owner, event data, from-states, returning
``rules``          every check and SET, and the one table of which checks each operation carries
``cas``            running a compare-and-set in its three row shapes; explaining a refusal
``plans``          the compiled plans of moves and claims, once per shape
``moves``          the general path of a move: its write and its verdict
``lanes``          plain moves and their lanes (the hot path); ``transition``
``dryrun``         can_transition, enabled_edges, the rules as data (transition_checks)
``reads``          get, history, resolve (what became of a move whose COMMIT got no answer)
``rows``           rows through the door (create, ensure); queries by state (find, count)
``holds``          holds and fences inside a unit of work
``leases``         claim -> act -> finalize, release, run
``finalization``   finalization claims keyed by (holder, scope)
``bulk``           set-based moves (transition_many)
``timers``         fire_due: timed edges and once-per-row notices
``diagnose``       inspect (one row seen whole), stuck (the rows that do not move)
=================  ===========================================================================

The module graph runs the same way: a part imports only the parts above it in this list
(``lane`` and ``templates``, the lanes' data, sit under ``context``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..binding import Binding
from ..dialects import Dialect
from ..protocol import Door
from .bulk import Bulk
from .cas import Cas
from .context import Context
from .diagnose import Diagnose
from .dryrun import DryRun
from .finalization import Finalization
from .holds import Holds
from .inputs import Inputs
from .lanes import Lanes
from .leases import Leases
from .moves import Moves
from .plans import Plans
from .reads import Reads
from .rows import Rows
from .rules import Rules
from .timers import Timers

__all__ = ["Core"]


class Core:
    """Every operation of one binding in one dialect.

    The operations are the parts' own bound methods, bound once here: a call costs no
    forwarding frame (the lane hot path: ``transition_lane`` is ``Lanes.transition_lane``).
    ``door`` is the front end driving this core: acts receive leases whose ``atomic()``
    opens a unit of work fenced by them.
    """

    def __init__(self, binding: Binding, dialect: Dialect,
                 clock: Callable[[], datetime] | None = None, *,
                 door: Door | None = None) -> None:
        context = Context(binding, dialect, clock, door)
        inputs = Inputs(context)
        rules = Rules(context)
        cas = Cas(context)
        plans = Plans(context, rules)
        moves = Moves(context, inputs, plans, cas)
        lanes = Lanes(context, inputs, plans, cas, moves)
        dryrun = DryRun(context, inputs, plans)
        reads = Reads(context, inputs)
        rows = Rows(context, inputs, rules, reads)
        holds = Holds(context, inputs, rules)
        leases = Leases(context, inputs, rules, plans, cas, moves, lanes)
        finalization = Finalization(context, inputs, rules, cas)
        bulk = Bulk(context, inputs, rules, plans, moves, rows)
        timers = Timers(context, inputs, rules, cas, moves, leases, bulk)
        diagnose = Diagnose(context, inputs, rules, dryrun, reads, timers)

        self._context = context
        self.binding = binding
        self.machine = binding.machine
        self.dialect = dialect
        self.clock = clock
        self.state_of = context.state_of
        # moves
        self.transition = lanes.transition
        self.transition_lane = lanes.transition_lane
        self.transition_many = bulk.transition_many
        # the dry run and the rules as data
        self.can_transition = dryrun.can_transition
        self.enabled_edges = dryrun.enabled_edges
        self.transition_checks = dryrun.transition_checks
        self.finalization_checks = finalization.finalization_checks
        # reads and rows
        self.get = reads.get
        self.history = reads.history
        self.resolve = reads.resolve
        self.create = rows.create
        self.ensure = rows.ensure
        self.find = rows.find
        self.count = rows.count
        # the application door
        self.hold = holds.hold
        self.fence = holds.fence
        # claims
        self.claim = leases.claim
        self.finalize = leases.finalize
        self.release = leases.release
        self.run = leases.run
        self.claim_finalization = finalization.claim_finalization
        self.release_finalization = finalization.release_finalization
        # timers
        self.fire_due = timers.fire_due
        # the diagnosis (read-only: rowstate inspect / rowstate stuck)
        self.inspect = diagnose.inspect
        self.stuck = diagnose.stuck

    @property
    def door(self) -> Door | None:
        return self._context.door

    @door.setter
    def door(self, door: Door | None) -> None:
        self._context.door = door
