"""The decisions, without I/O.

Every operation is a generator: it yields a :class:`Batch` of statements (or a
:class:`Call` to run the caller's side effect) and receives the rows back. The sync and the
async front ends only drive these generators (:mod:`rowstate.drive`), so the rules live
here once and the twins cannot disagree.

Input is checked before the first yield: a bad key, an unknown field or an edge the machine
lacks raises before anything reaches the database.
"""

from __future__ import annotations

import functools
import json
import os
import socket
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

from .binding import Binding, FinalizationClaim, GuardSpec, TimedEdge, check_scalar
from .compiler import Batch, CasPlan, Compiler, EventSpec, Set
from .conditions import (
    And,
    Check,
    Const,
    In,
    IsNull,
    Older,
    Or,
    Ref,
    RowView,
    Same,
    Slot,
    failing,
    lookup,
)
from .dialects import STORE_NOW, Dialect
from .errors import (
    ConnectionLostError,
    InvalidTransitionError,
    InvariantViolation,
    RowstateError,
    ValidationError,
)
from .machine import Edge
from .results import (
    CheckResult,
    Event,
    FinalizationClaimResult,
    Fired,
    FireReport,
    LeaseClaim,
    Reason,
    ReleaseResult,
    RunResult,
    TransitionResult,
)

R = TypeVar("R")
MAX_DATA_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class Call:
    """Ask the driver to run a caller's function (an act, a notice) and send back its
    result; an exception it raises is thrown back into the operation."""

    fn: Callable[[Any], Any]
    arg: Any


Op = Generator[Batch | Call, Any, R]


class Outcome(NamedTuple):
    """What a compare-and-set saw: the row before, the row after (None if refused)."""

    cur: dict[str, Any] | None
    new: dict[str, Any] | None
    event_id: int | None
    now: Any
    invariant: bool = False


@dataclass(frozen=True, slots=True)
class ActiveLease:
    """What an act receives: which row, which edge, and the fencing token it holds."""

    key: tuple[Any, ...]
    edge: Edge
    token: int | None
    row: Mapping[str, Any]


@functools.cache
def _hostname() -> str:
    return socket.gethostname()  # a system call: once per process, not once per claim


def default_holder() -> str:
    return f"{_hostname()}:{os.getpid()}"  # the pid is read each time (a fork changes it)


