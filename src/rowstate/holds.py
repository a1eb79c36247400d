"""The ask side of the door: holds and fences inside a unit of work, and enabled edges.

Both read the row once and judge it with the Python reader of the very checks the writes
are rendered from (:mod:`rowstate.conditions`), so "may I?" and "do it" cannot diverge:

* a **hold** locks the row (``FOR SHARE`` on PostgreSQL: several holders at once, but the
  UPDATE of a transition out waits until they commit; SQLite's ``BEGIN IMMEDIATE`` already
  holds the writer lock) and checks the row is in one of the given states with no live
  lease: the same checks a transition out of those states would be conditioned on;
* a **fence** locks the row and checks that a lease's token (and kind) is still the row's:
  the finalize's own condition. A zombie whose lease was taken over sees ``LEASE_LOST``;
* **enabled edges** are every edge of the machine, each with the checks its write (a plain
  move's compare-and-set, or a leased edge's claim) would be conditioned on, evaluated
  against one read of the row, with the invariants of each target read in the same
  statement.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .base import ActiveLease, CoreBase, Op
from .binding import GuardSpec
from .compiler import Batch, CasPlan, Statement
from .conditions import And, Check, Ref, RowView, Same, Slot, SqlOut, failing
from .errors import InvalidTransitionError, ValidationError
from .machine import Edge
from .results import CheckResult, EdgeCheck, HoldResult, LeaseClaim, Reason

if TYPE_CHECKING:
    from .core import Core


# hold, fence, enabled_edges, and the dry run of leased edges.
# Functions of a Core, bound as its methods in rowstate.core (no mixins).


def _locked_read(self: Core) -> Statement:
    stmt = self._plans.get(("locked-read",))
    if stmt is None:
        read = self.c.read()
        stmt = Statement(read.sql + self.d.for_share, read.params)
        self._plans[("locked-read",)] = stmt
    assert isinstance(stmt, Statement)
    return stmt


def _read_locked(self: Core, values: dict[str, Any]) -> Op[tuple[dict[str, Any], Any] | None]:
    rows = yield Batch((self._locked_read().bind(self.d, values),))
    if not rows[0]:
        return None
    n = len(self.columns)
    return dict(zip(self.columns, rows[0][0][:n], strict=True)), rows[0][0][n]


def _judged(self: Core, checks: Sequence[Check], values: dict[str, Any],
            got: tuple[dict[str, Any], Any] | None) -> HoldResult:
    if got is None:
        return HoldResult(False, Reason.RECORD_NOT_FOUND, (Reason.RECORD_NOT_FOUND,))
    row, now = got
    bad = failing(checks, RowView(row, values, self._now(now), self.d.parse_time,
                                  self.d.load_json))
    state = self.state_of(row)
    if not bad:
        return HoldResult(True, None, (), state, row)
    reasons = tuple(dict.fromkeys(str(c.reason) for c in bad))
    return HoldResult(False, str(bad[0].category), reasons, state, row)


def hold(self: Core, key: object, states: str | Iterable[str]) -> Op[HoldResult]:
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
    for s in held:
        self.m.check_state(s)
    _, values = self.values(key)
    checks = [self._state_check(held), *self._lease_free(values)]
    got = yield from self._read_locked(values)
    return self._judged(checks, values, got)


def fence(self: Core, lease: object) -> Op[HoldResult]:
    b = self.b
    if b.lease is None:
        raise ValidationError(f"{b.table}: the binding has no lease to fence with")
    key: tuple[Any, ...] | None
    if isinstance(lease, ActiveLease):
        edge, key = lease.edge, lease.key
        fence = lease.token if b.lease.token else lease.row.get(b.lease.at)
    elif isinstance(lease, LeaseClaim) and lease.claimed and lease.edge is not None:
        edge, key, fence = self.m.edge(lease.edge), lease.key, lease.fence
    else:
        raise ValidationError(f"fence needs a claimed lease or the lease run() hands "
                              f"its act, got {lease!r}")
    if not edge.lease or key is None:
        raise ValidationError(f"fence: {edge.name!r} is not a leased edge")
    _, values = self.values(key)
    values.update(lease_kind=edge.lease, fence=fence)
    node = And((Same(Ref(b.lease.kind), Slot("lease_kind")),
                Same(Ref(b.lease.token or b.lease.at), Slot("fence"))))
    checks = [Check(node, Reason.LEASE_LOST, Reason.LEASE_LOST)]
    got = yield from self._read_locked(values)
    return self._judged(checks, values, got)


# -- enabled edges -------------------------------------------------------------------


def _claim_plan(self: Core, edge: Edge, has_owner: bool, guards: GuardSpec | None,
                values: dict[str, Any]) -> CasPlan:
    """A claim's cached plan (as :meth:`claim` builds it), ``values`` filled for it."""
    gshape, gchecks = self._guard_checks(guards, "g", values) if guards else ((), [])
    plan, static = self._lease_claim_plan(edge, has_owner, gshape, gchecks, None, None)
    values.update(static)
    return plan


