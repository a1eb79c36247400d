"""Plain moves and their lanes: the glue between a transition and its fastest form.

Most calls name only a key, a target, the state(s) they expect the row in and perhaps an
owner (a leased edge's finalize: the key and the fence). Everything else about such a call
is constant, so it is compiled once, from the same plans as any other move
(:class:`~rowstate.core.lane.PlainMove`), and each call costs a key check, a parameter list
and the write. Where the write is the one-statement fast CAS, the move has a
:class:`~rowstate.core.lane.Lane` per from-state, which the front ends run without a
generator; a refused lane is explained here, by the general path (:meth:`Lanes.refused`).

:meth:`Lanes.transition` and :meth:`Lanes.transition_lane` are the core's ``transition``
and ``transition_lane``: the hot path, so this part binds what it calls once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..compiler import CasPlan
from ..errors import InvariantViolation
from ..machine import Edge
from ..protocol import Op, Rows
from ..results import Reason, TransitionResult
from ..specs import GuardSpec
from .cas import Cas
from .context import Context
from .inputs import Inputs, plain_from
from .lane import Lane, LaneCall, PlainMove
from .moves import NO_PAYLOAD, Moves
from .plans import Plans


class Lanes:
    """Plain moves, compiled once per (to, from_, edge, owner?, returning), and their lanes."""

    def __init__(self, context: Context, inputs: Inputs, plans: Plans, cas: Cas,
                 moves: Moves) -> None:
        self.context = context
        self.inputs = inputs
        self.plans = plans
        self.cas = cas
        self.moves = moves
        # the hot path's lookups, bound once
        self.direct_lanes = context.direct_lanes
        self.plain_moves = context.plain_moves
        self.key_values = context.binding.key_values
        self.version = context.binding.version

    # -- the operations ------------------------------------------------------------------

    def transition(self, key: object, to: str, *, from_: Iterable[str] | str | None = None,
                   owner: object = None, payload: Mapping[str, Any] | None = None,
                   guards: GuardSpec | None = None, data: Any = None,
                   returning: Iterable[str] | None = None, by: str | None = None,
                   note: str | None = None) -> Op[TransitionResult]:
        cols = self.inputs.returning(returning, self.version)
        if by is not None or note is not None:  # said who or why: the general path writes it
            by, note = self.inputs.by(by), self.inputs.note(note)
        if (payload is None and guards is None and data is None and by is None
                and note is None and plain_from(from_)):
            owner = self.inputs.owner(owner)  # checked first: the plan compiled next names it
            move = self.plain_move(to, from_, None, owner is not None, cols)
            if move is not None:
                return self.plain_transition(key, move, owner, None)
        to = self.inputs.target(to)
        froms = self.inputs.froms(to, from_)
        return self.moves.move(key, to, froms, owner, payload, guards, data, None, None,
                               returning=cols, by=by, note=note)

    def transition_lane(self, key: object, to: str, from_: Iterable[str] | str | None,
                        owner: object, returning: Iterable[str] | None = None,
                        ) -> LaneCall | None:
        """A plain move's lane call (the front ends run it without a generator,
        :func:`rowstate.core.lane.drive_lane`), or None: use :meth:`transition`. The same
        checks as :meth:`transition`, in the same order, before any I/O."""
        if owner is None and returning is None:  # the commonest call: a key, a target
            try:
                lane = self.direct_lanes[(to, from_)]
            except (KeyError, TypeError):  # not seen yet, or an unhashable from_
                lane = self._direct_lane(to, from_)
            if lane is not None:
                return lane.call(self.key_values(key), None, None)
        cols = self.inputs.returning(returning, self.version)
        if not plain_from(from_):
            return None
        owner = self.inputs.owner(owner)
        move = self.plain_move(to, from_, None, owner is not None, cols)
        if move is not None and move.lanes:
            return self._lane_call(key, move, owner, None)
        return None

    # -- plain moves ---------------------------------------------------------------------

    def plain_move(self, to: str, from_: str | tuple[str, ...] | None, edge: Edge | None,
                   has_owner: bool, returning: tuple[str, ...] | None = None,
                   ) -> PlainMove | None:
        """The compiled plain move (None if ``from_`` is not hashable: the general path)."""
        memo = (to, from_, edge.name if edge is not None else None, has_owner, returning)
        try:
            move = self.plain_moves.get(memo)
        except TypeError:  # an unhashable state inside the tuple: the general path checks it
            return None
        if move is None:  # remembered by the names the caller gave; built from the states
            to = self.inputs.target(to)
            froms = (edge.src,) if edge is not None else self.inputs.froms(to, from_)
            owner = True if has_owner else None  # the plans take only its presence
            static: dict[str, Any] = {}
            plan = self.plans.transition(to, froms, owner, NO_PAYLOAD, None, static, edge,
                                         None, returning)
            plan_from = self.plans.one_state(plan, to, froms, owner, NO_PAYLOAD, None,
                                             static, edge, None, returning)
            static.pop("owner", None)
            if self.context.event_table:  # the event row's constant columns
                static.update(to=to, ev_owner=None, ev_data=None, ev_by=None, ev_note=None)
            move = PlainMove(to, froms, plan, static, edge, plan_from, {})
            lanes = {s: self._build(move, plan_from(s) if plan_from else plan, s)
                     for s in froms} if plan_from or len(froms) == 1 else {}
            if all(lanes.values()):  # every from-state has one, or the move has none
                move.lanes.update(lanes)  # type: ignore[arg-type]
            self.plain_moves[memo] = move
        return move

    def _build(self, move: PlainMove, plan: CasPlan, src: str) -> Lane | None:
        """The lane of ``plan`` (a one-state move), or None when its statement is not the
        one-statement fast CAS or names a value a lane does not fill (the general path)."""
        context = self.context
        event = None
        if not plan.fast:
            # SQLite with events, from one known state: the event row and the write in one
            # transaction (no read first), as its own lane; any other shape takes the
            # general path
            if plan.pre is not None or plan.event is None or context.dialect.writable_ctes:
                return None
            event = context.template(plan.event, move.static)
            if event is None:
                return None
        write = context.template(plan.main, move.static)
        # a move checked for its state only is explained without a clock (see Lane.refused)
        state_only = (len(plan.checks) == 1 and len(move.froms) == 1
                      and plan.checks[0].category == Reason.STATE_MISMATCH)
        read = context.row_template if state_only else context.read_template
        if write is None or read is None:
            return None
        combined = None
        if state_only and context.dialect.writable_ctes and not context.event_table:
            combined = context.template(context.compiler.written_or_read(plan), move.static)
        edge_name = (move.edge.name if move.edge is not None
                     else context.edge_name(src, move.to))
        return Lane(move, plan, src, edge_name, write, read, state_only, combined,
                    self.refused, context.state_of, context.columns,
                    context.binding.version, context.machine.name, context.clock,
                    context.public if context.decoders else None, event, context.now)

    def _direct_lane(self, to: str, from_: Iterable[str] | str | None) -> Lane | None:
        """The lane of a one-state move without an owner, remembered per (to, from_)."""
        if not plain_from(from_):
            return None
        move = self.plain_move(to, from_, None, False)
        if move is None:  # an unhashable state inside from_: the general path checks it
            return None
        lane = move.lanes.get(move.froms[0]) if len(move.froms) == 1 else None
        self.direct_lanes[(to, from_)] = lane
        return lane

    def _lane_call(self, key: object, move: PlainMove, owner: Any, fence: Any) -> LaneCall:
        """The lane of the state a several-state move likely leaves (see Cas.guessing)."""
        kv = self.key_values(key)
        src = move.froms[0] if len(move.froms) == 1 else self.context.last_from.get(
            id(move.plan), move.froms[0])
        return move.lanes[src].call(kv, owner, fence)

    def _lane_op(self, call: LaneCall) -> Op[TransitionResult]:
        """A lane call inside an operation (a finalize in run())."""
        try:
            rows = yield call.batch
        except InvariantViolation:
            return (yield from self.refused(call, True, None))
        result, rows = call.lane.finish(call, rows)
        if result is None:
            result = yield from self.refused(call, False, rows)
        return result

    def refused(self, call: LaneCall, invariant: bool, rows: Rows | None,
                ) -> Op[TransitionResult]:
        """A lane's write was refused: the general path's explanation, from the row read
        after it. A several-state move whose guess missed goes on guessing from that row
        (see Cas.guessing), as the general path would have."""
        move = call.lane.move
        kv, values = self.inputs.values(call.kv)
        values.update(move.static)
        if call.owner is not None:
            values["owner"] = call.owner
        if move.edge is not None and move.edge.lease:
            values["fence"] = call.fence
        if rows is not None and len(rows) > 1:  # the read sent with the write
            out = self.cas.outcome_of_read(rows[1])
        else:
            out = yield from self.cas.read_refused(values)
        if invariant:
            out = out._replace(invariant=True)
        if len(move.froms) == 1:
            return self.moves.refused(call.lane.plan, out, values, move.edge)
        return (yield from self.moves.write(kv, values, move.plan, move.plan_from, move.froms,
                                            move.to, move.edge, call.fence, call.owner, None,
                                            (call.lane.src, out)))

    def plain_transition(self, key: object, move: PlainMove, owner: Any,
                         fence: Any) -> Op[TransitionResult]:
        """Not a generator itself (one frame less per round trip): the key is checked here,
        before the write's generator is returned, so a bad key still raises before I/O."""
        if move.lanes:
            return self._lane_op(self._lane_call(key, move, owner, fence))
        kv, values = self.inputs.values(key)
        values.update(move.static)
        if owner is not None:  # checked by the caller, before compiling the move
            values["owner"] = owner
        return self.moves.write(kv, values, move.plan, move.plan_from, move.froms, move.to,
                                move.edge, fence, owner, None)
