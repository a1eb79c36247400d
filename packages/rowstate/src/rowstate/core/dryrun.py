"""The dry run: "may I?" answered by the very checks "do it" is conditioned on.

* ``can_transition``: a plain move's checks (its compare-and-set's), or for a leased edge
  its claim's (whose act would then run and finalize), evaluated against one read of the
  row, and the target's invariants;
* ``enabled_edges``: every edge of the machine, each with the checks its write would be
  conditioned on, against one read of the row with the invariants of each target read in
  the same statement (what an admin page asks to draw only legal buttons);
* ``transition_checks``: the rules as data, for a caller that runs them on another executor
  (a key/value persistence adapter that can only do a conditional write of plain values):
  the checks and the values their slots name, evaluated with
  :func:`rowstate.conditions.evaluate` instead of a copy of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..compiler import Statement
from ..conditions import Check, SqlOut, failing
from ..errors import InvalidTransitionError
from ..machine import Edge
from ..protocol import Batch, Op
from ..results import CheckResult, EdgeCheck, Reason
from ..specs import GuardSpec
from .context import Context
from .inputs import Inputs
from .plans import Plans


class DryRun:
    """The dry run of moves and claims, and the rules as data."""

    def __init__(self, context: Context, inputs: Inputs, plans: Plans) -> None:
        self.context = context
        self.inputs = inputs
        self.plans = plans
        self.dialect = context.dialect
        self.machine = context.machine

    def can_transition(self, key: object, to: str, *,
                       from_: Iterable[str] | str | None = None, owner: object = None,
                       guards: GuardSpec | None = None) -> Op[CheckResult]:
        """The dry run of a move: of its compare-and-set for a plain edge, of its claim for
        a leased one."""
        to = self.inputs.target(to)
        try:
            froms = self.inputs.froms(to, from_)
        except InvalidTransitionError:
            froms = self.machine.resolve(to, from_)  # raises for an edge the machine lacks
        else:
            return (yield from self._plain(key, to, froms, owner, guards))
        owner = self.inputs.owner(owner)
        _, values = self.inputs.values(key)
        got = yield from self._read_with_invariants(values)
        if got is None:
            return CheckResult(False, (Reason.RECORD_NOT_FOUND,), None)
        row, now, occupied = got
        state = self.context.state_of(row)
        edges = [e for s in froms for e in self.machine.edges_between(s, to)]
        verdicts = [self._verdict(e, owner, guards, values, row, now, occupied)
                    for e in edges]
        if any(v.allowed for v in verdicts):
            return CheckResult(True, (), state)
        here = [v for v in verdicts if v.src == state] or verdicts
        return CheckResult(False, here[0].reasons, state)

    def _plain(self, key: object, to: str, froms: tuple[str, ...], owner: object,
               guards: GuardSpec | None) -> Op[CheckResult]:
        """A plain move's dry run: its checks read and evaluated here."""
        _, values = self.inputs.values(key)
        owner = self.inputs.owner(owner)
        plan = self.plans.transition(to, froms, owner, {}, guards, values, None)
        rows = yield Batch((self.context.read.bind(self.dialect, values),))
        if not rows[0]:
            return CheckResult(False, (Reason.RECORD_NOT_FOUND,), None)
        raw = rows[0][0]
        row = self.context.row(raw)
        view = self.context.view(row, values, raw[len(self.context.columns)])
        reasons = [c.reason for c in failing(plan.checks, view)]
        for inv in self.context.binding.invariants:
            if inv.state == to:
                stmt = self.context.compiler.other_in_state(inv.state, inv.per)
                taken = yield Batch((stmt.bind(self.dialect, values),))
                if taken[0]:
                    reasons.append(Reason.INVARIANT)
        return CheckResult(not reasons, tuple(dict.fromkeys(reasons)),
                           self.context.state_of(row))

    def enabled_edges(self, key: object, *, owner: object = None,
                      ) -> Op[tuple[EdgeCheck, ...]]:
        """Every edge of the machine, with ``allowed`` and every reason it is blocked now,
        from one read of the row."""
        owner = self.inputs.owner(owner)
        _, values = self.inputs.values(key)
        got = yield from self._read_with_invariants(values)
        if got is None:
            return tuple(EdgeCheck(e.name, e.src, e.dst, e.lease, False,
                                   (Reason.RECORD_NOT_FOUND,)) for e in self.machine.edges)
        row, now, occupied = got
        return tuple(self._verdict(e, owner, None, values, row, now, occupied)
                     for e in self.machine.edges)

    def transition_checks(self, key: object, to: str, *,
                          from_: Iterable[str] | str | None = None, owner: object = None,
                          guards: GuardSpec | None = None,
                          ) -> tuple[tuple[Check, ...], dict[str, Any]]:
        """The checks a move's write is conditioned on (its WHERE, key excepted)."""
        to = self.inputs.target(to)
        froms = self.inputs.froms(to, from_)
        _, values = self.inputs.values(key)
        plan = self.plans.transition(to, froms, self.inputs.owner(owner), {}, guards, values,
                                     None)
        return plan.checks, values

    def _edge_checks(self, edge: Edge, owner: Any, guards: GuardSpec | None,
                     values: dict[str, Any]) -> tuple[Check, ...]:
        if edge.lease:
            values["holder"] = ""
            if owner is not None:
                values["owner"] = owner
            return self.plans.claim_with(edge, owner is not None, guards, values).checks
        plan = self.plans.transition(edge.dst, (edge.src,), owner, {}, guards, values, None)
        return plan.checks

    def _read_with_invariants(self, values: dict[str, Any],
                              ) -> Op[tuple[dict[str, Any], Any, set[str]] | None]:
        """The row, the clock, and the states whose invariant another row occupies: one
        statement."""
        invariants = list(self.context.binding.invariants)
        shape = ("read-invariants",)
        stmt = self.context.plans.get(shape)
        if stmt is None:
            compiler = self.context.compiler
            out = SqlOut()
            now = self.dialect.now(out)
            taken = []
            for inv in invariants:
                other = compiler.other_in_state(inv.state, inv.per)
                taken.append(f"EXISTS ({other.sql})")
                out.params.extend(other.params)
            where = compiler.key_where(None, out)
            extra = "".join(f", {t}" for t in taken)
            stmt = Statement(f"SELECT {compiler.cols(None)}, {now}{extra} FROM "
                             f"{compiler.table} WHERE {where}", tuple(out.params))
            self.context.plans[shape] = stmt
        assert isinstance(stmt, Statement)
        rows = yield Batch((stmt.bind(self.dialect, values),))
        if not rows[0]:
            return None
        n = len(self.context.columns)
        raw = rows[0][0]
        row = self.context.row(raw)
        occupied = {inv.state for inv, flag in zip(invariants, raw[n + 1:], strict=True)
                    if flag}
        return row, raw[n], occupied

    def _verdict(self, edge: Edge, owner: Any, guards: GuardSpec | None,
                 base: dict[str, Any], row: dict[str, Any], now: Any,
                 occupied: set[str]) -> EdgeCheck:
        values = dict(base)
        checks = self._edge_checks(edge, owner, guards, values)
        reasons = [str(c.reason) for c in failing(checks, self.context.view(row, values, now))]
        if edge.dst in occupied and edge.src != edge.dst:
            reasons.append(Reason.INVARIANT)
        unique = tuple(dict.fromkeys(reasons))
        return EdgeCheck(edge.name, edge.src, edge.dst, edge.lease, not unique, unique)