class Core:
    def __init__(self, binding: Binding, dialect: Dialect,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.b = binding
        self.m = binding.machine
        self.d = dialect
        self.clock = clock
        self.c = Compiler(binding, dialect)
        self.columns = self.c.columns
        self._plans: dict[tuple[Any, ...], Any] = {}
        self._key_index = self.columns.index(binding.key[0])
        self._read = self.c.read()
        self._event_table = tuple(binding.events.split(".")) if binding.events else None
        # pure functions of the (frozen) machine, memoised: validation still runs on a miss
        self._froms_memo: dict[tuple[str, Any], tuple[str, ...]] = {}
        self._edge_names: dict[tuple[str, str], str] = {}

    # -- inputs --------------------------------------------------------------------------

    def values(self, key: object) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kv = self.b.key_values(key)
        values: dict[str, Any] = {f"k{i}": v for i, v in enumerate(kv)}
        values.update(self._clock_values())
        return kv, values

    def _owner(self, owner: object) -> Any:
        if owner is None:
            return None
        if self.b.owner is None:
            raise ValidationError(f"{self.b.table}: the binding has no owner column")
        if isinstance(owner, bool) or not isinstance(owner, str | int):
            raise ValidationError(f"owner must be a str or int, got {owner!r}")
        check_scalar(owner, "owner", ValidationError)
        return owner

    def _data(self, data: Any) -> str | None:
        if data is None:
            return None
        try:
            text = json.dumps(data, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"event data must be JSON-serialisable: {exc}") from None
        if len(text) > MAX_DATA_BYTES:
            raise ValidationError(f"event data is {len(text)} bytes; the limit is 1 MB")
        return text

    def _froms(self, to: str, from_: Iterable[str] | str | None) -> tuple[str, ...]:
        """From-states of a *pure* move to ``to``: side-effecting edges go through run().

        Memoised per (to, from_) when both are hashable: the answer (or the error) depends
        only on the machine, and only an answer that passed every check is remembered."""
        memo_key: tuple[str, Any] | None = None
        if from_ is None or isinstance(from_, str | tuple):
            memo_key = (to, from_)
            try:
                hit = self._froms_memo.get(memo_key)
            except TypeError:  # an unhashable state inside a tuple: checked below
                memo_key, hit = None, None
            if hit is not None:
                return hit
        froms = self._froms_checked(to, from_)
        if memo_key is not None:
            self._froms_memo[memo_key] = froms
        return froms

    def _froms_checked(self, to: str, from_: Iterable[str] | str | None) -> tuple[str, ...]:
        froms = self.m.resolve(to, from_)
        pure = tuple(s for s in froms if any(not e.lease for e in self.m.edges_between(s, to)))
        if from_ is None:
            if not pure:
                raise InvalidTransitionError(
                    f"{self.m.name}: every edge into {to!r} is side-effecting; use run()",
                    to_state=to,
                )
            return pure
        if len(pure) != len(froms):
            bad = [s for s in froms if s not in pure]
            raise InvalidTransitionError(
                f"{self.m.name}: {bad[0]} -> {to} is side-effecting; use run()",
                from_state=bad[0], to_state=to,
            )
        return froms

    # -- checks --------------------------------------------------------------------------

    def _state_check(self, froms: tuple[str, ...]) -> Check:
        node = In(self.b.state_ref, tuple(Const(s) for s in froms))
        return Check(node, Reason.STATE_MISMATCH, Reason.STATE_MISMATCH)

    def _guard_checks(self, guards: GuardSpec | None, prefix: str,
                      values: dict[str, Any]) -> tuple[tuple[Any, ...], list[Check]]:
        """Checks for guards; their values go into ``values``, their shape is returned."""
        if not guards:
            return (), []
        checks = []
        shape = []
        for i, (ref, guard) in enumerate(self.b.guard_items(guards)):
            given = [v for v in guard.values if v is not None]
            nullable = len(given) < len(guard.values)
            slots = []
            for j, v in enumerate(given):
                name = f"{prefix}{i}_{j}"
                values[name] = v
                slots.append(Slot(name, json=bool(ref.path)))
            checks.append(Check(In(ref, tuple(slots), nullable), guard.reason,
                                Reason.GUARD_FAILED))
            shape.append((ref, len(given), nullable, guard.reason))
        return tuple(shape), checks

    def _lease_free(self, values: dict[str, Any]) -> list[Check]:
        lease = self.b.lease
        if lease is None:
            return []
        values["lease_ttl"] = float(lease.ttl)
        at = Ref(lease.at)
        node = Or((IsNull(at), Older(at, Slot("lease_ttl"))))
        return [Check(node, Reason.LEASE_HELD, Reason.LEASE_HELD)]

    def _owner_check(self, owner: Any, values: dict[str, Any]) -> list[Check]:
        if owner is None:
            return []
        values["owner"] = owner
        assert self.b.owner is not None
        node = In(Ref(self.b.owner), (Slot("owner"),))
        return [Check(node, Reason.NOT_OWNER, Reason.NOT_OWNER)]

    def _held_checks(self, to: str, values: dict[str, Any]) -> list[Check]:
        """A live finalization claim blocks entering the states its binding lists."""
        f = self.b.finalization
        if f is None or to not in f.blocks:
            return []
        values["fttl"] = float(f.ttl)
        node = Or((IsNull(Ref(f.holder)), Older(Ref(f.at), Slot("fttl"))))
        return [Check(node, Reason.FINALIZATION_HELD, Reason.HELD_BY_OTHER)]

    # -- sets ----------------------------------------------------------------------------

    def _entry_sets(self, to: str, payload: dict[str, Any], values: dict[str, Any],
                    finalize: bool) -> list[Set]:
        b, c = self.b, self.c
        sets: list[Set] = [c.set_value(b.state, Const(to))]
        if b.version:
            sets.append(c.incremented(b.version))
        if b.lease:
            sets += [c.set_null(b.lease.at), c.set_null(b.lease.kind)]
            if b.lease.holder:
                sets.append(c.set_null(b.lease.holder))
            if finalize and b.lease.error:
                sets.append(c.set_null(b.lease.error))
        if b.finalization and to not in self.m.active:
            f = b.finalization
            sets += [c.set_null(f.holder), c.set_null(f.scope), c.set_null(f.at)]
        sets += c.entry_sets(dict(b.on_enter.get(to, {})), c.target)
        for name, value in payload.items():
            values[f"p:{name}"] = self.d.payload_value(value)
            sets.append(c.set_value(name, Slot(f"p:{name}")))
        return sets

    # -- running a compare-and-set -------------------------------------------------------

    def _cas(self, plan: CasPlan, values: dict[str, Any]) -> Op[Outcome]:
        n = len(self.columns)
        try:
            rows = yield plan.batch(self.d, values)
        except InvariantViolation:
            return Outcome(None, None, None, None, invariant=True)
        cols = self.columns
        if self.c.pg:
            # one row: the row before (read only when needed), the row after, event, now
            if not rows[0]:
                return Outcome(None, None, None, None)
            row = rows[0][0]
            ki = self._key_index
            before = dict(zip(cols, row[:n], strict=True)) if row[ki] is not None else None
            after = (dict(zip(cols, row[n:2 * n], strict=True))
                     if row[n + ki] is not None else None)
            return Outcome(before, after, row[2 * n], row[2 * n + 1])
        if plan.fast:
            if rows[0]:
                return Outcome(None, dict(zip(cols, rows[0][0], strict=True)), None, None)
            read = yield Batch((self._read.bind(self.d, values),))
            if not read[0]:
                return Outcome(None, None, None, None)
            row = read[0][0]
            return Outcome(dict(zip(cols, row[:n], strict=True)), None, None, row[n])
        if not rows[0]:
            return Outcome(None, None, None, None)
        before = rows[0][0]
        new = rows[-1][0] if rows[-1] else None
        event_id = rows[1][0][0] if plan.event is not None and rows[1] else None
        return Outcome(dict(zip(cols, before[:n], strict=True)),
                       dict(zip(cols, new, strict=True)) if new else None, event_id, before[n])

    def _now(self, raw: Any) -> datetime:
        if self.clock is not None:
            return self.clock()
        parsed = self.d.parse_time(raw)
        return parsed if parsed is not None else datetime.now(UTC)

    def _explain(self, checks: tuple[Check, ...], out: Outcome,
                 values: dict[str, Any]) -> tuple[str, tuple[str, ...], str | None]:
        """The primary reason, every reason, and the row's current state."""
        if out.invariant:
            return Reason.INVARIANT, (Reason.INVARIANT,), None
        if out.cur is None:
            return Reason.RECORD_NOT_FOUND, (Reason.RECORD_NOT_FOUND,), None
        state = self.state_of(out.cur)
        bad = failing(checks, RowView(out.cur, values, self._now(out.now), self.d.parse_time))
        if not bad:
            # SQLite fast path only: the row changed between the refused write and the read
            return Reason.STATE_MISMATCH, (Reason.STATE_MISMATCH,), state
        reasons = tuple(dict.fromkeys(c.reason for c in bad))
        return bad[0].category, reasons, state

    def state_of(self, row: Mapping[str, Any]) -> str | None:
        got = lookup(self.b.state_ref, row)
        return got if isinstance(got, str) else None

    # -- transitions ---------------------------------------------------------------------

    def _transition_plan(self, to: str, froms: tuple[str, ...], owner: Any,
                         payload: dict[str, Any], guards: GuardSpec | None,
                         values: dict[str, Any], edge: Edge | None,
                         due: str | None = None) -> CasPlan:
        """The cached plan of a move, with ``values`` filled for it.

        Everything but the caller's guards, owner and payload follows from the shape, so
        the checks are built (and the constant values they name collected) once per shape.
        """
        gshape, gchecks = self._guard_checks(guards, "g", values)
        if owner is not None:
            values["owner"] = owner
        shape = ("t", to, froms, owner is not None, gshape, tuple(payload),
                 edge.name if edge else None, due)
        cached = self._plans.get(shape)
        if cached is None:
            cached = self._compile_transition(to, froms, owner is not None, gchecks,
                                              tuple(payload), edge, due)
            self._plans[shape] = cached
        plan, static = cached
        values.update(static)
        for name, value in payload.items():
            values[f"p:{name}"] = self.d.payload_value(value)
        return plan

    def _compile_transition(self, to: str, froms: tuple[str, ...], has_owner: bool,
                            gchecks: list[Check], payload: tuple[str, ...], edge: Edge | None,
                            due: str | None) -> tuple[CasPlan, dict[str, Any]]:
        static: dict[str, Any] = {}
        _, echecks = self._guard_checks(self.b.enter_guards.get(to), "e", static)
        finalize = edge is not None and edge.lease is not None
        if finalize:
            assert self.b.lease is not None and edge is not None
            static["lease_kind"] = edge.lease
            lease = self.b.lease
            fence = Ref(lease.token or lease.at)
            node = And((Same(Ref(lease.kind), Slot("lease_kind")), Same(fence, Slot("fence"))))
            lease_checks = [Check(node, Reason.LEASE_LOST, Reason.LEASE_LOST)]
        else:
            lease_checks = self._lease_free(static)
        owner_checks = self._owner_check(True if has_owner else None, {})
        held_checks = self._held_checks(to, static)
        checks = [self._state_check(froms), *lease_checks, *owner_checks,
                  *held_checks, *echecks, *gchecks, *self._due_checks(due)]
        sets = self._entry_sets(to, dict.fromkeys(payload), {}, finalize)
        event = None
        if self._event_table:
            names = tuple((s, edge.name if edge else self._edge_name(s, to)) for s in froms)
            event = EventSpec(self._event_table, names)
        plan = self.c.cas(checks, sets, event, known_from=len(froms) == 1)
        return plan, static

    def _edge_name(self, src: str, to: str) -> str:
        name = self._edge_names.get((src, to))
        if name is None:
            pure = [e for e in self.m.edges_between(src, to) if not e.lease]
            name = (pure or list(self.m.edges_between(src, to)))[0].name
            self._edge_names[(src, to)] = name
        return name

    def transition(self, key: object, to: str, *, from_: Iterable[str] | str | None = None,
                   owner: object = None, payload: Mapping[str, Any] | None = None,
                   guards: GuardSpec | None = None, data: Any = None) -> Op[TransitionResult]:
        froms = self._froms(to, from_)
        return self._transition(key, to, froms, owner, payload, guards, data, None, None)

    def _transition(self, key: object, to: str, froms: tuple[str, ...], owner: object,
                    payload: Mapping[str, Any] | None, guards: GuardSpec | None, data: Any,
                    edge: Edge | None, fence: Any,
                    due: str | None = None) -> Op[TransitionResult]:
        kv, values = self.values(key)
        owner = self._owner(owner)
        checked = self.b.check_payload(payload)
        data_text = self._data(data)
        plan = self._transition_plan(to, froms, owner, checked, guards, values, edge, due)
        if edge is not None and edge.lease:
            values["fence"] = fence
        if self._event_table:  # only the event row reads these
            values["row_key"] = json.dumps(list(kv))
            values["to"] = to
            values["ev_owner"] = None if owner is None else str(owner)
            values["ev_data"] = data_text
        out = yield from self._cas(plan, values)
        if out.new is None:
            reason, reasons, state = self._explain(plan.checks, out, values)
            if edge is not None and edge.lease and reason == Reason.STATE_MISMATCH:
                reason = Reason.LEASE_LOST  # the row left the edge's source: the lease is gone
            return TransitionResult(False, reason, reasons, state, state, out.cur)
        previous = self.state_of(out.cur) if out.cur is not None else froms[0]
        edge_name = edge.name if edge else self._edge_name(previous or froms[0], to)
        version = out.new.get(self.b.version) if self.b.version else None
        event = Event(self.m.name, kv, edge_name, previous, to,
                      None if owner is None else str(owner), data,
                      version, self._now(out.now), out.event_id)
        return TransitionResult(True, None, (), previous, to, out.new, event)

    def can_transition(self, key: object, to: str, *,
                       from_: Iterable[str] | str | None = None, owner: object = None,
                       guards: GuardSpec | None = None) -> Op[CheckResult]:
        """The dry run: the same checks as :meth:`transition`, read and evaluated here."""
        froms = self._froms(to, from_)
        _, values = self.values(key)
        owner = self._owner(owner)
        plan = self._transition_plan(to, froms, owner, {}, guards, values, None)
        rows = yield Batch((self._read.bind(self.d, values),))
        if not rows[0]:
            return CheckResult(False, (Reason.RECORD_NOT_FOUND,), None)
        n = len(self.columns)
        row = dict(zip(self.columns, rows[0][0][:n], strict=True))
        view = RowView(row, values, self._now(rows[0][0][n]), self.d.parse_time)
        reasons = [c.reason for c in failing(plan.checks, view)]
        for inv in self.b.invariants:
            if inv.state == to:
                stmt = self.c.other_in_state(inv.state, inv.per)
                taken = yield Batch((stmt.bind(self.d, values),))
                if taken[0]:
                    reasons.append(Reason.INVARIANT)
        return CheckResult(not reasons, tuple(dict.fromkeys(reasons)), self.state_of(row))

    # -- leases --------------------------------------------------------------------------

    def _leased_edge(self, name: str) -> Edge:
        edge = self.m.edge(name)
        if not edge.lease:
            raise InvalidTransitionError(f"{self.m.name}: edge {name!r} has no side effect; "
                                         "use transition()")
        return edge

    def claim(self, key: object, edge_name: str, *, holder: str | None = None,
              owner: object = None, guards: GuardSpec | None = None,
              due: str | None = None) -> Op[LeaseClaim]:
        """``due`` (a timer's deadline column) makes the claim also require ``now >= due``."""
        edge = self._leased_edge(edge_name)
        lease = self.b.lease
        assert lease is not None and edge.lease is not None
        kv, values = self.values(key)
        owner = self._owner(owner)
        values["lease_kind"] = edge.lease
        values["lease_ttl"] = float(lease.ttl)
        if holder is not None and (not isinstance(holder, str) or not holder):
            raise ValidationError(f"a lease holder is a non-empty string, got {holder!r}")
        if holder is not None:
            check_scalar(holder, "holder", ValidationError)
        values["holder"] = holder or default_holder()
        gshape, gchecks = self._guard_checks(guards, "g", values)
        eshape, echecks = self._guard_checks(self.b.enter_guards.get(edge.dst), "e", values)
        owner_checks = self._owner_check(owner, values)
        # the destination's finalization block, like its entry guards, is checked at the
        # claim: no act runs for a move that its finalize would refuse
        held_checks = self._held_checks(edge.dst, values)
        shape = ("claim", edge.name, owner is not None, gshape, eshape, due)
        plan = self._plans.get(shape)
        if plan is None:
            at, kind = Ref(lease.at), Ref(lease.kind)
            free = Or((IsNull(at), And((Same(kind, Slot("lease_kind")),
                                        Older(at, Slot("lease_ttl"))))))
            checks = [self._state_check((edge.src,)),
                      Check(free, Reason.LEASE_HELD, Reason.LEASE_HELD),
                      *owner_checks, *held_checks, *echecks, *gchecks,
                      *self._due_checks(due)]
            c = self.c
            sets = [c.set_now(lease.at), c.set_value(lease.kind, Slot("lease_kind"))]
            if lease.holder:
                sets.append(c.set_value(lease.holder, Slot("holder")))
            if lease.token:
                sets.append(c.incremented(lease.token))
            plan = c.cas(checks, sets, None, known_from=True)
            self._plans[shape] = plan
        out = yield from self._cas(plan, values)
        if out.new is None:
            reason, reasons, state = self._explain(plan.checks, out, values)
            return LeaseClaim(False, reason, reasons, edge.name, state=state, row=out.cur)
        token = out.new.get(lease.token) if lease.token else None
        fence = token if lease.token else out.new[lease.at]
        return LeaseClaim(True, None, (), edge.name, token, fence, edge.src, out.new, kv)

    def _claimed_edge(self, claim: object, what: str) -> Edge:
        """The edge of a claim a caller presents, checked before any I/O: a LeaseClaim that
        was claimed, of a leased edge, with a fence of the type this lease issues."""
        if not isinstance(claim, LeaseClaim) or not claim.claimed or claim.edge is None:
            raise ValidationError(f"{what} needs a lease that was claimed, got {claim!r}")
        edge = self._leased_edge(claim.edge)
        lease = self.b.lease
        assert lease is not None
        fence = claim.fence
        if lease.token:
            ok = isinstance(fence, int) and not isinstance(fence, bool)
        else:
            ok = isinstance(fence, datetime | str)
        if not ok:
            raise ValidationError(f"{what}: {fence!r} is not a fence this lease issues")
        check_scalar(fence if isinstance(fence, int | str) else 0, "fence", ValidationError)
        return edge

    def _same_row(self, key: object, claim: LeaseClaim, what: str) -> None:
        """Tokens count per row: another row's claim could carry this row's token."""
        if claim.key is not None and self.b.key_values(key) != tuple(claim.key):
            raise ValidationError(f"{what}: the lease was claimed on row {claim.key!r}, "
                                  f"not on {key!r}")

    def finalize(self, key: object, claim: LeaseClaim, *,
                 payload: Mapping[str, Any] | None = None, owner: object = None,
                 data: Any = None) -> Op[TransitionResult]:
        edge = self._claimed_edge(claim, "finalize")
        self._same_row(key, claim, "finalize")
        return self._transition(key, edge.dst, (edge.src,), owner, payload, None, data,
                                edge, claim.fence)

    def release(self, key: object, claim: LeaseClaim, *,
                error: str | None = None) -> Op[ReleaseResult]:
        """Give the lease back without moving; stamps ``last_error`` when given."""
        edge = self._claimed_edge(claim, "release")
        self._same_row(key, claim, "release")
        lease = self.b.lease
        assert lease is not None
        _, values = self.values(key)
        values["lease_kind"] = edge.lease
        values["fence"] = claim.fence
        values["error"] = None if error is None else str(error)[:2000]
        shape = ("release",)
        stmt = self._plans.get(shape)
        if stmt is None:
            c = self.c
            sets = [c.set_null(lease.at), c.set_null(lease.kind)]
            if lease.holder:
                sets.append(c.set_null(lease.holder))
            if lease.error:
                sets.append(c.set_value(lease.error, Slot("error")))
            fence = Ref(lease.token or lease.at)
            node = And((Same(Ref(lease.kind), Slot("lease_kind")), Same(fence, Slot("fence"))))
            stmt = c.conditional_update([Check(node, Reason.LEASE_LOST, Reason.LEASE_LOST)],
                                        sets)
            self._plans[shape] = stmt
        rows = yield Batch((stmt.bind(self.d, values),))
        if rows[0]:
            return ReleaseResult(True)
        return ReleaseResult(False, Reason.LEASE_LOST)

    def run(self, key: object, edge_name: str, act: Callable[[ActiveLease], Any], *,
            holder: str | None = None, owner: object = None,
            payload: Mapping[str, Any] | None = None, guards: GuardSpec | None = None,
            data: Any = None, due: str | None = None) -> Op[RunResult]:
        """claim -> act -> finalize; on a raise or a falsy result, release with the error.

        The act's exception propagates after the lease is released. If the lease was taken
        over while the act ran, finalize is refused and the result says LEASE_LOST.
        """
        edge = self._leased_edge(edge_name)
        if not callable(act):
            raise ValidationError(f"the act must be callable, got {act!r}")
        self.b.check_payload(payload)
        self._data(data)  # all input is checked before the claim: no act for a doomed move
        claim = yield from self.claim(key, edge_name, holder=holder, owner=owner,
                                      guards=guards, due=due)
        if not claim.claimed:
            return RunResult(False, claim.reason, claim.reasons, claim.state, claim.state)
        assert claim.row is not None
        handle = ActiveLease(self.b.key_values(key), edge, claim.token, claim.row)
        try:
            value = yield Call(act, handle)
        except BaseException as exc:
            yield from self.release(key, claim, error=f"{type(exc).__name__}: {exc}")
            raise
        if not value:
            rel = yield from self.release(key, claim, error=f"act returned {value!r}")
            reason = Reason.ACT_FAILED if rel.released else Reason.LEASE_LOST
            return RunResult(False, reason, (reason,), edge.src, edge.src, value, True,
                             f"act returned {value!r}")
        try:
            fin = yield from self.finalize(key, claim, payload=payload, owner=owner, data=data)
        except ConnectionLostError:
            raise  # the write may have landed: the lease stays (fenced) until its TTL
        except RowstateError as exc:  # the database refused the write: nothing landed
            yield from self.release(key, claim, error=f"finalize: {type(exc).__name__}: {exc}")
            raise
        if not fin.applied:
            # a refused move (INVARIANT, a guard) must not hold the row for the whole TTL;
            # after LEASE_LOST the lease is another's and a release would be refused anyway
            error = f"finalize refused: {fin.reason}"
            if fin.reason != Reason.LEASE_LOST:
                yield from self.release(key, claim, error=error)
            return RunResult(False, fin.reason, fin.reasons, edge.src, fin.state or edge.src,
                             value, True, error)
        return RunResult(True, None, (), fin.previous, fin.state, value, True, None, fin.event)

    # -- finalization claims -------------------------------------------------------------

    def _finalization_values(self, key: object, holder: object, scope: object,
                             ) -> tuple[FinalizationClaim, dict[str, Any]]:
        """The claim's columns and the call's values, checked before any I/O."""
        f = self.b.finalization
        if f is None:
            raise ValidationError(f"{self.b.table}: the binding has no finalization claim")
        for what, v in (("holder", holder), ("scope", scope)):
            if v is not None and not isinstance(v, str):
                raise ValidationError(f"finalization {what} must be a string, got {v!r}")
            if v is not None:
                check_scalar(v, what, ValidationError)
        if not holder:
            raise ValidationError("finalization holder must be a non-empty string")
        _, values = self.values(key)
        values.update(fholder=holder, fscope=scope, fttl=float(f.ttl))
        return f, values

    def claim_finalization(self, key: object, holder: str, scope: str | None = None,
                           ) -> Op[FinalizationClaimResult]:
        f, values = self._finalization_values(key, holder, scope)
        plan = self._plans.get(("fclaim",))
        if plan is None:
            c = self.c
            sets = [c.set_value(f.holder, Slot("fholder")), c.set_value(f.scope, Slot("fscope")),
                    c.set_now(f.at)]
            if f.token:
                sets.append(c.incremented(f.token))
            plan = c.cas([self._fclaim_check(f)], sets, None, known_from=True)
            self._plans[("fclaim",)] = plan
        out = yield from self._cas(plan, values)
        if out.new is not None:
            token = out.new.get(f.token) if f.token else None
            return FinalizationClaimResult(True, None, holder, scope, token, out.new)
        if out.cur is None:
            return FinalizationClaimResult(False, Reason.RECORD_NOT_FOUND)
        return FinalizationClaimResult(False, Reason.HELD_BY_OTHER, out.cur.get(f.holder),
                                       out.cur.get(f.scope), None, out.cur)

    def release_finalization(self, key: object, holder: str,
                             scope: str | None = None) -> Op[ReleaseResult]:
        """Owner-checked on (holder, scope) and idempotent: nothing held, nothing done."""
        f = self.b.finalization
        if f is None:
            raise ValidationError(f"{self.b.table}: the binding has no finalization claim")
        if not isinstance(holder, str) or (scope is not None and not isinstance(scope, str)):
            raise ValidationError("finalization holder and scope must be strings")
        _, values = self.values(key)
        values.update(fholder=holder, fscope=scope)
        stmt = self._plans.get(("frelease",))
        if stmt is None:
            c = self.c
            stmt = c.conditional_update(
                [self._frelease_check(f)],
                [c.set_null(f.holder), c.set_null(f.scope), c.set_null(f.at)],
            )
            self._plans[("frelease",)] = stmt
        rows = yield Batch((stmt.bind(self.d, values),))
        return ReleaseResult(bool(rows[0]))

    @staticmethod
    def _fclaim_check(f: FinalizationClaim) -> Check:
        """Free, already ours (same holder and scope: a redelivery), or stale."""
        h, s, at = Ref(f.holder), Ref(f.scope), Ref(f.at)
        node = Or((IsNull(h), And((Same(h, Slot("fholder")), Same(s, Slot("fscope")))),
                   Older(at, Slot("fttl"))))
        return Check(node, Reason.HELD_BY_OTHER, Reason.HELD_BY_OTHER)

    @staticmethod
    def _frelease_check(f: FinalizationClaim) -> Check:
        node = And((Same(Ref(f.holder), Slot("fholder")), Same(Ref(f.scope), Slot("fscope"))))
        return Check(node, Reason.HELD_BY_OTHER, Reason.HELD_BY_OTHER)

    # -- the rules as data ---------------------------------------------------------------
    #
    # For a caller that runs the rules on another executor (a key/value persistence adapter
    # that can only do a conditional write of plain values): the very checks the SQL above
    # is rendered from, and the values their slots name, so that executor evaluates the same
    # rules (:func:`rowstate.conditions.evaluate`) instead of a copy of them.

    def transition_checks(self, key: object, to: str, *,
                          from_: Iterable[str] | str | None = None, owner: object = None,
                          guards: GuardSpec | None = None,
                          ) -> tuple[tuple[Check, ...], dict[str, Any]]:
        """The checks a move's write is conditioned on (its WHERE, key excepted)."""
        froms = self._froms(to, from_)
        _, values = self.values(key)
        plan = self._transition_plan(to, froms, self._owner(owner), {}, guards, values, None)
        return plan.checks, values

    def finalization_checks(self, key: object, holder: str, scope: str | None = None,
                            ) -> tuple[Check, Check, dict[str, Any]]:
        """(the claim's check, the release's check, their values)."""
        f, values = self._finalization_values(key, holder, scope)
        return self._fclaim_check(f), self._frelease_check(f), values

    # -- reads ---------------------------------------------------------------------------

    def get(self, key: object) -> Op[dict[str, Any] | None]:
        _, values = self.values(key)
        rows = yield Batch((self._read.bind(self.d, values),))
        if not rows[0]:
            return None
        return dict(zip(self.columns, rows[0][0][: len(self.columns)], strict=True))

    def history(self, key: object) -> Op[list[Event]]:
        if not self._event_table:
            raise ValidationError(f"{self.b.table}: the binding has no events table")
        kv, _ = self.values(key)
        p = self.d.placeholder
        sql = (
            "SELECT id, edge, from_state, to_state, owner, data, version, created_at "
            f"FROM {self.d.table(self._event_table)} "
            f"WHERE machine = {p} AND row_key = {p} ORDER BY id"
        )
        rows = yield Batch(((sql, [self.m.name, json.dumps(list(kv))]),))
        return [
            Event(self.m.name, kv, r[1], r[2], r[3], r[4],
                  self.d.load_json(r[5]), r[6],
                  self.d.parse_time(r[7]), r[0])
            for r in rows[0]
        ]

    # -- durable timers ------------------------------------------------------------------

    def fire_due(self, *, acts: Mapping[str, Callable[[ActiveLease], Any]] | None = None,
                 notify: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
                 limit: int = 100, holder: str | None = None) -> Op[FireReport]:
        """Move every due row through the normal door; one failing row does not stop the
        others. Several tickers may run at once: the CAS lets exactly one move each row."""
        acts, notify = dict(acts or {}), dict(notify or {})
        for t in self.b.timers:
            if self.m.edge(t.edge).lease and t.edge not in acts:
                raise ValidationError(f"timer {t.edge!r} is side-effecting: pass acts[{t.edge!r}]")
        for n in self.b.notices:
            if n.name not in notify:
                raise ValidationError(f"notice {n.name!r} needs notify[{n.name!r}]")
        fired: list[Fired] = []
        values = self._clock_values()
        for t in self.b.timers:
            edge = self.m.edge(t.edge)
            checks = [self._state_check((edge.src,)), self._due_check(t.due),
                      *self._guard_checks(t.guards, "tg", values)[1]]
            stmt = self.c.select_due(checks, Ref(t.due), limit)
            rows = yield Batch((stmt.bind(self.d, values),))
            for row in rows[0]:
                fired.append((yield from self._fire_edge(tuple(row), edge, t, acts, holder)))
        for n in self.b.notices:
            fired.extend((yield from self._fire_notice(n, notify[n.name], limit, values)))
        return FireReport(tuple(fired))

    def _clock_values(self) -> dict[str, Any]:
        if self.clock is not None:
            return {"now": self.d.db_time(self.clock())}
        return {"now": STORE_NOW} if self.d.now_is_param else {}

    def _due_check(self, column: str) -> Check:
        return Check(Older(Ref(column), Const(0.0), inclusive=True), "NOT_DUE",
                     Reason.GUARD_FAILED)

    def _due_checks(self, column: str | None) -> list[Check]:
        return [self._due_check(column)] if column else []

    def _fire_edge(self, key: tuple[Any, ...], edge: Edge, timer: TimedEdge,
                   acts: Mapping[str, Callable[[ActiveLease], Any]],
                   holder: str | None) -> Op[Fired]:
        # the write re-checks the deadline and the timer's guards: between the tick's SELECT
        # and this write, an operator may have extended the deadline or set autopilot off
        try:
            if edge.lease:
                res = yield from self.run(key, edge.name, acts[edge.name], holder=holder,
                                          guards=timer.guards, due=timer.due)
                return Fired(key, edge.name, res.applied, res.reason, res.error)
            tr = yield from self._transition(key, edge.dst, (edge.src,), None, None,
                                             timer.guards, None, edge, None, due=timer.due)
            return Fired(key, edge.name, tr.applied, tr.reason)
        except Exception as exc:  # one failing row must not stop the tick
            return Fired(key, edge.name, False, None, f"{type(exc).__name__}: {exc}")

    def _fire_notice(self, n: Any, send: Callable[[Mapping[str, Any]], Any], limit: int,
                     values: dict[str, Any]) -> Generator[Batch | Call, Any, list[Fired]]:
        checks = [Check(In(self.b.state_ref, tuple(Const(s) for s in n.states)),
                        Reason.STATE_MISMATCH, Reason.STATE_MISMATCH),
                  Check(IsNull(Ref(n.claim)), "ALREADY_SENT", "ALREADY_SENT"),
                  self._due_check(n.due), *self._guard_checks(n.guards, "ng", values)[1]]
        stmt = self.c.select_due(checks, Ref(n.due), limit)
        rows = yield Batch((stmt.bind(self.d, values),))
        out: list[Fired] = []
        shape = ("notice", n.name)
        plan = self._plans.get(shape)
        if plan is None:
            plan = self.c.cas(checks, [self.c.set_now(n.claim)], None, known_from=True)
            self._plans[shape] = plan
        for row in rows[0]:
            key = tuple(row)
            try:
                _, vals = self.values(key)
                vals.update({k: v for k, v in values.items() if k not in vals})
                got = yield from self._cas(plan, vals)
                if got.new is None:
                    out.append(Fired(key, n.name, False, "ALREADY_SENT"))
                    continue
                # claimed first, then sent: a crash or a failure here never sends twice
                yield Call(send, got.new)
                out.append(Fired(key, n.name, True))
            except Exception as exc:
                out.append(Fired(key, n.name, False, None, f"{type(exc).__name__}: {exc}"))
        return out
