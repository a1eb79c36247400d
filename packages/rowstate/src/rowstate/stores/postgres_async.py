"""PostgreSQL for asyncio: :class:`AsyncPostgresStore`, the twin of
:class:`~rowstate.stores.postgres.PostgresStore`, kept by hand beside it (the module
docstring of :mod:`.postgres` says why, and what the two share as functions).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Coroutine
from contextvars import ContextVar
from typing import Any

import psycopg
from psycopg import pq
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from ..errors import OutcomeUnknown, StatementCancelled
from ..protocol import Batch, Door
from ..units import AsyncUnit, anested, aunit_scope
from .common import Rows, _no_script_in_unit, _unit_var
from .pgconnect import aprobe, with_connect_timeout
from .pgpool import AsyncPool
from .pgreads import POSITION, AsyncReads, read_conninfo, reads_only
from .pgsettle import aremember, asettle, session
from .pgwire import (
    DRIVER_ERRORS,
    _acheck_connection,
    _aexecute,
    _apg_raw,
    _begin,
    _translate,
    committing,
    read_only_node,
)


class AsyncPostgresStore:
    """PostgreSQL for asyncio, through a psycopg_pool pool opened on the first call (the
    constructor is a plain call: an asyncio app builds its store before its loop runs).

    That first call opens one connection of its own first, as :class:`PostgresStore`'s
    constructor does: a server that refuses or does not answer within ``connect_timeout``
    seconds (default 5) raises :class:`ConnectError` and the pool stays unopened, so the
    next call tries again. Calls that arrive together share one attempt.

    ``read_url`` as :class:`PostgresStore`'s (:mod:`.pgreads`), its pool opened on the
    first read-only unit that goes to it.
    """

    dialect = "postgresql"

    def __init__(self, conninfo: str = "", *, pool: AsyncConnectionPool[Any] | None = None,
                 min_size: int = 1, max_size: int = 8,
                 connect_timeout: float | None = None, read_url: str | None = None) -> None:
        self.statements = 0
        self.own_pool = pool is None
        self.conninfo, self.connect_timeout = with_connect_timeout(conninfo, connect_timeout)
        self.pool: AsyncConnectionPool[Any] = pool or AsyncPool(
            self.conninfo, min_size=min_size, max_size=max_size, kwargs={"autocommit": True},
            open=False, name="rowstate-async", check=_acheck_connection, configure=aremember,
        )
        self._opened = not self.own_pool
        self._opening: asyncio.Task[None] | None = None
        self._unit: ContextVar[AsyncUnit | None] = _unit_var(self)
        self._returning: set[asyncio.Task[Any]] = set()  # see _checkout
        self.reads = None if read_url is None else AsyncReads(
            read_conninfo(read_url), max_size=max_size, connect_timeout=connect_timeout)

    async def position(self) -> str:
        """:meth:`PostgresStore.position`."""
        async with self.atomic() as tx:
            return str((await tx.execute(POSITION))[0]["position"])

    def reading_after(self, position: str | None) -> contextlib.AbstractContextManager[None]:
        """:meth:`PostgresStore.reading_after` (a plain ``with``: it sets a context var)."""
        if self.reads is None:
            return contextlib.nullcontext()
        return self.reads.reading_after(position)

    @contextlib.asynccontextmanager
    async def atomic(self, *, door: Door | None = None,
                     read_only: bool = False) -> AsyncIterator[AsyncUnit]:
        """A unit of work (:mod:`rowstate.units`) on one connection; nested, a savepoint;
        ``read_only`` as :meth:`PostgresStore.atomic`'s."""
        current = self._unit.get()
        if current is not None:
            async with anested(current, door) as unit:
                yield unit
            return
        await self._ensure_open()
        conn, pool = await self._unit_checkout(read_only)
        try:
            unit = AsyncUnit("postgresql", _apg_raw(conn, self), door, Jsonb)
            async with aunit_scope(self._unit, unit, _begin(conn, read_only)):
                yield unit
        except OutcomeUnknown:
            await asettle(self.conninfo, session(conn))
            raise
        except StatementCancelled as exc:
            if read_only_node(exc) and not read_only:
                await self.pool.drain()  # see PostgresStore._drop_node
            raise
        finally:
            await self._checkin(conn, pool)

    async def _unit_checkout(self, read_only: bool
                             ) -> tuple[psycopg.AsyncConnection[Any], AsyncConnectionPool[Any]]:
        """A unit's connection and the pool it is from: the standby's for a read-only unit
        that may go there (:mod:`.pgreads`), else the primary's."""
        reads = self.reads
        try:
            if reads is not None:
                if not read_only:
                    reads.wrote()
                elif reads.to_standby():
                    await reads.open()
                    standby = await self._checkout(reads.pool)
                    try:
                        fresh = await reads.caught_up(standby)
                    except BaseException:
                        await self._checkin(standby, reads.pool)
                        raise
                    if fresh:
                        return standby, reads.pool
                    await self._checkin(standby, reads.pool)
            return await self._checkout(), self.pool
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    async def _ensure_open(self) -> None:
        """The pool, opened once; concurrent first calls wait for the same attempt (in a
        task no caller's cancellation reaches), and a failed one is tried anew next call."""
        if self._opened:
            return
        if self._opening is None or self._opening.done():
            self._opening = self._background(self._open_pool())
            self._opening.add_done_callback(_retrieved)
        await asyncio.shield(self._opening)

    async def _open_pool(self) -> None:
        """One connection opened and closed (see :mod:`.pgconnect`), then the pool."""
        await aprobe(self.conninfo, self.connect_timeout)
        await self.pool.open()
        self._opened = True

    async def run(self, batch: Batch) -> Rows:
        unit = self._unit.get()
        if unit is not None:
            return await unit.run(batch)
        if self.reads is not None and not reads_only(batch):
            self.reads.wrote()
        await self._ensure_open()
        try:
            conn = await self._checkout()  # not ``async with pool.connection()``: see the twin
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        out: Rows = []
        in_commit = False
        try:
            if batch.transaction:
                async with conn.transaction():
                    await _aexecute(conn, batch, out)
                    in_commit = True  # leaving the block sends the COMMIT
                self.statements += len(out) + 2
            else:
                # counted before running, as the sync twin does: a statement the
                # database refuses (a UNIQUE invariant) was still a round trip
                self.statements += len(batch.statements)
                await _aexecute(conn, batch, out)
                self.statements += len(out) - len(batch.statements)  # an ``otherwise``
            if not conn.autocommit:  # a caller's pool may not be in autocommit
                in_commit = True
                await conn.commit()
            return out
        except BaseException as exc:
            if not conn.autocommit and not conn.closed:
                with contextlib.suppress(Exception):
                    await conn.rollback()
            if not isinstance(exc, DRIVER_ERRORS):
                raise
            error = _translate(exc, committing=in_commit or committing(conn, batch, len(out)))
            if isinstance(error, OutcomeUnknown):
                await asettle(self.conninfo, session(conn))
            if read_only_node(exc):
                await self.pool.drain()  # every connection of the pool leads to that standby
            raise error from exc
        finally:
            await self._checkin(conn)

    async def _checkout(self, pool: AsyncConnectionPool[Any] | None = None
                        ) -> psycopg.AsyncConnection[Any]:
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
        pool = pool or self.pool
        if self._uncontended(pool):
            conn: psycopg.AsyncConnection[Any] = await pool.getconn()
            return conn
        checkout = self._background(pool.getconn())
        try:
            return await asyncio.shield(checkout)
        except asyncio.CancelledError:
            checkout.add_done_callback(functools.partial(self._return_orphan, pool))
            raise

    @staticmethod
    def _uncontended(pool: AsyncConnectionPool[Any], *, idle: int = 1) -> bool:
        """Nobody waits for a connection (and ``idle`` are ready): see :meth:`_checkout`.

        Read from the pool's own queues: its public ``get_stats()`` copies its counters,
        13 us a call here (twice per call: +12% of an asyncio call's client CPU)."""
        try:
            return not pool._waiting and len(pool._pool) >= idle
        except AttributeError:  # a psycopg_pool without them: the public, slower way
            stats = pool.get_stats()
            return not stats.get("requests_waiting") and stats.get("pool_available", 0) >= idle

    def _return_orphan(self, pool: AsyncConnectionPool[Any],
                       checkout: asyncio.Future[Any]) -> None:
        """A cancelled caller's checkout finished: its connection goes back to the pool."""
        if checkout.cancelled() or checkout.exception() is not None:
            return  # no connection was taken (the error is the pool's to log)
        self._background(pool.putconn(checkout.result()))

    async def _checkin(self, conn: psycopg.AsyncConnection[Any],
                       pool: AsyncConnectionPool[Any] | None = None) -> None:
        """``pool.putconn(conn)``, shielded when it may wait, as :meth:`_checkout`: with
        nobody waiting and the connection idle (nothing to roll back or close), the return
        never suspends, so no cancellation can land in it."""
        pool = pool or self.pool
        if conn.info.transaction_status == pq.TransactionStatus.IDLE and self._uncontended(
                pool, idle=0):
            await pool.putconn(conn)
            return
        await asyncio.shield(self._background(pool.putconn(conn)))

    def _background(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A task of the pool's that no caller's cancellation reaches; ``close`` waits."""
        task = asyncio.ensure_future(coro)
        self._returning.add(task)  # a strong reference until it is done
        task.add_done_callback(self._returning.discard)
        return task

    async def execute_script(self, sql: str) -> None:
        _no_script_in_unit(self._unit)
        if self.reads is not None:
            self.reads.wrote()
        try:
            await self._ensure_open()
            async with self.pool.connection() as conn:
                await conn.execute(sql)
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    async def close(self) -> None:
        if self._opening is not None and not self._opening.done():
            # an opening under way ends first, so that the pool it opens is closed below
            await asyncio.gather(self._opening, return_exceptions=True)
        if self.own_pool and self._opened:
            await self.pool.close()  # fails the checkouts still waiting
        if self._returning:  # orphaned checkouts and returns: done, not left pending
            await asyncio.gather(*self._returning, return_exceptions=True)
        if self.reads is not None:
            await self.reads.close()


def _retrieved(task: asyncio.Task[None]) -> None:
    """Mark a finished opening's error as seen: every caller may have been cancelled."""
    if not task.cancelled():
        task.exception()
