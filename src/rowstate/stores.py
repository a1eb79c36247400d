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
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar, overload
from urllib.parse import unquote

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .compiler import Batch
from .dialects import STORE_NOW, canonical_time
from .errors import (
    ConnectionLostError,
    InvariantViolation,
    StatementCancelled,
    StoreError,
    ValidationError,
)

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


# -- SQLite --------------------------------------------------------------------------------


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
        if self._shared is not None:
            with self._guard:
                return self._run(self._shared, batch)
        return self._run(self._threads.get(), batch)

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
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" in str(exc):
                raise InvariantViolation(str(exc), index=None) from exc
            raise StoreError(str(exc)) from exc
        except (sqlite3.InterfaceError, OverflowError, UnicodeEncodeError) as exc:
            raise ValidationError(f"SQLite refused a value: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(str(exc)) from exc

    def execute_script(self, sql: str) -> None:
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

    @property
    def statements(self) -> int:
        return self.sync.statements

    async def run(self, batch: Batch) -> Rows:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.sync.run, batch)

    async def execute_script(self, sql: str) -> None:
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
                open=True, name="rowstate",
            )
        self._threads: ThreadConnections[psycopg.Connection[Any]] = ThreadConnections(
            lambda: psycopg.connect(conninfo, autocommit=True), lambda c: not c.closed)

    def run(self, batch: Batch) -> Rows:
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
            open=False, name="rowstate-async",
        )
        self._opened = not self.own_pool
        self._opening: asyncio.Lock | None = None

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
        await self._ensure_open()
        pool = self.pool
        try:
            conn = await pool.getconn()  # not ``async with pool.connection()``: see the twin
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
                await pool.putconn(conn)
        except (psycopg.Error, UnicodeEncodeError, RecursionError) as exc:
            raise _translate(exc) from exc

    async def execute_script(self, sql: str) -> None:
        try:
            await self._ensure_open()
            async with self.pool.connection() as conn:
                await conn.execute(sql)
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    async def close(self) -> None:
        if self.own_pool and self._opened:
            await self.pool.close()


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


def connect(url: str, **options: Any) -> Store:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://`` (memory) or
    ``postgresql://...``."""
    if url.startswith("sqlite:"):
        return SQLiteStore(_sqlite_path(url), **options)
    if url.startswith(("postgresql:", "postgres:")):
        return PostgresStore(url, **options)
    raise ValidationError(f"unsupported database URL {url!r}")


def connect_async(url: str, **options: Any) -> AsyncStore:
    if url.startswith("sqlite:"):
        return AsyncSQLiteStore(_sqlite_path(url), **options)
    if url.startswith(("postgresql:", "postgres:")):
        return AsyncPostgresStore(url, **options)
    raise ValidationError(f"unsupported database URL {url!r}")
