"""Stores run statements; they decide nothing.

* SQLite (stdlib ``sqlite3``): real autocommit (``isolation_level=None``), WAL, a busy
  timeout, one connection per thread, and ``BEGIN IMMEDIATE`` for every multi-statement
  write: a deferred transaction that upgrades to a write fails at once with SQLITE_BUSY,
  ignoring the timeout. ``sqlite://`` (memory) is one shared connection behind a lock.
* PostgreSQL (psycopg 3 + psycopg_pool): autocommit connections from a pool (or, with
  ``per_thread=True``, one kept per calling thread); a batch marked ``transaction`` runs
  inside one.

Driver errors are translated here: a UNIQUE violation becomes :class:`InvariantViolation`
(reported as reason INVARIANT), a dead connection :class:`ConnectionLostError` (the write
may have landed), a statement the server cancelled and rolled back
:class:`StatementCancelled` (it did not land), a value the database (or the driver, e.g.
text that is not valid UTF-8) refuses :class:`ValidationError`, any other
:class:`StoreError`; the driver's error is kept as ``__cause__``. That holds for opening a
connection and for scripts too: a caller only ever sees a :class:`RowstateError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import sqlite3
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar, overload
from urllib.parse import unquote

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .compiler import Batch
from .dialects import STORE_NOW, canonical_time
from .errors import (
    ConnectionLostError,
    InvariantViolation,
    StatementCancelled,
    StoreError,
    UnitRefusedError,
    ValidationError,
)
from .units import AsyncUnit, Unit

Rows = list[list[tuple[Any, ...]]]


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class StatementCounter:
    """Counts statements sent to the database: the proof of "one round trip"."""

    def __init__(self) -> None:
        self.statements = 0


class ThreadConnections(Generic[C]):
    """One connection per calling thread, opened on first use (and again once ``usable``
    says it no longer is); ``close()`` closes every one it opened."""

    def __init__(self, open_: Callable[[], C],
                 usable: Callable[[C], bool] | None = None) -> None:
        self._open: Callable[[], C] = open_
        self._usable: Callable[[C], bool] | None = usable
        self._local = threading.local()
        self._opened: list[C] = []
        self._guard = threading.Lock()

    def get(self) -> C:
        conn: C | None = getattr(self._local, "conn", None)
        if conn is None or (self._usable is not None and not self._usable(conn)):
            conn = self._open()
            self._local.conn = conn
            with self._guard:
                if self._usable is not None:  # forget the ones that went bad
                    self._opened = [c for c in self._opened if self._usable(c)]
                self._opened.append(conn)
        return conn

    def opened(self) -> list[C]:
        with self._guard:
            return list(self._opened)

    def close(self) -> None:
        with self._guard:
            conns, self._opened = self._opened, []
        for conn in conns:
            conn.close()
        self._local = threading.local()


# -- units of work (rowstate.units): the flow both twins of every store share -------------

Raw = Callable[[str, Any], tuple[list[Any], Any]]


def _unit_var(store: object) -> ContextVar[Any]:
    return ContextVar(f"rowstate-unit-{id(store)}", default=None)


@contextlib.contextmanager
def _nested(unit: Unit, door: Any) -> Iterator[Unit]:
    """A unit opened while one is open on the same store: a savepoint of it."""
    previous = unit.door
    if door is not None:
        unit.door = door
    try:
        with unit.savepoint():
            yield unit
    finally:
        unit.door = previous


@contextlib.contextmanager
def _unit_scope(var: ContextVar[Any], unit: Unit, begin: str) -> Iterator[Unit]:
    """BEGIN, make the unit the store's current one, COMMIT (ROLLBACK on an exception or
    after a refused hold/fence), then the after-commit callbacks."""
    raw = unit._raw
    raw(begin, ())
    token = var.set(unit)
    committed = False
    try:
        yield unit
        if unit.refused is None:
            raw("COMMIT", ())
            committed = True
        else:
            raw("ROLLBACK", ())
    except BaseException:
        with contextlib.suppress(Exception):
            raw("ROLLBACK", ())
        raise
    finally:
        var.reset(token)
        unit.closed = True
    if committed:
        for callback in unit._after_commit:
            callback()


@contextlib.asynccontextmanager
async def _anested(unit: AsyncUnit, door: Any) -> AsyncIterator[AsyncUnit]:
    previous = unit.door
    if door is not None:
        unit.door = door
    try:
        async with unit.savepoint():
            yield unit
    finally:
        unit.door = previous


@contextlib.asynccontextmanager
async def _aunit_scope(var: ContextVar[Any], unit: AsyncUnit,
                       begin: str) -> AsyncIterator[AsyncUnit]:
    raw = unit._raw
    await raw(begin, ())
    token = var.set(unit)
    committed = False
    try:
        yield unit
        if unit.refused is None:
            await raw("COMMIT", ())
            committed = True
        else:
            await raw("ROLLBACK", ())
    except BaseException:
        with contextlib.suppress(Exception):
            await raw("ROLLBACK", ())
        raise
    finally:
        var.reset(token)
        unit.closed = True
    if committed:
        for callback in unit._after_commit:
            got = callback()
            if asyncio.iscoroutine(got):
                await got


def _no_script_in_unit(var: ContextVar[Any]) -> None:
    if var.get() is not None:
        raise UnitRefusedError("execute_script cannot run inside a unit of work (SQLite's "
                               "executescript commits first)", reason="SCRIPT_IN_UNIT")


# -- SQLite --------------------------------------------------------------------------------


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
        return self._run(self._threads.get(), batch)

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
    def atomic(self, *, door: Any = None) -> Iterator[Unit]:
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
                return [conn.execute(sql, _with_now(params)).fetchall()
                        for sql, params in batch.statements]
            conn.execute("BEGIN IMMEDIATE")
            try:
                # one clock reading for the whole write, taken once the write lock is held
                now = canonical_time(datetime.now(UTC))
                out = [conn.execute(sql, _with_now(params, now)).fetchall()
                       for sql, params in batch.statements]
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self.statements += len(batch.statements) + 2
            return out
        except (sqlite3.Error, OverflowError, UnicodeEncodeError) as exc:
            raise _sqlite_error(exc) from exc

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
    async def atomic(self, *, door: Any = None) -> AsyncIterator[AsyncUnit]:
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


# -- PostgreSQL ----------------------------------------------------------------------------


def _translate(exc: psycopg.Error | UnicodeEncodeError | RecursionError) -> Exception:
    if isinstance(exc, UnicodeEncodeError):  # e.g. a lone surrogate: never sent, nothing ran
        return ValidationError(f"a text value is not valid UTF-8: {exc}")
    if isinstance(exc, RecursionError):
        # psycopg decoding a jsonb value nested deeper than Python's recursion limit, which
        # the engine never writes (docs/values.md) but another writer of the row may have.
        # The rows came back: a write outside a transaction has landed (a run()'s release
        # after it is refused by the fence, harmlessly)
        return StoreError(f"a JSON value read is nested too deep to decode (a write may "
                          f"have been applied): {exc}")
    if isinstance(exc, pg_errors.UniqueViolation):
        return InvariantViolation(str(exc), index=exc.diag.constraint_name)
    if isinstance(exc, pg_errors.DataError | pg_errors.InvalidTextRepresentation):
        return ValidationError(f"PostgreSQL refused a value: {exc}")
    if isinstance(exc, pg_errors.UndefinedFunction | pg_errors.DatatypeMismatch):
        # the SQL text is ours, its names checked: a type clash comes from a value's type
        # (e.g. an int key for a text column: "operator does not exist: text = bigint")
        return ValidationError(f"PostgreSQL refused a value of this type: {exc}")
    if isinstance(exc, pg_errors.QueryCanceled | pg_errors.LockNotAvailable
                  | pg_errors.SerializationFailure | pg_errors.DeadlockDetected):
        # OperationalErrors too, but the server answered: the statement (and its
        # transaction) rolled back, nothing landed; checked before the catch-all below
        return StatementCancelled(f"the database cancelled the statement: {exc}")
    if isinstance(exc, psycopg.OperationalError | pg_errors.AdminShutdown):
        return ConnectionLostError(f"connection lost: {exc}")
    return StoreError(str(exc))


def _has_rows(cur: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> bool:
    """Did the statement return rows? Cheaper than ``cur.description``, which builds a
    Column object per column on every call."""
    res = cur.pgresult
    return res is not None and res.status == pq.ExecStatus.TUPLES_OK


# One cursor per connection, reused by every statement run on it: ``conn.execute()``
# builds a cursor (and its adapters map) per call: 8 us (quiet) to 19 us (loaded) of client
# CPU per statement on this 2-core machine, as much as the engine's own Python (bench/).
_cursors: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


@overload
def _cursor(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]: ...
@overload
def _cursor(conn: psycopg.AsyncConnection[Any]) -> psycopg.AsyncCursor[Any]: ...
def _cursor(conn: Any) -> Any:
    cur = _cursors.get(conn)
    if cur is None or cur.closed:
        cur = _cursors[conn] = conn.cursor()
    return cur


def _execute(conn: psycopg.Connection[Any], statements: Sequence[tuple[str, Sequence[Any]]],
             ) -> Rows:
    cur = _cursor(conn)
    out: Rows = []
    for sql, params in statements:
        cur.execute(sql, params)
        out.append(cur.fetchall() if _has_rows(cur) else [])
    return out


async def _aexecute(conn: psycopg.AsyncConnection[Any],
                    statements: Sequence[tuple[str, Sequence[Any]]]) -> Rows:
    cur = _cursor(conn)
    out: Rows = []
    for sql, params in statements:
        await cur.execute(sql, params)
        out.append(await cur.fetchall() if _has_rows(cur) else [])
    return out


def _pg_raw(conn: psycopg.Connection[Any], counter: StatementCounter) -> Raw:
    def raw(sql: str, params: Any) -> tuple[list[Any], Any]:
        cur = _cursor(conn)
        try:
            cur.execute(sql, params or None)
            if not _has_rows(cur):
                return [], None
            rows = cur.fetchall()
        except (psycopg.Error, UnicodeEncodeError) as exc:
            raise _translate(exc) from exc
        finally:
            counter.statements += 1
        return rows, [c.name for c in cur.description or ()]
    return raw


def _apg_raw(conn: psycopg.AsyncConnection[Any], counter: Any) -> Callable[..., Any]:
    async def raw(sql: str, params: Any) -> tuple[list[Any], Any]:
        cur = _cursor(conn)
        try:
            await cur.execute(sql, params or None)
            if not _has_rows(cur):
                return [], None
            rows = await cur.fetchall()
        except (psycopg.Error, UnicodeEncodeError) as exc:
            raise _translate(exc) from exc
        finally:
            counter.statements += 1
        return rows, [c.name for c in cur.description or ()]
    return raw


def _begin(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> str:
    """An autocommit connection needs an explicit BEGIN; on a caller's non-autocommit one
    the driver opens the transaction itself (an empty statement is not sent)."""
    return "BEGIN" if conn.autocommit else "SELECT 1"


def _spoke_or_hung_up(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle pooled connection needs a real check: it is known broken, or its
    socket is readable although no query is in flight, i.e. the server sent something
    unasked (the notice of a terminated backend, a restart's hang-up; or a NOTIFY)."""
    if conn.broken or conn.closed:
        return True
    try:
        fd = conn.fileno()
        if hasattr(select, "poll"):  # select() refuses descriptors past FD_SETSIZE (1024)
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


