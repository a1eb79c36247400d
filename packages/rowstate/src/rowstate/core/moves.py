"""Moves: a transition's write and its verdict, the general path.

Every move, plain or not (a payload, guards, event data, a timer's deadline, a leased
edge's finalize), ends in :meth:`Moves.write`: the compare-and-set of its plan (guessed
from several states when it can be, see :meth:`rowstate.core.cas.Cas.guessing`), then an
applied result with its event, or a refusal explained from the row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..compiler import CasPlan
from ..machine import Edge
from ..outbox import row_key
from ..protocol import Op
from ..results import Event, Reason, TransitionResult
from ..specs import GuardSpec
from .cas import Cas, Outcome
from .context import Context
from .inputs import Inputs
from .plans import Plans

NO_PAYLOAD: dict[str, Any] = {}  # never written to: a call without a payload shares it


class Moves:
    """The general path of a move, and the verdict of its write."""

    def __init__(self, context: Context, inputs: Inputs, plans: Plans, cas: Cas) -> None:
        self.context = context
        self.inputs = inputs
        self.plans = plans
        self.cas = cas

    def move(self, key: object, to: str, froms: tuple[str, ...], owner: object,
             payload: Mapping[str, Any] | None, guards: GuardSpec | None, data: Any,
             edge: Edge | None, fence: Any,
             due: str | None = None, due_at: Any = None, *,
             returning: tuple[str, ...] | None = None, by: str | None = None,
             note: str | None = None) -> Op[TransitionResult]:
        """Any move, its input checked first (before the generator's first yield); ``by``
        and ``note`` were checked by the caller (:meth:`Inputs.by`, :meth:`Inputs.note`)."""
        kv, values = self.inputs.values(key)
        if due_at is not None:  # a timer judged by business time (see Rules.due)
            values["due_at"] = due_at
        owner = self.inputs.owner(owner) if owner is not None else None
        checked = (self.context.binding.check_payload(payload) if payload is not None
                   else NO_PAYLOAD)
        data_text = self.inputs.data(data) if data is not None else None
        plan = self.plans.transition(to, froms, owner, checked, guards, values, edge, due,
                                     returning)
        if self.context.event_table:  # the event row's columns the shared write does not fill
            values.update(to=to, ev_owner=None, ev_data=data_text, ev_by=by, ev_note=note)
        elif by is not None or note is not None:  # no events table: the published event's
            values.update(ev_by=by, ev_note=note)
        plan_from = self.plans.one_state(plan, to, froms, owner, checked, guards, values,
                                         edge, due, returning)
        return (yield from self.write(kv, values, plan, plan_from, froms, to, edge,
                                      fence, owner, data))

    def write(self, kv: tuple[Any, ...], values: dict[str, Any], plan: CasPlan,
              plan_from: Callable[[str], CasPlan] | None, froms: tuple[str, ...],
              to: str, edge: Edge | None, fence: Any, owner: Any,
              data: Any, missed: tuple[str, Outcome] | None = None,
              ) -> Op[TransitionResult]:
        """A move's write and its verdict, shared by plain moves and the general path:
        ``values`` hold all but the fence and the event row's key and owner."""
        leased = edge is not None and edge.lease
        if leased:
            values["fence"] = fence
        if self.context.event_table:
            values["row_key"] = row_key(kv)
            if owner is not None:
                values["ev_owner"] = str(owner)
        if plan_from is None:
            out = yield from self.cas.run(plan, values)
            previous = froms[0] if out.cur is None else self.cas.state_left(out, froms[0])
        else:
            out, previous = yield from self.cas.guessing(plan, plan_from, froms, values,
                                                         missed)
        if out.new is None:
            return self.refused(plan, out, values, edge)
        name = edge.name if edge is not None else self.context.edge_name(previous, to)
        return self.applied(kv, name, previous, to, owner, data, out, values.get("ev_by"),
                            values.get("ev_note"))

    def refused(self, plan: CasPlan, out: Outcome, values: dict[str, Any],
                edge: Edge | None) -> TransitionResult:
        reason, reasons, state = self.cas.explain(plan.checks, out, values)
        if edge is not None and edge.lease and reason == Reason.STATE_MISMATCH:
            reason = Reason.LEASE_LOST  # the row left the edge's source: the lease is gone
        cur = None if out.cur is None else self.context.public(out.cur)
        return TransitionResult(False, reason, reasons, state, state, cur)

    def applied(self, kv: tuple[Any, ...], edge_name: str, previous: str, to: str,
                owner: Any, data: Any, out: Outcome, by: str | None = None,
                note: str | None = None) -> TransitionResult:
        assert out.new is not None
        version_column = self.context.binding.version
        version = out.new.get(version_column) if version_column else None
        event = Event(self.context.machine.name, kv, edge_name, previous, to,
                      None if owner is None else str(owner), data, version,
                      self.context.now(out.now), out.event_id, None, by, note)
        return TransitionResult(True, None, (), previous, to, self.context.public(out.new),
                                event)
