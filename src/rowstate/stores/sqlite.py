"""SQLite (stdlib ``sqlite3``): real autocommit (``isolation_level=None``), WAL, a busy
timeout, one connection per thread, and ``BEGIN IMMEDIATE`` for every multi-statement
write: a deferred transaction that upgrades to a write fails at once with SQLITE_BUSY,
ignoring the timeout. ``sqlite://`` (memory) is one shared connection behind a lock.

This module imports no PostgreSQL driver: a SQLite-only program never loads psycopg.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from ..dialects import STORE_NOW, canonical_time
from ..errors import InvariantViolation, StoreError, ValidationError
from ..protocol import Batch, Door
from ..units import AsyncUnit, Unit
from .common import (
    Raw,
    Rows,
    StatementCounter,
    ThreadConnections,
    _anested,
    _aunit_scope,
    _nested,
    _no_script_in_unit,
    _unit_scope,
    _unit_var,
)


def _sqlite_error(exc: BaseException) -> Exception:
    """A driver error as the engine's: the one translation of every SQLite call."""
    if isinstance(exc, sqlite3.IntegrityError):
        if "UNIQUE" in str(exc):
            return InvariantViolation(str(exc), index=None)
        return StoreError(str(exc))
    if isinstance(exc, sqlite3.InterfaceError | OverflowError | UnicodeEncodeError):
        return ValidationError(f"SQLite refused a value: {exc}")
    return StoreError(str(exc))


def _sqlite_raw(conn: sqlite3.Connection, counter: StatementCounter) -> Raw:
    def raw(sql: str, params: Any) -> tuple[list[Any], Any]:
        try:
            cur = conn.execute(sql, _with_now(params) if params else ())
            rows = cur.fetchall()
        except (sqlite3.Error, OverflowError, UnicodeEncodeError) as exc:
            raise _sqlite_error(exc) from exc
        counter.statements += 1
        desc = cur.description
        return rows, [d[0] for d in desc] if desc else None
    return raw




