"""Holds and fences inside a unit of work.

Both read the row once, locked, and judge it with the Python reader of the very checks the
writes are rendered from (:mod:`rowstate.core.rules`), so "may I?" and "do it" cannot
diverge:

* a **hold** locks the row (``FOR SHARE`` on PostgreSQL: several holders at once, but the
  UPDATE of a transition out waits until they commit; an exclusive hold, ``FOR UPDATE``,
  also keeps every other holder out until it ends; SQLite's ``BEGIN IMMEDIATE`` already
  holds the writer lock) and checks the row is in one of the given states with no live
  lease: the same checks a transition out of those states would be conditioned on;
* a **fence** locks the row and checks that a lease's token (and kind) is still the row's:
  the finalize's own condition. A zombie whose lease was taken over sees ``LEASE_LOST``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from ..compiler import Statement
from ..conditions import Check, failing
from ..errors import ValidationError
from ..protocol import ActiveLease, Batch, Op
from ..results import HoldResult, LeaseClaim, Reason
from .context import Context
from .inputs import Inputs
from .rules import Ask, Rules


class Holds:
    """``hold`` and ``fence``: the row checks a unit of work runs (see
    :class:`rowstate.protocol.RowChecks`)."""

    def __init__(self, context: Context, inputs: Inputs, rules: Rules) -> None:
        self.context = context
        self.inputs = inputs
        self.rules = rules

    def hold(self, key: object, states: str | Iterable[str], *,
             exclusive: bool = False) -> Op[HoldResult]:
        if isinstance(states, str):
            held: tuple[str, ...] = (states,)
        else:
            try:
                held = tuple(states)
            except TypeError:
                raise ValidationError(f"hold: states is a state or states, got {states!r}"
                                      ) from None
        if not held:
            raise ValidationError("hold: no state given")
        if not isinstance(exclusive, bool):
            raise ValidationError(f"hold: exclusive is True or False, got {exclusive!r}")
        held = tuple(self.context.machine.check_state(s) for s in held)  # aliases read
        _, values = self.inputs.values(key)
        plans = self.context.plans
        cached = plans.get(("hold", held))
        if cached is None:  # the checks and the constants they name: once per held states
            static: dict[str, Any] = {}
            cached = plans[("hold", held)] = (self.rules.checks("hold", Ask(froms=held), static),
                                              static)
        checks, static = cached
        values.update(static)
        got = yield from self._read_locked(values, exclusive=exclusive)
        return self._judged(checks, values, got)

    def fence(self, lease: object) -> Op[HoldResult]:
        binding = self.context.binding
        if binding.lease is None:
            raise ValidationError(f"{binding.table}: the binding has no lease to fence with")
        key: tuple[Any, ...] | None
        if isinstance(lease, ActiveLease):
            edge, key = lease.edge, lease.key
            fence = lease.token if binding.lease.token else self._stored(
                lease.row.get(binding.lease.at))
        elif isinstance(lease, LeaseClaim) and lease.claimed and lease.edge is not None:
            edge, key, fence = self.context.machine.edge(lease.edge), lease.key, lease.fence
        else:
            raise ValidationError(f"fence needs a claimed lease or the lease run() hands "
                                  f"its act, got {lease!r}")
        if not edge.lease or key is None:
            raise ValidationError(f"fence: {edge.name!r} is not a leased edge")
        _, values = self.inputs.values(key)
        values["fence"] = fence
        checks = self.rules.checks("fence", Ask(kind=edge.lease), values)
        got = yield from self._read_locked(values)
        return self._judged(checks, values, got)

    def _locked_read(self, exclusive: bool) -> Statement:
        plans = self.context.plans
        stmt = plans.get(("locked-read", exclusive))
        if stmt is None:
            read = self.context.compiler.read()
            dialect = self.context.dialect
            lock = dialect.for_update if exclusive else dialect.for_share
            stmt = Statement(read.sql + lock, read.params)
            plans[("locked-read", exclusive)] = stmt
        assert isinstance(stmt, Statement)
        return stmt

    def _stored(self, at: Any) -> Any:
        """A claim time handed to a caller (an aware datetime) as the row stores it: the
        fence a lease without a token column is compared by."""
        return self.context.dialect.db_time(at) if isinstance(at, datetime) else at

    def _read_locked(self, values: dict[str, Any], *, exclusive: bool = False
                     ) -> Op[tuple[dict[str, Any], Any] | None]:
        rows = yield Batch((self._locked_read(exclusive).bind(self.context.dialect, values),))
        if not rows[0]:
            return None
        raw = rows[0][0]
        return self.context.row(raw), raw[len(self.context.columns)]

    def _judged(self, checks: Sequence[Check], values: dict[str, Any],
                got: tuple[dict[str, Any], Any] | None) -> HoldResult:
        if got is None:
            return HoldResult(False, Reason.RECORD_NOT_FOUND, (Reason.RECORD_NOT_FOUND,))
        row, now = got
        bad = failing(checks, self.context.view(row, values, now))
        state = self.context.state_of(row)
        if not bad:
            return HoldResult(True, None, (), state, self.context.public(row))
        reasons = tuple(dict.fromkeys(str(c.reason) for c in bad))
        return HoldResult(False, str(bad[0].category), reasons, state,
                          self.context.public(row))
