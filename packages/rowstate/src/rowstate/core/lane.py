"""Lanes: a plain move's one statement, bound and judged without a generator.

Most calls name only a key, a target, the one state they expect the row in and perhaps an
owner (a leased edge's finalize: the key and the fence). Such a move is the hand-written
``UPDATE ... RETURNING`` (on PostgreSQL with its event row, the hand-written CTE; on
SQLite with its event row, the event INSERT and the UPDATE in one transaction), and all
its parameters but a handful are constants of the move. A :class:`Lane` holds that
statement with its constants already in place (:mod:`rowstate.core.templates`), so a call
costs a key check, one list copy with the key (and owner, fence, clock) written in, the
round trip and the result.

The front ends run a lane without driving a generator (:func:`drive_lane`): at SQLite's
12 us per statement, the generator frames, the batch and the values dict of the general
path are a fifth of a call. A refused or failed lane falls back to the general path's
explanation (``Lane.explain``, :meth:`rowstate.core.lanes.Lanes.refused`): the lane only
answers "applied", so it cannot disagree with the explained path on a refusal.
:func:`drive_lane` and :func:`adrive_lane` are twins kept by hand, as ``drive``/``adrive``
in :mod:`rowstate.protocol` are: they are the lane's two drivers (ten lines each, differing
only in awaiting the store), and they stay beside the lane they drive rather than split
this module for a generated copy.

Lanes are built by :class:`rowstate.core.lanes.Lanes` (the glue that knows the core's
parts); this module knows only the statement, its templates and the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from ..compiler import CasPlan
from ..errors import InvariantViolation
from ..machine import Edge
from ..protocol import AsyncRunner, Batch, Op, Rows, SyncRunner, adrive, drive
from ..results import Event, Reason, TransitionResult
from .templates import Template

_new = tuple.__new__  # a named tuple without its Python-level __new__ (one frame per call)


class PlainMove(NamedTuple):
    """A move whose call gives only the key, perhaps an owner (and, finalizing a lease, the
    fence): no payload, guards or data."""

    to: str
    froms: tuple[str, ...]
    plan: CasPlan
    static: dict[str, Any]  # the values the plans name but the key, now, owner, fence...
    edge: Edge | None  # a leased edge being finalized
    plan_from: Callable[[str], CasPlan] | None  # several from-states: each one's own plan
    lanes: dict[str, Lane]  # from-state -> its lane; {}: none


class LaneCall(NamedTuple):
    """One call on a lane: what the general path needs to explain a refusal."""

    lane: Lane
    kv: tuple[Any, ...]
    owner: Any
    fence: Any
    batch: Batch
    combined: bool = False  # the batch is the write and its read in one statement


# a lane re-decides every WINDOW calls whether its refusals are frequent enough (more than
# one call in CONTENDED) to send the write and its explaining read as one statement
WINDOW, CONTENDED = 64, 4


class Lane:
    """A plain move from one state, compiled to its statement and parameter template."""

    __slots__ = ("calls", "clock", "columns", "combined", "contended", "edge_name", "event",
                 "explain", "machine", "move", "ncols", "now_of", "picks", "plan", "public",
                 "read", "read_columns", "refusals", "src", "state_of", "state_only", "to",
                 "version", "write")

    def __init__(self, move: PlainMove, plan: CasPlan, src: str, edge_name: str,
                 write: Template, read: Template, state_only: bool,
                 combined: Template | None, explain: Explain,
                 state_of: Callable[[Any], str | None], read_columns: tuple[str, ...],
                 version: str | None, machine: str,
                 clock: Callable[[], datetime] | None,
                 public: Callable[[dict[str, Any]], dict[str, Any]] | None,
                 event: Template | None = None,
                 now_of: Callable[[Any], datetime] | None = None) -> None:
        self.move = move
        # SQLite with events: the event row, then the write, in one transaction (the
        # store's BEGIN IMMEDIATE), and the event's time is the store's clock reading
        self.event = event
        self.now_of = now_of
        self.plan = plan
        self.src = src
        self.to = move.to
        self.edge_name = edge_name
        self.write = write
        self.read = read  # the read that explains a refusal, sent with the write
        self.state_only = state_only
        self.explain = explain  # the general path's explanation of a refusal
        self.state_of = state_of
        self.columns = plan.columns
        self.read_columns = read_columns
        self.ncols = len(plan.columns)
        self.version = version
        self.machine = machine
        self.clock = clock
        self.public = public  # decodes a row for the caller (SQLite's text times, JSON)
        # under contention (see finish): the write and its read as one statement
        self.combined = combined
        self.contended = False
        self.calls = self.refusals = 0
        # where the written row's columns are in the combined statement's row
        self.picks = tuple(1 + read_columns.index(c) for c in plan.columns)

    def call(self, kv: tuple[Any, ...], owner: Any, fence: Any) -> LaneCall:
        if self.contended:
            both = self.combined
            assert both is not None
            return _new(LaneCall, (self, kv, owner, fence, _new(Batch, (
                ((both.sql, both.bind(kv, owner, fence)),), False, None)), True))
        write, read = self.write, self.read
        if self.event is not None:
            event = self.event
            return _new(LaneCall, (self, kv, owner, fence, _new(Batch, (
                ((event.sql, event.bind(kv, owner, fence)),
                 (write.sql, write.bind(kv, owner, fence))), True,
                (read.sql, read.bind(kv, owner, fence)))), False))
        # tuple.__new__: a named tuple's own __new__ is a Python frame, paid per call
        return _new(LaneCall, (self, kv, owner, fence, _new(Batch, (
            ((write.sql, write.bind(kv, owner, fence)),), False,
            (read.sql, read.bind(kv, owner, fence)))), False))

    def finish(self, call: LaneCall, rows: list[list[tuple[Any, ...]]],
               ) -> tuple[TransitionResult | None, list[list[tuple[Any, ...]]]]:
        """The result (None: the general path explains the refusal from the rows returned
        with it), and the rows in the write-then-read form either way."""
        if self.event is not None:  # [event, write, read?]: the write returns the event's
            rows = rows[1:]  # id and time (the event INSERT returns nothing)
            return self.applied(call, rows) or self.refused(rows), rows
        if call.combined:
            rows = self._split(rows)
        result = self.applied(call, rows) or self.refused(rows)
        if self.combined is not None:  # a heuristic of speed only: both forms are exact
            self.calls += 1
            if result is None or not result.applied:
                self.refusals += 1
            if self.calls >= WINDOW:
                self.contended = self.refusals * CONTENDED > self.calls
                self.calls = self.refusals = 0
        return result, rows

    def _split(self, rows: list[list[tuple[Any, ...]]]) -> list[list[tuple[Any, ...]]]:
        """The combined statement's answer as [written rows] or [[], read rows].

        Its read sees the row as the statement's snapshot has it: the very version the
        write judged, unless the write waited for a concurrent writer and then found the
        row changed. Then the snapshot still shows the row in the move's from-state, and
        the general path reads it again (a refusal with no read sent along)."""
        got = rows[0]
        if not got:
            return [[], []]  # no such row
        row = got[0]
        if row[0]:
            return [[tuple(row[i] for i in self.picks)]]
        cur = row[1:]
        if self.state_of(dict(zip(self.read_columns, cur, strict=True))) == self.src:
            return [[]]
        return [[], [cur]]

    def applied(self, call: LaneCall, rows: list[list[tuple[Any, ...]]],
                ) -> TransitionResult | None:
        """The result of an applied write; None when the write was refused. The written
        row's columns, then the event's id (with an events table), then on SQLite the
        write's time (the store's clock, read once for the transaction)."""
        got = rows[0]
        if not got:
            return None
        row = got[0]
        n = self.ncols
        if len(row) == n:
            new = dict(zip(self.columns, row, strict=False))
            event_id = None
        else:
            new = dict(zip(self.columns, row[:n], strict=True))
            event_id = row[n]
        owner = call.owner
        clock = self.clock
        if len(row) > n + 1 and self.now_of is not None:
            at = self.now_of(row[n + 1])
        else:
            at = datetime.now(UTC) if clock is None else clock()
        event = _new(Event, (self.machine, call.kv, self.edge_name, self.src, self.to,
                             None if owner is None else str(owner), None,
                             new.get(self.version) if self.version else None,
                             at, event_id, None, None, None))
        if self.public is not None:
            new = self.public(new)
        return _new(TransitionResult, (True, None, (), self.src, self.to, new, event))

    def refused(self, rows: list[list[tuple[Any, ...]]]) -> TransitionResult | None:
        """A refusal of a move checked for its state only, from the read sent with the
        write: no row is RECORD_NOT_FOUND; a row is STATE_MISMATCH, in the state it is in
        now (another state, or it changed between the write and the read), as the general
        path explains it. None: any other lane takes the general path."""
        if not self.state_only or len(rows) < 2:
            return None
        if not rows[1]:
            return _new(TransitionResult, (False, Reason.RECORD_NOT_FOUND,
                                           (Reason.RECORD_NOT_FOUND,), None, None, None, None))
        cur = dict(zip(self.read_columns, rows[1][0], strict=True))
        state = self.state_of(cur)
        if self.public is not None:
            cur = self.public(cur)
        return _new(TransitionResult, (False, Reason.STATE_MISMATCH, (Reason.STATE_MISMATCH,),
                                       state, state, cur, None))


# the general path's explanation of a lane's refusal: (call, invariant, rows read with it)
Explain = Callable[[LaneCall, bool, "Rows | None"], Op[TransitionResult]]


def drive_lane(store: SyncRunner, call: LaneCall) -> TransitionResult:
    """A plain move's one statement; a refusal is explained by the general path."""
    try:
        rows = store.run(call.batch)
    except InvariantViolation:
        return drive(store, call.lane.explain(call, True, None))
    result, rows = call.lane.finish(call, rows)
    if result is None:
        return drive(store, call.lane.explain(call, False, rows))
    return result


async def adrive_lane(store: AsyncRunner, call: LaneCall) -> TransitionResult:
    try:
        rows = await store.run(call.batch)
    except InvariantViolation:
        return await adrive(store, call.lane.explain(call, True, None))
    result, rows = call.lane.finish(call, rows)
    if result is None:
        return await adrive(store, call.lane.explain(call, False, rows))
    return result