def _check_connection(conn: psycopg.Connection[Any]) -> None:
    """The pool's ``check``: a connection the server dropped (a restart, a terminated
    backend) is found and replaced at checkout, so the caller's call does not fail.

    ``ConnectionPool.check_connection`` on every checkout is a round trip: measured here it
    took a pooled ``SELECT 1`` from 8,584 to 3,859 calls/s, while the socket test is ~1 us;
    so the round trip is paid only when the socket says the server spoke or hung up.
    """
    if _spoke_or_hung_up(conn):
        ConnectionPool.check_connection(conn)


async def _acheck_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """:func:`_check_connection` for the asyncio pool."""
    if _spoke_or_hung_up(conn):
        await AsyncConnectionPool.check_connection(conn)


class PostgresStore(StatementCounter):
    """PostgreSQL through a psycopg_pool pool (the default), or with ``per_thread=True``
    one autocommit connection per calling thread, kept across calls.

    A pool checkout and return is ~15% of the client CPU of a transition on loopback
    (bench/, sampled with py-spy); a fixed set of worker threads skips it with
    ``per_thread``, as a hand-written worker holding its own connection does. A thread
    whose connection breaks gets a new one on its next call; ``close()`` closes them all.
    """

    dialect = "postgresql"

    def __init__(self, conninfo: str = "", *, pool: ConnectionPool[Any] | None = None,
                 min_size: int = 1, max_size: int = 8, per_thread: bool = False) -> None:
        super().__init__()
        if per_thread and pool is not None:
            raise ValidationError("per_thread=True opens its own connections: pass no pool")
        self.own_pool = pool is None and not per_thread
        self.pool: ConnectionPool[Any] | None = pool  # None: per_thread
        if self.own_pool:
            self.pool = ConnectionPool(
                conninfo, min_size=min_size, max_size=max_size, kwargs={"autocommit": True},
                open=True, name="rowstate", check=_check_connection,
            )
        self._threads: ThreadConnections[psycopg.Connection[Any]] = ThreadConnections(
            lambda: psycopg.connect(conninfo, autocommit=True), lambda c: not c.closed)
        self._unit: ContextVar[Unit | None] = _unit_var(self)

    @contextlib.contextmanager
    def _unit_connection(self) -> Iterator[psycopg.Connection[Any]]:
        if self.pool is None:
            yield self._threads.get()
            return
        try:
            conn = self.pool.getconn()
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        try:
            yield conn
        finally:
            self.pool.putconn(conn)

    @contextlib.contextmanager
    def atomic(self, *, door: Any = None) -> Iterator[Unit]:
        """A unit of work (:mod:`rowstate.units`) on one connection; nested, a savepoint."""
        current = self._unit.get()
        if current is not None:
            with _nested(current, door) as unit:
                yield unit
            return
        with self._unit_connection() as conn:
            unit = Unit("postgresql", _pg_raw(conn, self), door, Jsonb)
            with _unit_scope(self._unit, unit, _begin(conn)):
                yield unit

    def run(self, batch: Batch) -> Rows:
        unit = self._unit.get()
        if unit is not None:
            return unit.run(batch)
        try:
            if self.pool is None:
                conn = self._threads.get()
                try:
                    return self._run(conn, batch)
                except psycopg.OperationalError:
                    conn.close()  # broken: this thread's next call connects anew
                    raise
            # getconn/putconn rather than ``with pool.connection()``: the same
            # commit/rollback (no-ops on our autocommit connections), for less
            pool = self.pool
            conn = pool.getconn()
            try:
                return self._run(conn, batch)
            finally:
                pool.putconn(conn)  # a broken connection is replaced by the pool
        except (psycopg.Error, UnicodeEncodeError, RecursionError) as exc:
            raise _translate(exc) from exc

    def _run(self, conn: psycopg.Connection[Any], batch: Batch) -> Rows:
        try:
            if batch.transaction:
                with conn.transaction():
                    out = _execute(conn, batch.statements)
                self.statements += len(batch.statements) + 2
            else:
                self.statements += len(batch.statements)
                out = _execute(conn, batch.statements)
            if not conn.autocommit:  # a caller's pool may not be in autocommit
                conn.commit()
            return out
        except BaseException:
            if not conn.autocommit and not conn.closed:
                with contextlib.suppress(Exception):  # as psycopg's ``with conn`` does
                    conn.rollback()
            raise

    def execute_script(self, sql: str) -> None:
        _no_script_in_unit(self._unit)
        try:
            if self.pool is None:
                self._threads.get().execute(sql)
                return
            with self.pool.connection() as conn:
                conn.execute(sql)
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    def close(self) -> None:
        if self.own_pool and self.pool is not None:
            self.pool.close()
        self._threads.close()