def _edge_checks(self: Core, edge: Edge, owner: Any, guards: GuardSpec | None,
                 values: dict[str, Any]) -> tuple[Check, ...]:
    if edge.lease:
        values["holder"] = ""
        if owner is not None:
            values["owner"] = owner
        return self._claim_plan(edge, owner is not None, guards, values).checks
    plan = self._transition_plan(edge.dst, (edge.src,), owner, {}, guards, values, None)
    return plan.checks


def _read_with_invariants(self: Core, values: dict[str, Any],
                          ) -> Op[tuple[dict[str, Any], Any, set[str]] | None]:
    """The row, the clock, and the states whose invariant another row occupies: one
    statement."""
    invariants = [inv for inv in self.b.invariants]
    shape = ("read-invariants",)
    stmt = self._plans.get(shape)
    if stmt is None:
        out = SqlOut()
        now = self.d.now(out)
        taken = []
        for inv in invariants:
            other = self.c.other_in_state(inv.state, inv.per)
            taken.append(f"EXISTS ({other.sql})")
            out.params.extend(other.params)
        where = self.c.key_where(None, out)
        extra = "".join(f", {t}" for t in taken)
        stmt = Statement(f"SELECT {self.c.cols(None)}, {now}{extra} FROM {self.c.table} "
                         f"WHERE {where}", tuple(out.params))
        self._plans[shape] = stmt
    assert isinstance(stmt, Statement)
    rows = yield Batch((stmt.bind(self.d, values),))
    if not rows[0]:
        return None
    n = len(self.columns)
    raw = rows[0][0]
    row = dict(zip(self.columns, raw[:n], strict=True))
    occupied = {inv.state for inv, flag in zip(invariants, raw[n + 1:], strict=True)
                if flag}
    return row, raw[n], occupied


def _verdict(self: Core, edge: Edge, owner: Any, guards: GuardSpec | None,
             base: dict[str, Any], row: dict[str, Any], now: Any,
             occupied: set[str]) -> EdgeCheck:
    values = dict(base)
    checks = self._edge_checks(edge, owner, guards, values)
    view = RowView(row, values, self._now(now), self.d.parse_time, self.d.load_json)
    reasons = [str(c.reason) for c in failing(checks, view)]
    if edge.dst in occupied and edge.src != edge.dst:
        reasons.append(Reason.INVARIANT)
    unique = tuple(dict.fromkeys(reasons))
    return EdgeCheck(edge.name, edge.src, edge.dst, edge.lease, not unique, unique)


def enabled_edges(self: Core, key: object, *, owner: object = None,
                  ) -> Op[tuple[EdgeCheck, ...]]:
    """Every edge of the machine, with ``allowed`` and every reason it is blocked now,
    from one read of the row (what an admin page asks to draw only legal buttons)."""
    owner = self._owner(owner)
    _, values = self.values(key)
    got = yield from self._read_with_invariants(values)
    if got is None:
        return tuple(EdgeCheck(e.name, e.src, e.dst, e.lease, False,
                               (Reason.RECORD_NOT_FOUND,)) for e in self.m.edges)
    row, now, occupied = got
    return tuple(self._verdict(e, owner, None, values, row, now, occupied)
                 for e in self.m.edges)


def can_transition(self: Core, key: object, to: str, *,
                   from_: Iterable[str] | str | None = None, owner: object = None,
                   guards: GuardSpec | None = None) -> Op[CheckResult]:
    """The dry run of a move: of its compare-and-set for a plain edge, of its claim for
    a leased one (whose act would then run and finalize)."""
    try:
        self._froms(to, from_)
    except InvalidTransitionError:
        froms = self.m.resolve(to, from_)  # raises for an edge the machine lacks
    else:
        plain: CheckResult = yield from CoreBase.can_transition(
            self, key, to, from_=from_, owner=owner, guards=guards)
        return plain
    owner = self._owner(owner)
    _, values = self.values(key)
    got = yield from self._read_with_invariants(values)
    if got is None:
        return CheckResult(False, (Reason.RECORD_NOT_FOUND,), None)
    row, now, occupied = got
    state = self.state_of(row)
    edges = [e for s in froms for e in self.m.edges_between(s, to)]
    verdicts = [self._verdict(e, owner, guards, values, row, now, occupied)
                for e in edges]
    if any(v.allowed for v in verdicts):
        return CheckResult(True, (), state)
    here = [v for v in verdicts if v.src == state] or verdicts
    return CheckResult(False, here[0].reasons, state)