class SQLiteStore(StatementCounter):
    dialect = "sqlite"

    def __init__(self, path: str | None = None, *, busy_timeout: float = 30.0,
                 synchronous: str = "NORMAL") -> None:
        super().__init__()
        self.path = path or ":memory:"
        self.memory = self.path == ":memory:"
        self.busy_timeout = busy_timeout
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValidationError(f"synchronous={synchronous!r}")
        self.synchronous = synchronous.upper()
        self._guard = threading.Lock()  # the shared memory connection; scripts
        self._threads = ThreadConnections(self._open)
        self._shared: sqlite3.Connection | None = self._open() if self.memory else None
        self._unit: ContextVar[Unit | None] = _unit_var(self)

    def _open(self) -> sqlite3.Connection:
        """A new connection, its PRAGMAs run: the first statements that touch the file, so
        a path that is a directory, a file that is not a database or a database locked
        past the busy timeout fail here, translated like any statement's error."""
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=self.busy_timeout)
            if not self.memory:
                conn.execute("PRAGMA journal_mode=WAL").fetchall()
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise StoreError(f"SQLite could not open {self.path!r}: {exc}") from exc
        return conn

    def connection(self) -> sqlite3.Connection:
        if self._shared is not None:
            return self._shared
        return self._threads.get()

    def run(self, batch: Batch) -> Rows:
        unit = self._unit.get()
        if unit is not None:
            return unit.run(batch)
        if self._shared is not None:
            with self._guard:
                return self._run(self._shared, batch)
        conn = getattr(self._threads._local, "conn", None) or self._threads.get()
        statements = batch.statements
        if len(statements) == 1 and not batch.transaction:  # most calls: one statement
            sql, params = statements[0]
            try:
                rows = conn.execute(sql, _with_now(params) if STORE_NOW in params
                                    else params).fetchall()
                self.statements += 1
                if rows or batch.otherwise is None:
                    return [rows]
                return self._explained(conn, batch, [rows])
            except (sqlite3.Error, OverflowError, UnicodeEncodeError) as exc:
                raise _sqlite_error(exc) from exc
        return self._run(conn, batch)

    @contextlib.contextmanager
    def unit_connection(self, *, dedicated: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection a unit of work writes on: the shared memory one (its lock held
        for the whole unit), this thread's, or (``dedicated``) one of its own."""
        if self._shared is not None:
            with self._guard:
                yield self._shared
        elif dedicated:
            conn = self._open()
            try:
                yield conn
            finally:
                conn.close()
        else:
            yield self._threads.get()

    @contextlib.contextmanager
    def atomic(self, *, door: Door | None = None) -> Iterator[Unit]:
        """A unit of work (:mod:`rowstate.units`); nested, a savepoint."""
        current = self._unit.get()
        if current is not None:
            with _nested(current, door) as unit:
                yield unit
            return
        with self.unit_connection() as conn:
            unit = Unit("sqlite", _sqlite_raw(conn, self), door, json.dumps)
            with _unit_scope(self._unit, unit, "BEGIN IMMEDIATE"):
                yield unit

    def _run(self, conn: sqlite3.Connection, batch: Batch) -> Rows:
        try:
            if not batch.transaction:
                self.statements += len(batch.statements)
                out = [conn.execute(sql, _with_now(params)).fetchall()
                       for sql, params in batch.statements]
                return self._explained(conn, batch, out)
            conn.execute("BEGIN IMMEDIATE")
            try:
                # one clock reading for the whole write, taken once the write lock is held
                now = canonical_time(datetime.now(UTC))
                out = self._explained(conn, batch, [
                    conn.execute(sql, _with_now(params, now)).fetchall()
                    for sql, params in batch.statements], now)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self.statements += len(batch.statements) + 2
            return out
        except (sqlite3.Error, OverflowError, UnicodeEncodeError) as exc:
            raise _sqlite_error(exc) from exc

    def _explained(self, conn: sqlite3.Connection, batch: Batch, out: Rows,
                   now: str | None = None) -> Rows:
        """``out`` and, when its last statement returned no row, the rows of the batch's
        ``otherwise`` (the read explaining a refused write), on the same connection."""
        if batch.otherwise is not None and not out[-1]:
            sql, params = batch.otherwise
            out.append(conn.execute(sql, _with_now(params, now)).fetchall())
            self.statements += 1
        return out

    def execute_script(self, sql: str) -> None:
        _no_script_in_unit(self._unit)
        conn = self.connection()
        with self._guard:
            try:
                conn.executescript(sql)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite script failed: {exc}") from exc

    def close(self) -> None:
        self._threads.close()
        if self._shared is not None:
            self._shared.close()
            self._shared = None


def _with_now(params: Sequence[Any], now: str | None = None) -> Sequence[Any]:
    """Fill STORE_NOW placeholders with this host's clock (SQLite has no server clock)."""
    if STORE_NOW not in params:  # a C-level scan: _StoreNow compares by identity
        return params
    stamp = now or canonical_time(datetime.now(UTC))
    return [stamp if p is STORE_NOW else p for p in params]


class AsyncSQLiteStore:
    """SQLite for asyncio: the sync store on a small worker pool, so a busy wait for the
    write lock never blocks the event loop."""

    dialect = "sqlite"

    def __init__(self, path: str | None = None, *, workers: int = 4, **kw: Any) -> None:
        self.sync = SQLiteStore(path, **kw)
        self._pool = ThreadPoolExecutor(1 if self.sync.memory else workers,
                                        thread_name_prefix="rowstate-sqlite")
        self._unit: ContextVar[AsyncUnit | None] = _unit_var(self)

    @property
    def statements(self) -> int:
        return self.sync.statements

    async def run(self, batch: Batch) -> Rows:
        unit = self._unit.get()
        if unit is not None:
            return await unit.run(batch)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.sync.run, batch)

    @contextlib.asynccontextmanager
    async def atomic(self, *, door: Door | None = None) -> AsyncIterator[AsyncUnit]:
        """A unit of work on a thread of its own (it holds the write lock throughout, so
        it must not wait behind the store's workers), with a connection of its own."""
        current = self._unit.get()
        if current is not None:
            async with _anested(current, door) as unit:
                yield unit
            return
        loop = asyncio.get_running_loop()
        thread = ThreadPoolExecutor(1, thread_name_prefix="rowstate-sqlite-unit")
        opened = self.sync.unit_connection(dedicated=True)
        try:
            conn = await loop.run_in_executor(thread, opened.__enter__)
            try:
                sync_raw = _sqlite_raw(conn, self.sync)

                async def raw(sql: str, params: Any) -> tuple[list[Any], Any]:
                    return await loop.run_in_executor(thread, sync_raw, sql, params)

                unit = AsyncUnit("sqlite", raw, door, json.dumps)
                async with _aunit_scope(self._unit, unit, "BEGIN IMMEDIATE"):
                    yield unit
            finally:
                await loop.run_in_executor(thread, opened.__exit__, None, None, None)
        finally:
            thread.shutdown(wait=False)

    async def execute_script(self, sql: str) -> None:
        _no_script_in_unit(self._unit)
        await asyncio.get_running_loop().run_in_executor(self._pool, self.sync.execute_script,
                                                         sql)

    async def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.sync.close()