class AsyncPostgresStore:
    dialect = "postgresql"

    def __init__(self, conninfo: str = "", *, pool: AsyncConnectionPool[Any] | None = None,
                 min_size: int = 1, max_size: int = 8) -> None:
        self.statements = 0
        self.own_pool = pool is None
        self.pool: AsyncConnectionPool[Any] = pool or AsyncConnectionPool(
            conninfo, min_size=min_size, max_size=max_size, kwargs={"autocommit": True},
            open=False, name="rowstate-async", check=_acheck_connection,
        )
        self._opened = not self.own_pool
        self._opening: asyncio.Lock | None = None
        self._unit: ContextVar[AsyncUnit | None] = _unit_var(self)
        self._returning: set[asyncio.Task[Any]] = set()  # see _checkout

    @contextlib.asynccontextmanager
    async def atomic(self, *, door: Any = None) -> AsyncIterator[AsyncUnit]:
        """A unit of work (:mod:`rowstate.units`) on one connection; nested, a savepoint."""
        current = self._unit.get()
        if current is not None:
            async with _anested(current, door) as unit:
                yield unit
            return
        await self._ensure_open()
        try:
            conn = await self._checkout()
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        try:
            unit = AsyncUnit("postgresql", _apg_raw(conn, self), door, Jsonb)
            async with _aunit_scope(self._unit, unit, _begin(conn)):
                yield unit
        finally:
            await self._checkin(conn)

    async def _ensure_open(self) -> None:
        if self._opened:
            return
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if not self._opened:
                await self.pool.open()
                self._opened = True

    async def run(self, batch: Batch) -> Rows:
        unit = self._unit.get()
        if unit is not None:
            return await unit.run(batch)
        await self._ensure_open()
        try:
            conn = await self._checkout()  # not ``async with pool.connection()``: see the twin
            try:
                if batch.transaction:
                    async with conn.transaction():
                        out = await _aexecute(conn, batch.statements)
                    self.statements += len(batch.statements) + 2
                else:
                    # counted before running, as the sync twin does: a statement the
                    # database refuses (a UNIQUE invariant) was still a round trip
                    self.statements += len(batch.statements)
                    out = await _aexecute(conn, batch.statements)
                if not conn.autocommit:  # a caller's pool may not be in autocommit
                    await conn.commit()
                return out
            except BaseException:
                if not conn.autocommit and not conn.closed:
                    with contextlib.suppress(Exception):
                        await conn.rollback()
                raise
            finally:
                await self._checkin(conn)
        except (psycopg.Error, UnicodeEncodeError, RecursionError) as exc:
            raise _translate(exc) from exc

    async def _checkout(self) -> psycopg.AsyncConnection[Any]:
        """``pool.getconn()``, shielded from the caller's cancellation when it may wait.

        psycopg_pool 3.3.3 loses connections to cancelled callers (a ``wait_for`` deadline;
        upstream psycopg#509, #1275, #1345, #1401): 20 tasks calling with deadlines under
        4 ms for 3 s left 0 of 8 connections and 9,792 waiters, and every later call timed
        out. The loss needs a queue of waiters: a return handing its connection to a waiter
        suspends on the waiter's lock, and a cancellation there drops the connection. So
        while anyone waits, the checkout runs in a task of its own that no cancellation
        reaches, and a caller cancelled meanwhile hands its connection back when it comes.
        With a connection idle and nobody waiting, ``getconn`` takes it without waiting
        (the pool's lock is only ever held across a wait by such a hand-over), so it is
        awaited directly: the shield costs turns of the event loop, measured here at twice
        the client CPU of an asyncio ``SELECT 1`` call (225 us against 110 us).
        """
        if self._uncontended():
            conn: psycopg.AsyncConnection[Any] = await self.pool.getconn()
            return conn
        checkout = self._background(self.pool.getconn())
        try:
            return await asyncio.shield(checkout)
        except asyncio.CancelledError:
            checkout.add_done_callback(self._return_orphan)
            raise

    def _uncontended(self, *, idle: int = 1) -> bool:
        """Nobody waits for a connection (and ``idle`` are ready): see :meth:`_checkout`.

        Read from the pool's own queues: its public ``get_stats()`` copies its counters,
        13 us a call here (twice per call: +12% of an asyncio call's client CPU)."""
        pool = self.pool
        try:
            return not pool._waiting and len(pool._pool) >= idle
        except AttributeError:  # a psycopg_pool without them: the public, slower way
            stats = pool.get_stats()
            return not stats.get("requests_waiting") and stats.get("pool_available", 0) >= idle

    def _return_orphan(self, checkout: asyncio.Future[Any]) -> None:
        """A cancelled caller's checkout finished: its connection goes back to the pool."""
        if checkout.cancelled() or checkout.exception() is not None:
            return  # no connection was taken (the error is the pool's to log)
        self._background(self.pool.putconn(checkout.result()))

    async def _checkin(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """``pool.putconn(conn)``, shielded when it may wait, as :meth:`_checkout`: with
        nobody waiting and the connection idle (nothing to roll back or close), the return
        never suspends, so no cancellation can land in it."""
        if conn.info.transaction_status == pq.TransactionStatus.IDLE and self._uncontended(
                idle=0):
            await self.pool.putconn(conn)
            return
        await asyncio.shield(self._background(self.pool.putconn(conn)))

    def _background(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A task of the pool's that no caller's cancellation reaches; ``close`` waits."""
        task = asyncio.ensure_future(coro)
        self._returning.add(task)  # a strong reference until it is done
        task.add_done_callback(self._returning.discard)
        return task

    async def execute_script(self, sql: str) -> None:
        _no_script_in_unit(self._unit)
        try:
            await self._ensure_open()
            async with self.pool.connection() as conn:
                await conn.execute(sql)
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    async def close(self) -> None:
        if self.own_pool and self._opened:
            await self.pool.close()  # fails the checkouts still waiting
        if self._returning:  # orphaned checkouts and returns: done, not left pending
            await asyncio.gather(*self._returning, return_exceptions=True)


# -- URLs ----------------------------------------------------------------------------------

Store = SQLiteStore | PostgresStore
AsyncStore = AsyncSQLiteStore | AsyncPostgresStore


def _sqlite_path(url: str) -> str | None:
    """``sqlite:///rel.db`` -> ``rel.db``; ``sqlite:////abs.db`` -> ``/abs.db``;
    ``sqlite://`` and ``sqlite:///:memory:`` -> memory (None)."""
    if url in ("sqlite:", "sqlite://") or not url.startswith("sqlite:///"):
        if url not in ("sqlite:", "sqlite://"):
            raise ValidationError(f"SQLite URLs look like sqlite:///path.db, got {url!r}")
        return None
    path = unquote(url[len("sqlite:///"):])
    return None if path in ("", ":memory:") else path


#: SQLAlchemy's driver names for psycopg 3, which is what the PostgreSQL stores use
_PSYCOPG_DRIVERS = ("psycopg", "psycopg_async")


def postgres_url(url: str) -> str | None:
    """``url`` as libpq reads it when it is a PostgreSQL URL, else None.

    SQLAlchemy users have ``postgresql+psycopg://``: the suffix names psycopg 3, which is
    what we connect with, so it is dropped. Another driver suffix (``+asyncpg``,
    ``+psycopg2``, ``+pg8000``) is refused by name: libpq does not read the form, and the
    URL may carry options only that driver knows.
    """
    scheme, sep, rest = url.partition(":")
    base, plus, driver = scheme.partition("+")
    if not sep or base not in ("postgresql", "postgres"):  # libpq's prefixes, as spelt
        return None
    if not plus:
        return url
    if driver in _PSYCOPG_DRIVERS:
        return f"{base}:{rest}"
    raise ValidationError(
        f"database URL {scheme}://...: the driver suffix '+{driver}' is SQLAlchemy's for "
        "another driver; rowstate connects with psycopg 3: write postgresql:// (or "
        "postgresql+psycopg://)")


def connect(url: str, **options: Any) -> Store:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://`` (memory) or
    ``postgresql://...`` (also ``postgresql+psycopg://``: see :func:`postgres_url`)."""
    if url.startswith("sqlite:"):
        return SQLiteStore(_sqlite_path(url), **options)
    if (pg := postgres_url(url)) is not None:
        return PostgresStore(pg, **options)
    raise ValidationError(f"unsupported database URL {url!r}")


def connect_async(url: str, **options: Any) -> AsyncStore:
    if url.startswith("sqlite:"):
        return AsyncSQLiteStore(_sqlite_path(url), **options)
    if (pg := postgres_url(url)) is not None:
        return AsyncPostgresStore(pg, **options)
    raise ValidationError(f"unsupported database URL {url!r}")
