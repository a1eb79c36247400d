"""The context every part of a core reads: one binding in one dialect, and its caches.

A :class:`Context` is built once per core and shared by its parts (:mod:`rowstate.core`).
It holds what the parts have in common and nothing they decide: the binding, its machine,
the dialect, the compiler, the clock, the front end driving the core (handed to acts), the
ONE plan cache (compiled statements per shape, for every part) and the memo dicts of pure
answers, plus the few readings every part makes alike (the clock, a row's state, a row seen
by the Python reader of the conditions).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..binding import Binding
from ..compiler import CasPlan, Compiler, Statement
from ..conditions import RowView, lookup
from ..dialects import STORE_NOW, Dialect
from ..protocol import Door
from ..results import Event
from ..specs import NOW
from .lane import Lane, PlainMove
from .templates import Template


class Context:
    """One binding in one dialect: what each part of a core is built from."""

    def __init__(self, binding: Binding, dialect: Dialect,
                 clock: Callable[[], datetime] | None = None,
                 door: Door | None = None) -> None:
        self.binding = binding
        self.machine = binding.machine
        self.dialect = dialect
        self.clock = clock
        self.door = door  # the front end driving this core (handed to acts)
        self.compiler = Compiler(binding, dialect)
        self.columns = self.compiler.columns
        self.key_index = self.columns.index(binding.key[0])
        self.key_slots = tuple(f"k{i}" for i in range(len(binding.key)))
        # do statements take "now" as a parameter (a caller's clock; SQLite, which has no
        # server clock and whose store fills in its host's, once per write)?
        self.fills_now = clock is not None or dialect.now_is_param
        self.read = self.compiler.read()  # the row by its key, with the clock
        self.time_columns = tuple(c for c in self.columns if c in time_columns(binding))
        # SQLite keeps times and JSON documents as text: (column, decoder) for each column a
        # row is decoded in before a caller sees it (PostgreSQL's driver decodes both)
        self.decoders: tuple[tuple[str, Callable[[str], Any]], ...] = () if (
            dialect.decodes_values) else (
            *((c, read_utc) for c in self.time_columns),
            *((c, json.loads) for c in binding.json_columns if c in self.columns))
        self.event_table = tuple(binding.events.split(".")) if binding.events else None
        # several from-states are written as the fast single-state CAS (see Cas.guessing)
        # where that CAS is one statement: with writable CTEs (PostgreSQL) always, else
        # (SQLite) without an event row
        self.fast_from_each = dialect.writable_ctes or not self.event_table
        # the one plan cache: compiled statements and plans per shape (plans live as long
        # as the core, so their id() can key the memos below)
        self.plans: dict[tuple[Any, ...], Any] = {}
        self.last_from: dict[int, str] = {}  # id(several-state plan) -> the state it last left
        self.single_plans: dict[int, dict[str, CasPlan]] = {}  # -> its one-state plans
        self.plain_moves: dict[tuple[Any, ...], PlainMove] = {}
        self.direct_lanes: dict[tuple[str, Any], Lane | None] = {}
        self.returning_memo: dict[tuple[Any, ...], tuple[str, ...]] = {}
        # id(plain claim's plan) -> (its write, its read) as templates; None: general path
        self.claim_lanes: dict[int, tuple[Template | None, Template | None]] = {}
        # pure functions of the (frozen) machine, memoised: validation still runs on a miss
        self.froms_memo: dict[tuple[str, Any], tuple[str, ...]] = {}
        self.edge_names: dict[tuple[str, str], str] = {}

    # -- the clock -----------------------------------------------------------------------

    def now(self, raw: Any) -> datetime:
        """The instant a write or read happened: the caller's clock, else the database's
        reading that came back with the rows (the applied lane path brings none)."""
        if self.clock is not None:
            return self.clock()
        if raw is None:
            return datetime.now(UTC)
        parsed = self.dialect.parse_time(raw)
        return parsed if parsed is not None else datetime.now(UTC)

    def now_value(self) -> Any:
        """The "now" parameter: a caller's clock, or SQLite's placeholder for its store's
        host clock; PostgreSQL statements read ``now()`` on the server instead."""
        return self.dialect.db_time(self.clock()) if self.clock is not None else STORE_NOW

    def clock_values(self) -> dict[str, Any]:
        return {"now": self.now_value()} if self.fills_now else {}

    # -- rows ----------------------------------------------------------------------------

    def state_of(self, row: Mapping[str, Any]) -> str | None:
        got = lookup(self.binding.state_ref, row)
        return got if isinstance(got, str) else None

    def row(self, raw: tuple[Any, ...]) -> dict[str, Any]:
        """A row read in column order (a clock reading may follow the columns)."""
        return dict(zip(self.columns, raw[: len(self.columns)], strict=True))

    def public(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` as a caller is handed it: times as aware datetimes and JSON documents
        decoded on both databases. The engine itself keeps reading the row as stored (a
        lease's claim time is a fence compared with the stored text)."""
        if not self.decoders:
            return row
        out = dict(row)
        for column, decode in self.decoders:
            value = out.get(column)
            if value.__class__ is str:
                # text written by someone else (not a time): handed over as stored
                with contextlib.suppress(ValueError):
                    out[column] = decode(value)
        return out

    def view(self, row: Mapping[str, Any], values: dict[str, Any], raw_now: Any) -> RowView:
        """``row`` as the Python reader of the conditions sees it, at the clock read."""
        return RowView(row, values, self.now(raw_now), self.dialect.parse_time,
                       self.dialect.load_json)

    def edge_name(self, src: str, to: str) -> str:
        """The edge a move from ``src`` to ``to`` takes: the plain one, if there is one."""
        name = self.edge_names.get((src, to))
        if name is None:
            edges = self.machine.edges_between(src, to)
            pure = [e for e in edges if not e.lease]
            name = (pure or list(edges))[0].name
            self.edge_names[(src, to)] = name
        return name

    def event_of(self, r: tuple[Any, ...], key: tuple[Any, ...] | None = None) -> Event:
        """An event from a row read in :data:`~rowstate.outbox.EVENT_READ` order."""
        kv = tuple(json.loads(r[2])) if key is None else key
        return Event(r[1], kv, r[3], r[4], r[5], r[6], self.dialect.load_json(r[7]), r[8],
                     self.dialect.parse_time(r[9]), r[0], None, r[10], r[11])

    # -- templates -----------------------------------------------------------------------

    def template(self, stmt: Statement, static: dict[str, Any],
                 named: tuple[str, ...] = ()) -> Template | None:
        """``stmt`` as a template (:class:`~rowstate.core.templates.Template`) for this
        core's clock."""
        return Template.of(stmt, static, self.now_value, self.clock is not None, named)

    @functools.cached_property
    def read_template(self) -> Template | None:
        """The read explaining a refusal (:attr:`read`), sent with a templated write."""
        return self.template(self.read, {})

    @functools.cached_property
    def row_template(self) -> Template | None:
        """The row by its key, without a clock: what a move checked for its state only
        needs to explain a refusal."""
        return self.template(self.compiler.read(clock=False), {})


def read_utc(text: str) -> datetime:
    """A time SQLite stores as text (:func:`~rowstate.dialects.base.canonical_time`, or
    an ISO text an application wrote): aware, in UTC."""
    at = datetime.fromisoformat(text)
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def time_columns(binding: Binding) -> frozenset[str]:
    """The columns that hold times: the engine's own (leases, claims, timers, notices,
    entry writes of NOW) and those declared as timestamps."""
    b = binding
    names: set[str] = set()
    if b.lease is not None:
        names |= {c for c in (b.lease.at, b.lease.failed_at) if c}
    if b.finalization is not None:
        names.add(b.finalization.at)
    names |= {t.due for t in b.timers}
    names |= {c for n in b.notices for c in (n.due, n.claim)}
    names |= {c for writes in b.on_enter.values() for c, v in writes.items() if v is NOW}
    names |= {c for c, declared in b.column_types.items()
              if declared.split()[:1] and declared.split()[0].upper().startswith(
                  ("TIMESTAMP", "DATETIME"))}
    return frozenset(names)
