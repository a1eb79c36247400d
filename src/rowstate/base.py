"""The decisions, without I/O: what every operation shares.

Every operation is a generator: it yields a :class:`Batch` of statements (or a
:class:`Call` to run the caller's side effect) and receives the rows back. The sync and the
async front ends only drive these generators (:mod:`rowstate.drive`), so the rules live
here once and the twins cannot disagree.

Input is checked before the first yield: a bad key, an unknown field or an edge the machine
lacks raises before anything reaches the database.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
from collections.abc import Callable, Generator, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeGuard, TypeVar

from .binding import MAX_VALUE_BYTES, Binding, GuardSpec, check_json, check_scalar
from .compiler import Batch, CasPlan, Compiler, EventSpec, Set, Statement
from .conditions import (
    And,
    Check,
    Const,
    In,
    IsNull,
    NotAfter,
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
    InvalidTransitionError,
    InvariantViolation,
    ValidationError,
)
from .lanes import Lane, LaneCall, Template
from .machine import Edge
from .outbox import EVENT_READ_COLUMNS, row_key
from .results import (
    CheckResult,
    Event,
    Reason,
    TransitionResult,
)

R = TypeVar("R")
MAX_DATA_BYTES = MAX_VALUE_BYTES  # event data: one JSON document
_NO_PAYLOAD: dict[str, Any] = {}  # never written to: a call without a payload shares it


class Call(NamedTuple):
    """Ask the driver to run a caller's function (an act, a notice) and send back its
    result; an exception it raises is thrown back into the operation. (A named tuple: one
    is built per act; a frozen dataclass costs three times as much.)"""

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


class PlainMove(NamedTuple):
    """A move whose call gives only the key, perhaps an owner (and, finalizing a lease, the
    fence): no payload, guards or data."""

    to: str
    froms: tuple[str, ...]
    plan: CasPlan
    static: dict[str, Any]  # the values the plans name but the key, now, owner, fence...
    edge: Edge | None  # a leased edge being finalized
    plan_from: Callable[[str], CasPlan] | None  # several from-states: each one's own plan
    lanes: dict[str, Lane]  # from-state -> its lane (:mod:`rowstate.lanes`); {}: none


class ActiveLease(NamedTuple):
    """What an act receives: which row, which edge, and the fencing token it holds.

    ``atomic()`` opens a unit of work fenced by this lease (``with lease.atomic() as
    tx:``; ``async with`` on the async twin): the act's own writes in it commit only while
    the token is still the row's; a zombie whose lease was taken over gets a refused unit
    (``tx.refused == "LEASE_LOST"``) whose every statement raises."""

    key: tuple[Any, ...]
    edge: Edge
    token: int | None
    row: Mapping[str, Any]
    door: Any = None  # the front end that ran the act

    def atomic(self) -> Any:
        if self.door is None:
            raise ValidationError("this lease was not handed out by a lifecycle")
        return self.door.atomic(fence=self)


def _plain_from(from_: object) -> TypeGuard[str | tuple[str, ...] | None]:
    """Is ``from_`` a shape a plain move is remembered by (None, a state, a tuple)?"""
    return from_ is None or type(from_) is str or type(from_) is tuple


def event_of(r: tuple[Any, ...], d: Dialect, key: tuple[Any, ...] | None = None) -> Event:
    """An event from a row read in :data:`~rowstate.outbox.EVENT_READ` order."""
    kv = tuple(json.loads(r[2])) if key is None else key
    return Event(r[1], kv, r[3], r[4], r[5], r[6], d.load_json(r[7]), r[8],
                 d.parse_time(r[9]), r[0])


@functools.cache
def _hostname() -> str:
    return socket.gethostname()  # a system call: once per process, not once per claim


def default_holder() -> str:
    return f"{_hostname()}:{os.getpid()}"  # the pid is read each time (a fork changes it)


class CoreBase:
    """What every operation shares: inputs, checks, the compare-and-set and its verdict,
    transitions and reads. Leases, finalization claims and timers build on it."""

    def __init__(self, binding: Binding, dialect: Dialect,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.b = binding
        self.m = binding.machine
        self.d = dialect
        self.clock = clock
        self.c = Compiler(binding, dialect)
        self.door: Any = None  # the front end driving this core (handed to acts)
        self.columns = self.c.columns
        self._plans: dict[tuple[Any, ...], Any] = {}
        self._key_index = self.columns.index(binding.key[0])
        self._key_slots = tuple(f"k{i}" for i in range(len(binding.key)))
        # do statements take "now" as a parameter (a caller's clock; SQLite, which has no
        # server clock and whose store fills in its host's, once per write)?
        self._fills_now = clock is not None or dialect.now_is_param
        self._read = self.c.read()
        self._event_table = tuple(binding.events.split(".")) if binding.events else None
        # several from-states are written as the fast single-state CAS (see _cas_guessing)
        # where that CAS is one statement: with writable CTEs (PostgreSQL) always, else
        # (SQLite) without an event row
        self._fast_from_each = dialect.writable_ctes or not self._event_table
        self._last_from: dict[int, str] = {}  # id(multi-state plan) -> the state it last left
        # id(several-state plan) -> its one-state plans (plans live as long as the core)
        self._single_plans: dict[int, dict[str, CasPlan]] = {}
        self._plain_moves: dict[tuple[Any, ...], PlainMove] = {}
        self._direct_lanes: dict[tuple[str, Any], Lane | None] = {}
        self._returning_memo: dict[tuple[Any, ...], tuple[str, ...]] = {}
        # id(plain claim's plan) -> (its write, its read) as templates; None: general path
        self._claim_lanes: dict[int, tuple[Template | None, Template | None]] = {}
        # pure functions of the (frozen) machine, memoised: validation still runs on a miss
        self._froms_memo: dict[tuple[str, Any], tuple[str, ...]] = {}
        self._edge_names: dict[tuple[str, str], str] = {}

    # -- inputs --------------------------------------------------------------------------

    def values(self, key: object) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kv = self.b.key_values(key)
        if len(kv) == 1:  # the common single-column key, without a zip
            values: dict[str, Any] = {"k0": kv[0]}
        else:
            values = dict(zip(self._key_slots, kv, strict=True))
        if self._fills_now:
            values["now"] = self._now_value()
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
        """The event data's JSON text, by the JSON rules of docs/values.md (both databases
        store it alike; jsonb would refuse a nested NUL only at the write)."""
        if data is None:
            return None
        return check_json(data, "event data")

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
            if finalize and b.lease.failed_at:
                sets.append(c.set_null(b.lease.failed_at))
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
        try:
            rows = yield plan.batch(self.d, values)
        except InvariantViolation:
            refused = yield from self._read_refused(values)
            return refused._replace(invariant=True)
        cols = self.columns
        n = len(cols)
        if plan.fast:
            cols = plan.columns
            n = len(cols)
            if not rows[0]:
                return (yield from self._read_refused(values))
            row = rows[0][0]
            if len(row) == n:  # zip's strict check done once, by len()
                return Outcome(None, dict(zip(cols, row, strict=False)), None, None)
            return Outcome(None, dict(zip(cols, row[:n], strict=True)), row[n], None)
        if self.d.writable_ctes:
            # one row: the row before, the row after, event, now
            if not rows[0]:
                return Outcome(None, None, None, None)
            row = rows[0][0]
            ki = self._key_index
            before = dict(zip(cols, row[:n], strict=True)) if row[ki] is not None else None
            after = (dict(zip(cols, row[n:2 * n], strict=True))
                     if row[n + ki] is not None else None)
            return Outcome(before, after, row[2 * n], row[2 * n + 1])
        if not rows[0]:
            return Outcome(None, None, None, None)
        before = rows[0][0]
        new = rows[-1][0] if rows[-1] else None
        event_id = rows[1][0][0] if plan.event is not None and rows[1] else None
        return Outcome(dict(zip(cols, before[:n], strict=True)),
                       dict(zip(cols, new, strict=True)) if new else None, event_id, before[n])

    def _cas_guessing(self, plan: CasPlan, plan_from: Callable[[str], CasPlan],
                      froms: tuple[str, ...], values: dict[str, Any],
                      missed: tuple[str, Outcome] | None = None,
                      ) -> Op[tuple[Outcome, str]]:
        """A move from one of several states, written as the fast single-state CAS from the
        likeliest one (the state this move last left; else the first listed).

        A miss reads the row; if the row would pass the move's checks from the state it is
        in now, the write is retried from that state, once; a second such miss (the row
        keeps moving under concurrent writers) falls back to ``plan``, which reads the row
        under a lock (PostgreSQL) or in one transaction (SQLite) and so always settles.
        Every attempt is a complete compare-and-set, so a wrong guess costs round trips,
        never correctness; the state left is the one the applied write was conditioned on.
        ``missed``: the first guess was already written (by a lane) and refused, and this
        is the state it guessed and the row read after it.
        """
        guess = self._last_from.get(id(plan), froms[0])
        for attempt in range(2):
            if attempt == 0 and missed is not None:
                guess, out = missed
            else:
                out = yield from self._cas(plan_from(guess), values)
            if out.new is not None:
                self._last_from[id(plan)] = guess
                return out, guess
            if out.cur is None or out.invariant:
                return out, guess
            now = self._now(out.now)
            state = self.state_of(out.cur)
            view = RowView(out.cur, values, now, self.d.parse_time, self.d.load_json)
            if state is None or state not in froms or failing(plan.checks, view):
                return out, guess  # refused for a reason the row shows: explain it
            guess = state
        out = yield from self._cas(plan, values)
        return out, self._state_left(out, guess)

    def _state_left(self, out: Outcome, known: str) -> str:
        """The state a write left: read with the row when the plan read it, else the one
        from-state the write was conditioned on."""
        state = self.state_of(out.cur) if out.cur is not None else None
        return state or known

    def _read_refused(self, values: dict[str, Any]) -> Op[Outcome]:
        """The row as it is now, read after a refused write to explain the refusal."""
        read = yield Batch((self._read.bind(self.d, values),))
        return self._outcome_of_read(read[0])

    def _outcome_of_read(self, rows: list[tuple[Any, ...]]) -> Outcome:
        if not rows:
            return Outcome(None, None, None, None)
        row = rows[0]
        n = len(self.columns)
        return Outcome(dict(zip(self.columns, row[:n], strict=True)), None, None, row[n])

    def _now(self, raw: Any) -> datetime:
        if self.clock is not None:
            return self.clock()
        if raw is None:  # the applied path: no clock reading came back
            return datetime.now(UTC)
        parsed = self.d.parse_time(raw)
        return parsed if parsed is not None else datetime.now(UTC)

    def _explain(self, checks: tuple[Check, ...], out: Outcome,
                 values: dict[str, Any]) -> tuple[str, tuple[str, ...], str | None]:
        """The primary reason, every reason, and the row's current state."""
        if out.invariant:
            state = self.state_of(out.cur) if out.cur is not None else None
            return Reason.INVARIANT, (Reason.INVARIANT,), state
        if out.cur is None:
            return Reason.RECORD_NOT_FOUND, (Reason.RECORD_NOT_FOUND,), None
        state = self.state_of(out.cur)
        if len(checks) == 1 and checks[0].category == Reason.STATE_MISMATCH:
            # a move checked for its state only: the row is in another state, or it
            # changed between the refused write and this read; both say STATE_MISMATCH
            return Reason.STATE_MISMATCH, (Reason.STATE_MISMATCH,), state
        bad = failing(checks, RowView(out.cur, values, self._now(out.now), self.d.parse_time,
                                      self.d.load_json))
        if not bad:
            # fast path only: the row changed between the refused write and the read
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
                         due: str | None = None, returning: tuple[str, ...] | None = None,
                         ) -> CasPlan:
        """The cached plan of a move, with ``values`` filled for it.

        Everything but the caller's guards, owner and payload follows from the shape, so
        the checks are built (and the constant values they name collected) once per shape.
        """
        gshape, gchecks = self._guard_checks(guards, "g", values) if guards else ((), [])
        if owner is not None:
            values["owner"] = owner
        shape = ("t", to, froms, owner is not None, gshape, tuple(payload) if payload else (),
                 edge.name if edge else None, due, returning)
        cached = self._plans.get(shape)
        if cached is None:
            cached = self._compile_transition(to, froms, owner is not None, gchecks,
                                              tuple(payload), edge, due, returning)
            self._plans[shape] = cached
        plan, static = cached
        values.update(static)
        if payload:
            for name, value in payload.items():
                values[f"p:{name}"] = self.d.payload_value(value)
        return plan

    def _compile_transition(self, to: str, froms: tuple[str, ...], has_owner: bool,
                            gchecks: list[Check], payload: tuple[str, ...], edge: Edge | None,
                            due: str | None, returning: tuple[str, ...] | None = None,
                            ) -> tuple[CasPlan, dict[str, Any]]:
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
        plan = self.c.cas(checks, sets, event, known_from=len(froms) == 1, returning=returning)
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
                   guards: GuardSpec | None = None, data: Any = None,
                   returning: Iterable[str] | None = None) -> Op[TransitionResult]:
        cols = self._returning(returning, self.b.version)
        if payload is None and guards is None and data is None and _plain_from(from_):
            owner = self._owner(owner)  # checked first: the plan compiled next names it
            move = self._plain_move(to, from_, None, owner is not None, cols)
            if move is not None:
                return self._plain_transition(key, move, owner, None)
        froms = self._froms(to, from_)
        return self._transition(key, to, froms, owner, payload, guards, data, None, None,
                                returning=cols)

    def _returning(self, returning: Iterable[str] | None,
                   *needs: str | None) -> tuple[str, ...] | None:
        """The columns a caller asks the written row for (``returning=``), with the key,
        the state and what the engine itself reads (``needs``), in column order; None:
        every column. Checked before any I/O; remembered per request."""
        if returning is None:
            return None
        try:  # the hot path: the same tuple again
            return self._returning_memo[(returning, needs)]
        except (KeyError, TypeError):  # not seen yet, or a list (checked, not remembered)
            pass
        if isinstance(returning, str):
            raise ValidationError(f"returning= is a list of column names, got {returning!r}")
        names = tuple(returning)
        if not all(isinstance(n, str) for n in names):
            raise ValidationError(f"returning= is a list of column names, got {returning!r}")
        unknown = [n for n in names if n not in self.columns]
        if unknown:
            raise ValidationError(f"{self.b.table}: returning= names unknown column(s) "
                                  f"{unknown}")
        wanted = {*names, *self.b.key, self.b.state_ref.column, *(n for n in needs if n)}
        cols = tuple(c for c in self.columns if c in wanted)
        with contextlib.suppress(TypeError):
            self._returning_memo[(returning, needs)] = cols
        return cols

    def transition_lane(self, key: object, to: str, from_: Iterable[str] | str | None,
                        owner: object, returning: Iterable[str] | None = None,
                        ) -> LaneCall | None:
        """A plain move's lane call (the front ends run it without a generator,
        :func:`rowstate.drive.drive_lane`), or None: use :meth:`transition`. The same
        checks as :meth:`transition`, in the same order, before any I/O."""
        if owner is None and returning is None:  # the commonest call: a key, a target
            try:
                lane = self._direct_lanes[(to, from_)]
            except (KeyError, TypeError):  # not seen yet, or an unhashable from_
                lane = self._direct_lane(to, from_)
            if lane is not None:
                return lane.call(self.b.key_values(key), None, None)
        cols = self._returning(returning, self.b.version)
        if not _plain_from(from_):
            return None
        owner = self._owner(owner)
        move = self._plain_move(to, from_, None, owner is not None, cols)
        if move is not None and move.lanes:
            return self._lane_call(key, move, owner, None)
        return None

    def _transition(self, key: object, to: str, froms: tuple[str, ...], owner: object,
                    payload: Mapping[str, Any] | None, guards: GuardSpec | None, data: Any,
                    edge: Edge | None, fence: Any,
                    due: str | None = None, due_at: Any = None, *,
                    returning: tuple[str, ...] | None = None) -> Op[TransitionResult]:
        kv, values = self.values(key)
        if due_at is not None:  # a timer judged by business time (see _due_check)
            values["due_at"] = due_at
        owner = self._owner(owner) if owner is not None else None
        checked = self.b.check_payload(payload) if payload is not None else _NO_PAYLOAD
        data_text = self._data(data) if data is not None else None
        plan = self._transition_plan(to, froms, owner, checked, guards, values, edge, due,
                                     returning)
        if self._event_table:  # the event row's columns the shared write does not fill
            values.update(to=to, ev_owner=None, ev_data=data_text)
        plan_from = self._one_state_plans(plan, to, froms, owner, checked, guards, values,
                                          edge, due, returning)
        return (yield from self._write_move(kv, values, plan, plan_from, froms, to, edge,
                                            fence, owner, data))

    def _one_state_plans(self, plan: CasPlan, to: str, froms: tuple[str, ...], owner: Any,
                         payload: dict[str, Any], guards: GuardSpec | None,
                         values: dict[str, Any], edge: Edge | None,
                         due: str | None, returning: tuple[str, ...] | None = None,
                         ) -> Callable[[str], CasPlan] | None:
        """For a move from several states that is guessed (see _cas_guessing): the
        one-state plan of each, compiled once per several-state plan. Their values are a
        subset of ``plan``'s (only the state check differs, and it is constant). None when
        the move is not guessed."""
        if len(froms) == 1 or not self._fast_from_each:
            return None
        singles = self._single_plans.get(id(plan))
        if singles is None:
            singles = {s: self._transition_plan(to, (s,), owner, payload, guards, values,
                                                edge, due, returning) for s in froms}
            self._single_plans[id(plan)] = singles
        return singles.__getitem__

    def _write_move(self, kv: tuple[Any, ...], values: dict[str, Any], plan: CasPlan,
                    plan_from: Callable[[str], CasPlan] | None, froms: tuple[str, ...],
                    to: str, edge: Edge | None, fence: Any, owner: Any,
                    data: Any, missed: tuple[str, Outcome] | None = None,
                    ) -> Op[TransitionResult]:
        """A move's write and its verdict, shared by plain moves and the general path:
        ``values`` hold all but the fence and the event row's key and owner."""
        leased = edge is not None and edge.lease
        if leased:
            values["fence"] = fence
        if self._event_table:
            values["row_key"] = row_key(kv)
            if owner is not None:
                values["ev_owner"] = str(owner)
        if plan_from is None:
            out = yield from self._cas(plan, values)
            previous = froms[0] if out.cur is None else self._state_left(out, froms[0])
        else:
            out, previous = yield from self._cas_guessing(plan, plan_from, froms, values,
                                                          missed)
        if out.new is None:
            return self._refused(plan, out, values, edge)
        name = edge.name if edge is not None else self._edge_name(previous, to)
        return self._applied(kv, name, previous, to, owner, data, out)

    def _refused(self, plan: CasPlan, out: Outcome, values: dict[str, Any],
                 edge: Edge | None) -> TransitionResult:
        reason, reasons, state = self._explain(plan.checks, out, values)
        if edge is not None and edge.lease and reason == Reason.STATE_MISMATCH:
            reason = Reason.LEASE_LOST  # the row left the edge's source: the lease is gone
        return TransitionResult(False, reason, reasons, state, state, out.cur)

    def _applied(self, kv: tuple[Any, ...], edge_name: str, previous: str, to: str,
                 owner: Any, data: Any, out: Outcome) -> TransitionResult:
        assert out.new is not None
        version = out.new.get(self.b.version) if self.b.version else None
        event = Event(self.m.name, kv, edge_name, previous, to,
                      None if owner is None else str(owner), data, version,
                      self._now(out.now), out.event_id)
        return TransitionResult(True, None, (), previous, to, out.new, event)

    # -- plain moves ---------------------------------------------------------------------
    #
    # Most calls name only a key, a target, the state(s) they expect the row in and perhaps
    # an owner (a leased edge's finalize: the key and the fence). Everything else about such
    # a call is constant, so it is compiled once, from the same plans as any other move,
    # and each call costs a key check, a parameter list and the write.

    def _plain_move(self, to: str, from_: str | tuple[str, ...] | None, edge: Edge | None,
                    has_owner: bool, returning: tuple[str, ...] | None = None,
                    ) -> PlainMove | None:
        """The compiled plain move (None if ``from_`` is not hashable: the general path)."""
        memo = (to, from_, edge.name if edge is not None else None, has_owner, returning)
        try:
            move = self._plain_moves.get(memo)
        except TypeError:  # an unhashable state inside the tuple: the general path checks it
            return None
        if move is None:
            froms = (edge.src,) if edge is not None else self._froms(to, from_)
            owner = True if has_owner else None  # the plans take only its presence
            static: dict[str, Any] = {}
            plan = self._transition_plan(to, froms, owner, _NO_PAYLOAD, None, static, edge,
                                         None, returning)
            plan_from = self._one_state_plans(plan, to, froms, owner, _NO_PAYLOAD, None,
                                              static, edge, None, returning)
            static.pop("owner", None)
            if self._event_table:  # the event row's constant columns
                static.update(to=to, ev_owner=None, ev_data=None)
            move = PlainMove(to, froms, plan, static, edge, plan_from, {})
            lanes = {s: Lane.build(self, move, plan_from(s) if plan_from else plan, s)
                     for s in froms} if plan_from or len(froms) == 1 else {}
            if all(lanes.values()):  # every from-state has one, or the move has none
                move.lanes.update(lanes)  # type: ignore[arg-type]
            self._plain_moves[memo] = move
        return move

    def _direct_lane(self, to: str, from_: Iterable[str] | str | None) -> Lane | None:
        """The lane of a one-state move without an owner, remembered per (to, from_)."""
        if not _plain_from(from_):
            return None
        move = self._plain_move(to, from_, None, False)
        if move is None:  # an unhashable state inside from_: the general path checks it
            return None
        lane = move.lanes.get(move.froms[0]) if len(move.froms) == 1 else None
        self._direct_lanes[(to, from_)] = lane
        return lane

    def _lane_call(self, key: object, move: PlainMove, owner: Any, fence: Any) -> LaneCall:
        """The lane of the state a several-state move likely leaves (see _cas_guessing)."""
        kv = self.b.key_values(key)
        src = move.froms[0] if len(move.froms) == 1 else self._last_from.get(
            id(move.plan), move.froms[0])
        return move.lanes[src].call(kv, owner, fence)

    def _lane_op(self, call: LaneCall) -> Op[TransitionResult]:
        """A lane call inside an operation (a finalize in run())."""
        try:
            rows = yield call.batch
        except InvariantViolation:
            return (yield from self._lane_refused(call, invariant=True))
        result, rows = call.lane.finish(call, rows)
        if result is None:
            result = yield from self._lane_refused(call, False, rows)
        return result

    def _lane_refused(self, call: LaneCall, invariant: bool,
                      rows: list[list[tuple[Any, ...]]] | None = None,
                      ) -> Op[TransitionResult]:
        """A lane's write was refused: the general path's explanation, from the row read
        after it. A several-state move whose guess missed goes on guessing from that row
        (see _cas_guessing), as the general path would have."""
        move = call.lane.move
        kv, values = self.values(call.kv)
        values.update(move.static)
        if call.owner is not None:
            values["owner"] = call.owner
        if move.edge is not None and move.edge.lease:
            values["fence"] = call.fence
        if rows is not None and len(rows) > 1:  # the read sent with the write
            out = self._outcome_of_read(rows[1])
        else:
            out = yield from self._read_refused(values)
        if invariant:
            out = out._replace(invariant=True)
        if len(move.froms) == 1:
            return self._refused(call.lane.plan, out, values, move.edge)
        return (yield from self._write_move(kv, values, move.plan, move.plan_from, move.froms,
                                            move.to, move.edge, call.fence, call.owner, None,
                                            (call.lane.src, out)))

    def _plain_transition(self, key: object, move: PlainMove, owner: Any,
                          fence: Any) -> Op[TransitionResult]:
        """Not a generator itself (one frame less per round trip): the key is checked here,
        before the write's generator is returned, so a bad key still raises before I/O."""
        if move.lanes:
            return self._lane_op(self._lane_call(key, move, owner, fence))
        kv, values = self.values(key)
        values.update(move.static)
        if owner is not None:  # checked by the caller, before compiling the move
            values["owner"] = owner
        return self._write_move(kv, values, move.plan, move.plan_from, move.froms, move.to,
                                move.edge, fence, owner, None)

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
        view = RowView(row, values, self._now(rows[0][0][n]), self.d.parse_time,
                       self.d.load_json)
        reasons = [c.reason for c in failing(plan.checks, view)]
        for inv in self.b.invariants:
            if inv.state == to:
                stmt = self.c.other_in_state(inv.state, inv.per)
                taken = yield Batch((stmt.bind(self.d, values),))
                if taken[0]:
                    reasons.append(Reason.INVARIANT)
        return CheckResult(not reasons, tuple(dict.fromkeys(reasons)), self.state_of(row))

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
            f"SELECT {EVENT_READ_COLUMNS} FROM {self.d.table(self._event_table)} "
            f"WHERE machine = {p} AND row_key = {p} ORDER BY id"
        )
        rows = yield Batch(((sql, [self.m.name, row_key(kv)]),))
        return [event_of(r, self.d, kv) for r in rows[0]]

    def _template(self, stmt: Statement, static: dict[str, Any],
                  named: tuple[str, ...] = ()) -> Template | None:
        """``stmt`` as a template (:class:`rowstate.lanes.Template`) for this core's clock."""
        return Template.of(stmt, static, self._now_value, self.clock is not None, named)

    @functools.cached_property
    def _read_template(self) -> Template | None:
        """The read explaining a refusal (:attr:`_read`), sent with a templated write."""
        return self._template(self._read, {})

    @functools.cached_property
    def _row_template(self) -> Template | None:
        """The row by its key, without a clock: what a move checked for its state only
        needs to explain a refusal."""
        return self._template(self.c.read(clock=False), {})

    def _now_value(self) -> Any:
        """The "now" parameter: a caller's clock, or SQLite's placeholder for its store's
        host clock; PostgreSQL statements read ``now()`` on the server instead."""
        return self.d.db_time(self.clock()) if self.clock is not None else STORE_NOW

    def _clock_values(self) -> dict[str, Any]:
        return {"now": self._now_value()} if self._fills_now else {}

    def _due_check(self, column: str) -> Check:
        """``column <= now``; a column spelled ``@column`` is judged by the caller's
        business instant (the ``due_at`` value, :meth:`fire_due`'s ``now=``) instead, while
        leases and claims still age by the database clock."""
        if column.startswith("@"):
            return Check(NotAfter(Ref(column[1:]), Slot("due_at")), "NOT_DUE",
                         Reason.GUARD_FAILED)
        return Check(Older(Ref(column), Const(0.0), inclusive=True), "NOT_DUE",
                     Reason.GUARD_FAILED)

    def _due_checks(self, column: str | None) -> list[Check]:
        return [self._due_check(column)] if column else []
