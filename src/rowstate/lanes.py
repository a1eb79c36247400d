"""Lanes: a plain move's one statement, bound and judged without a generator.

Most calls name only a key, a target, the one state they expect the row in and perhaps an
owner (a leased edge's finalize: the key and the fence). Such a move is the hand-written
``UPDATE ... RETURNING`` (on PostgreSQL with its event row, the hand-written CTE), and all
its parameters but a handful are constants of the move. A :class:`Lane` holds that
statement with its constants already in place, so a call costs a key check, one list copy
with the key (and owner, fence, clock) written in, the round trip and the result.

The front ends run a lane without driving a generator (:func:`rowstate.drive.drive_lane`):
at SQLite's 12 us per statement, the generator frames, the batch and the values dict of
the general path are a fifth of a call. A refused or failed lane falls back to the general
path's explanation (:meth:`CoreBase._lane_refused`): the lane only answers "applied", so it
cannot disagree with the explained path on a refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from .compiler import Batch, CasPlan, Statement
from .conditions import Const
from .outbox import row_key
from .results import Event, Reason, TransitionResult

if TYPE_CHECKING:
    from .base import CoreBase, PlainMove

# what a dynamic parameter of a lane reads (a key column's index is >= 0)
_NOW, _OWNER, _FENCE, _ROW_KEY, _EV_OWNER, _HOLDER = -1, -2, -3, -4, -5, -6
_DYNAMIC = {"now": _NOW, "owner": _OWNER, "fence": _FENCE, "row_key": _ROW_KEY,
            "ev_owner": _EV_OWNER, "holder": _HOLDER}
_NAMED = -10  # and below: the template's own named slots


class Template:
    """A statement with its constants in place: binding it copies one list and writes in
    the call's own values (key, clock, owner, fence, holder) where they go."""

    __slots__ = ("dynamic", "keys_only", "now_value", "one_key_at", "params", "sql")

    def __init__(self, sql: str, params: list[Any], dynamic: tuple[tuple[int, int], ...],
                 now_value: Callable[[], Any]) -> None:
        self.sql, self.params, self.dynamic, self.now_value = sql, params, dynamic, now_value
        # a read by key: its parameters are the key itself
        self.keys_only = dynamic == tuple((i, i) for i in range(len(params)))
        # a plain move on a one-column key: the key is its only value (the hottest bind)
        self.one_key_at = dynamic[0][0] if len(dynamic) == 1 and dynamic[0][1] == 0 else -1

    @classmethod
    def of(cls, stmt: Statement, static: dict[str, Any], now_value: Callable[[], Any],
           clock: bool = False, named: tuple[str, ...] = ()) -> Template | None:
        """None when the statement names a value a template does not fill (a guard's, a
        JSON slot the dialects adapt): the general path. Without a caller's ``clock`` the
        "now" parameter is a constant (SQLite's store fills it in). ``named``: the call's
        own slots beyond the usual ones, given to :meth:`bind` in this order."""
        params: list[Any] = []
        dynamic: list[tuple[int, int]] = []
        for pos, p in enumerate(stmt.params):
            if isinstance(p, Const):
                params.append(p.value)
            elif p.json:
                return None
            elif p.name == "now" and not clock:
                params.append(now_value())
            elif p.name in named:
                params.append(None)
                dynamic.append((pos, _NAMED - named.index(p.name)))
            elif p.name in _DYNAMIC:  # before the constants: ev_owner's is a default
                params.append(None)
                dynamic.append((pos, _DYNAMIC[p.name]))
            elif p.name in static:
                params.append(static[p.name])
            elif p.name.startswith("k") and p.name[1:].isdigit():
                params.append(None)
                dynamic.append((pos, int(p.name[1:])))
            else:
                return None
        return cls(stmt.sql, params, tuple(dynamic), now_value)

    def bind(self, kv: tuple[Any, ...], owner: Any = None, fence: Any = None,
             holder: Any = None, named: tuple[Any, ...] = ()) -> list[Any]:
        if self.keys_only:
            return list(kv)
        params = self.params.copy()
        if self.one_key_at >= 0:
            params[self.one_key_at] = kv[0]
            return params
        for pos, what in self.dynamic:
            if what >= 0:
                params[pos] = kv[what]
            elif what == _NOW:
                params[pos] = self.now_value()
            elif what == _OWNER:
                params[pos] = owner
            elif what == _FENCE:
                params[pos] = fence
            elif what == _ROW_KEY:
                params[pos] = row_key(kv)
            elif what == _HOLDER:
                params[pos] = holder
            elif what <= _NAMED:
                params[pos] = named[_NAMED - what]
            else:
                params[pos] = None if owner is None else str(owner)
        return params



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

    __slots__ = ("calls", "clock", "columns", "combined", "contended", "edge_name", "machine",
                 "move", "ncols", "picks", "plan", "read", "read_columns", "refusals", "src",
                 "state_of", "state_only", "to", "version", "write")

    def __init__(self, core: CoreBase, move: PlainMove, plan: CasPlan, src: str,
                 write: Template, read: Template, state_only: bool,
                 combined: Template | None = None) -> None:
        self.move = move
        self.plan = plan
        self.src = src
        self.to = move.to
        self.edge_name = move.edge.name if move.edge is not None else core._edge_name(
            src, move.to)
        self.write = write
        self.read = read  # the read that explains a refusal, sent with the write
        self.state_only = state_only
        self.state_of: Callable[[Any], str | None] = core.state_of
        self.columns = plan.columns
        self.read_columns = core.columns
        self.ncols = len(plan.columns)
        self.version = core.b.version
        self.machine = core.m.name
        self.clock: Callable[[], datetime] | None = core.clock
        # under contention (see finish): the write and its read as one statement
        self.combined = combined
        self.contended = False
        self.calls = self.refusals = 0
        # where the written row's columns are in the combined statement's row
        self.picks = tuple(1 + core.columns.index(c) for c in plan.columns)

    @classmethod
    def build(cls, core: CoreBase, move: PlainMove, plan: CasPlan, src: str) -> Lane | None:
        """The lane of ``plan`` (a one-state move), or None when its statement is not the
        one-statement fast CAS or names a value a lane does not fill (the general path)."""
        if not plan.fast:
            return None
        write = core._template(plan.main, move.static)
        # a move checked for its state only is explained without a clock (see refused)
        state_only = (len(plan.checks) == 1 and len(move.froms) == 1
                      and plan.checks[0].category == Reason.STATE_MISMATCH)
        read = core._row_template if state_only else core._read_template
        if write is None or read is None:
            return None
        combined = None
        if state_only and core.d.writable_ctes and not core._event_table:
            combined = core._template(core.c.written_or_read(plan), move.static)
        return cls(core, move, plan, src, write, read, state_only, combined)

    def call(self, kv: tuple[Any, ...], owner: Any, fence: Any) -> LaneCall:
        if self.contended:
            both = self.combined
            assert both is not None
            return _new(LaneCall, (self, kv, owner, fence, _new(Batch, (
                ((both.sql, both.bind(kv, owner, fence)),), False, None)), True))
        write, read = self.write, self.read
        # tuple.__new__: a named tuple's own __new__ is a Python frame, paid per call
        return _new(LaneCall, (self, kv, owner, fence, _new(Batch, (
            ((write.sql, write.bind(kv, owner, fence)),), False,
            (read.sql, read.bind(kv, owner, fence)))), False))

    def finish(self, call: LaneCall, rows: list[list[tuple[Any, ...]]],
               ) -> tuple[TransitionResult | None, list[list[tuple[Any, ...]]]]:
        """The result (None: the general path explains the refusal from the rows returned
        with it), and the rows in the write-then-read form either way."""
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
        """The result of an applied write; None when the write was refused."""
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
        event = _new(Event, (self.machine, call.kv, self.edge_name, self.src, self.to,
                             None if owner is None else str(owner), None,
                             new.get(self.version) if self.version else None,
                             datetime.now(UTC) if clock is None else clock(), event_id, None))
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
        return _new(TransitionResult, (False, Reason.STATE_MISMATCH, (Reason.STATE_MISMATCH,),
                                       state, state, cur, None))


_new = tuple.__new__
