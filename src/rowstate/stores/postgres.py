"""PostgreSQL (psycopg 3 + psycopg_pool): autocommit connections from a pool (or, with
``per_thread=True``, one kept per calling thread); a batch marked ``transaction`` runs
inside one.

The only module of rowstate that imports psycopg: ``rowstate.stores`` loads it on first use
of a PostgreSQL name (PEP 562).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextvars import ContextVar
from typing import Any

import psycopg
from psycopg import pq
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ..errors import (
    ValidationError,
)
from ..protocol import Batch, Door
from ..units import AsyncUnit, Unit
from .common import (
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
from .pgwire import (
    _acheck_connection,
    _aexecute,
    _apg_raw,
    _begin,
    _check_connection,
    _execute,
    _pg_raw,
    _translate,
)


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
    def atomic(self, *, door: Door | None = None) -> Iterator[Unit]:
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
                    out = _execute(conn, batch)
                self.statements += len(out) + 2
            else:
                self.statements += len(batch.statements)
                out = _execute(conn, batch)
                self.statements += len(out) - len(batch.statements)  # an ``otherwise``
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
    async def atomic(self, *, door: Door | None = None) -> AsyncIterator[AsyncUnit]:
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
                        out = await _aexecute(conn, batch)
                    self.statements += len(out) + 2
                else:
                    # counted before running, as the sync twin does: a statement the
                    # database refuses (a UNIQUE invariant) was still a round trip
                    self.statements += len(batch.statements)
                    out = await _aexecute(conn, batch)
                    self.statements += len(out) - len(batch.statements)  # an ``otherwise``
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

