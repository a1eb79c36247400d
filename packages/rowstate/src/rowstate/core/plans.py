"""The compiled plans of moves and claims, once per shape.

A *shape* is everything that changes the SQL text of a call (target, from-states, which
guards and payload columns, whether an owner is checked, the edge, a timer's deadline, the
columns returned) and nothing that only changes its values. The checks come from
:mod:`rowstate.core.rules`; the constants they name are kept with the plan (``static``) and
copied into each call's values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..compiler import CasPlan, EventSpec
from ..conditions import Check
from ..machine import Edge
from ..specs import GuardSpec
from .context import Context
from .rules import Ask, Rules


class Plans:
    """The plan cache's builders for the compare-and-set of a move and of a claim."""

    def __init__(self, context: Context, rules: Rules) -> None:
        self.context = context
        self.rules = rules
        self.plans = context.plans
        self.payload_value = context.dialect.payload_value

    def transition(self, to: str, froms: tuple[str, ...], owner: Any,
                   payload: dict[str, Any], guards: GuardSpec | None,
                   values: dict[str, Any], edge: Edge | None,
                   due: str | None = None, returning: tuple[str, ...] | None = None,
                   ) -> CasPlan:
        """The cached plan of a move, with ``values`` filled for it.

        Everything but the caller's guards, owner and payload follows from the shape, so
        the checks are built (and the constant values they name collected) once per shape.
        """
        gshape, gchecks = self.rules.guards(guards, "g", values) if guards else ((), [])
        if owner is not None:
            values["owner"] = owner
        shape = ("t", to, froms, owner is not None, gshape, tuple(payload) if payload else (),
                 edge.name if edge else None, due, returning)
        cached = self.plans.get(shape)
        if cached is None:
            cached = self._compile_transition(to, froms, owner is not None, gchecks,
                                              tuple(payload), edge, due, returning)
            self.plans[shape] = cached
        plan, static = cached
        values.update(static)
        if payload:
            for name, value in payload.items():
                values[f"p:{name}"] = self.payload_value(value)
        return plan

    def _compile_transition(self, to: str, froms: tuple[str, ...], has_owner: bool,
                            gchecks: list[Check], payload: tuple[str, ...], edge: Edge | None,
                            due: str | None, returning: tuple[str, ...] | None = None,
                            ) -> tuple[CasPlan, dict[str, Any]]:
        static: dict[str, Any] = {}
        finalize = edge is not None and edge.lease is not None
        ask = Ask(froms=froms, to=to, kind=edge.lease if edge is not None else None,
                  has_owner=has_owner, guards=tuple(gchecks), due=due)
        checks = self.rules.checks("finalize" if finalize else "transition", ask, static)
        sets = self.rules.entry_sets(to, dict.fromkeys(payload), {}, finalize)
        event = None
        event_table = self.context.event_table
        if event_table:
            names = tuple((s, edge.name if edge else self.context.edge_name(s, to))
                          for s in froms)
            event = EventSpec(event_table, names)
        plan = self.context.compiler.cas(checks, sets, event, known_from=len(froms) == 1,
                                         returning=returning)
        return plan, static

    def one_state(self, plan: CasPlan, to: str, froms: tuple[str, ...], owner: Any,
                  payload: dict[str, Any], guards: GuardSpec | None,
                  values: dict[str, Any], edge: Edge | None,
                  due: str | None, returning: tuple[str, ...] | None = None,
                  ) -> Callable[[str], CasPlan] | None:
        """For a move from several states that is guessed (see Cas.guessing): the
        one-state plan of each, compiled once per several-state plan. Their values are a
        subset of ``plan``'s (only the state check differs, and it is constant). None when
        the move is not guessed."""
        if len(froms) == 1 or not self.context.fast_from_each:
            return None
        singles = self.context.single_plans.get(id(plan))
        if singles is None:
            singles = {s: self.transition(to, (s,), owner, payload, guards, values,
                                          edge, due, returning) for s in froms}
            self.context.single_plans[id(plan)] = singles
        return singles.__getitem__

    def claim(self, edge: Edge, has_owner: bool, gshape: tuple[Any, ...],
              gchecks: list[Check], due: str | None, cols: tuple[str, ...] | None,
              ) -> tuple[CasPlan, dict[str, Any]]:
        """A claim's plan and its constant values: everything but the call's own values
        follows from its shape (``gshape``: its guards'), so it is built once."""
        shape = ("claim", edge.name, has_owner, gshape, due, cols)
        cached = self.plans.get(shape)
        if cached is None:
            cached = self.plans[shape] = self._compile_claim(edge, has_owner, gchecks, due,
                                                             cols)
        return cached

    def claim_with(self, edge: Edge, has_owner: bool, guards: GuardSpec | None,
                   values: dict[str, Any]) -> CasPlan:
        """A claim's cached plan (as ``claim`` builds it), ``values`` filled for it."""
        gshape, gchecks = self.rules.guards(guards, "g", values) if guards else ((), [])
        plan, static = self.claim(edge, has_owner, gshape, gchecks, None, None)
        values.update(static)
        return plan

    def _compile_claim(self, edge: Edge, has_owner: bool, gchecks: list[Check],
                       due: str | None, returning: tuple[str, ...] | None = None,
                       ) -> tuple[CasPlan, dict[str, Any]]:
        assert self.context.binding.lease is not None and edge.lease is not None
        static: dict[str, Any] = {}
        ask = Ask(froms=(edge.src,), to=edge.dst, kind=edge.lease, has_owner=has_owner,
                  guards=tuple(gchecks), due=due)
        checks = self.rules.checks("claim", ask, static)
        plan = self.context.compiler.cas(checks, self.rules.claim_sets(), None,
                                         known_from=True, returning=returning)
        return plan, static
