"""Stores run statements; they decide nothing.

* SQLite (stdlib ``sqlite3``): real autocommit (``isolation_level=None``), WAL, a busy
  timeout, one connection per thread, and ``BEGIN IMMEDIATE`` for every multi-statement
  write: a deferred transaction that upgrades to a write fails at once with SQLITE_BUSY,
  ignoring the timeout. ``sqlite://`` (memory) is one shared connection behind a lock.
* PostgreSQL (psycopg 3 + psycopg_pool): autocommit connections from a pool (or, with
  ``per_thread=True``, one kept per calling thread); a batch marked ``transaction`` runs
  inside one.

Driver errors are translated here: a UNIQUE violation becomes :class:`InvariantViolation`
(reported as reason INVARIANT), a dead connection :class:`ConnectionLostError`, a value the
database (or the driver, e.g. text that is not valid UTF-8) refuses :class:`ValidationError`;
the driver's error is kept as ``__cause__``.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import sqlite3
import threading
import weakref
from collections.abc import Callable, Coroutine, Sequence
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
from .errors import ConnectionLostError, InvariantViolation, StoreError, ValidationError

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
            raise ValueError(f"synchronous={synchronous!r}")
        self.synchronous = synchronous.upper()
        self._guard = threading.Lock()  # the shared memory connection; scripts
        self._threads = ThreadConnections(self._open)
        self._shared: sqlite3.Connection | None = self._open() if self.memory else None

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=self.busy_timeout)
        if not self.memory:
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
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
            conn.executescript(sql)

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


def _translate(exc: psycopg.Error | UnicodeEncodeError) -> Exception:
    if isinstance(exc, UnicodeEncodeError):  # e.g. a lone surrogate: never sent, nothing ran
        return ValidationError(f"a text value is not valid UTF-8: {exc}")
    if isinstance(exc, pg_errors.UniqueViolation):
        return InvariantViolation(str(exc), index=exc.diag.constraint_name)
    if isinstance(exc, pg_errors.DataError | pg_errors.InvalidTextRepresentation):
        return ValidationError(f"PostgreSQL refused a value: {exc}")
    if isinstance(exc, pg_errors.UndefinedFunction | pg_errors.DatatypeMismatch):
        # the SQL text is ours, its names checked: a type clash comes from a value's type
        # (e.g. an int key for a text column: "operator does not exist: text = bigint")
        return ValidationError(f"PostgreSQL refused a value of this type: {exc}")
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
            raise ValueError("per_thread=True opens its own connections: pass no pool")
        self.own_pool = pool is None and not per_thread
        self.pool: ConnectionPool[Any] | None = pool  # None: per_thread
        if self.own_pool:
            self.pool = ConnectionPool(
                conninfo, min_size=min_size, max_size=max_size, kwargs={"autocommit": True},
                open=True, name="rowstate", check=_check_connection,
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
        except (psycopg.Error, UnicodeEncodeError) as exc:
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
        if self.pool is None:
            self._threads.get().execute(sql)
            return
        with self.pool.connection() as conn:
            conn.execute(sql)

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
        self._returning: set[asyncio.Task[Any]] = set()  # see _checkout

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
        except (psycopg.Error, UnicodeEncodeError) as exc:
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
        await self._ensure_open()
        async with self.pool.connection() as conn:
            await conn.execute(sql)

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
            raise ValueError(f"SQLite URLs look like sqlite:///path.db, got {url!r}")
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
    raise ValueError(f"unsupported database URL {url!r}")


def connect_async(url: str, **options: Any) -> AsyncStore:
    if url.startswith("sqlite:"):
        return AsyncSQLiteStore(_sqlite_path(url), **options)
    if (pg := postgres_url(url)) is not None:
        return AsyncPostgresStore(pg, **options)
    raise ValueError(f"unsupported database URL {url!r}")
