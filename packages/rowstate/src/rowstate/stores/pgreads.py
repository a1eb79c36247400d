"""Reads on a standby: where a PostgreSQL store's read-only units go when it was given a
``read_url`` (docs/scale.md, "Reads on a standby").

A standby replays the primary's log a little after the primary commits (milliseconds on a
quiet loopback pair, seconds under load or over a slow link), so a read there may not see a
write that was acknowledged. Two rules keep a caller's own writes in its reads:

* **in one context** (a thread, an asyncio task, a web request's handler): after a write
  through the store in this context (a unit that is not read-only, a statement run outside
  a unit that is not a plain ``SELECT``), the context's read-only units go to the primary.
  A context var, so one request's write does not send the next request to the primary;
* **across contexts** (a form posted, then the page it redirects to): the writer takes the
  primary's log position after its write (:meth:`position`), the reader reads in
  ``reading_after(position)``, and a read-only unit there goes to the standby only if the
  standby has replayed that far (one statement, ``pg_last_wal_replay_lsn()``), else to the
  primary. A node that answers the read URL as a primary (``prefer-standby`` finding no
  standby) has nothing to replay: it is caught up.

Everything else (units that write, statements outside units, DDL) goes to the primary, as
without a ``read_url``. The reads have a pool of their own (``min_size`` 1), also with a
store built ``per_thread``: a read unit is short, and a standby's connections are its own.

:class:`Reads` and :class:`AsyncReads` are kept side by side by hand: the same dozen lines,
one blocking and one awaiting the pool.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import psycopg

from ..errors import ValidationError
from ..protocol import Batch
from .pgconnect import aprobe, probe, with_connect_timeout
from .pgpool import AsyncPool, Pool
from .pgurls import postgres_url
from .pgwire import _acheck_connection, _check_connection, _translate

#: whether the connection's server has replayed up to a position; NULL (a primary): yes
CAUGHT_UP = "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, true)"
#: the primary's log position now, what a later reader waits for: the insert position,
#: which holds every commit record written so far (``pg_current_wal_lsn()``, the write
#: position, may be behind a commit made with ``synchronous_commit = off``)
POSITION = "SELECT pg_current_wal_insert_lsn()::text AS position"


def read_conninfo(read_url: str) -> str:
    """``read_url`` as libpq reads it (the forms :func:`~.pgurls.postgres_url` takes)."""
    conninfo = postgres_url(read_url)
    if conninfo is None:
        raise ValidationError(f"read_url is a PostgreSQL URL (a standby's, or every node's "
                              f"with target_session_attrs=prefer-standby), got {read_url!r}")
    return conninfo


def reads_only(batch: Batch) -> bool:
    """Whether every statement of ``batch`` is a plain ``SELECT`` (a read that leaves the
    context's reads on the standby). Anything else counts as a write: a lane's UPDATE, a
    ``WITH`` that may write, a function call."""
    return not batch.transaction and all(
        sql.lstrip()[:6].upper() == "SELECT" for sql, _ in batch.statements)


class _Routing:
    """What the two twins share: the context's two facts, and the choice they make."""

    def __init__(self, conninfo: str, connect_timeout: float | None) -> None:
        self.conninfo, self.connect_timeout = with_connect_timeout(conninfo, connect_timeout)
        self._wrote: ContextVar[bool] = ContextVar(f"rowstate_wrote_{id(self)}",
                                                   default=False)
        self._after: ContextVar[str | None] = ContextVar(f"rowstate_after_{id(self)}",
                                                         default=None)
        #: read-only units sent to the primary because the standby was behind a position
        self.behind = 0

    def wrote(self) -> None:
        """A write in this context: its read-only units go to the primary from now on."""
        if not self._wrote.get():
            self._wrote.set(True)

    def to_standby(self) -> bool:
        """Whether this context's next read-only unit may go to the standby."""
        return not self._wrote.get()

    @contextlib.contextmanager
    def reading_after(self, position: str | None) -> Iterator[None]:
        token = self._after.set(position)
        try:
            yield
        finally:
            self._after.reset(token)


class Reads(_Routing):
    """The blocking store's reads: a pool on ``read_url``, opened (one connection checked
    first, as the store's own: :mod:`.pgconnect`) when the store is built."""

    def __init__(self, read_url: str, *, max_size: int,
                 connect_timeout: float | None) -> None:
        super().__init__(read_url, connect_timeout)
        probe(self.conninfo, self.connect_timeout)
        self.pool = Pool(self.conninfo, min_size=1, max_size=max_size,
                         kwargs={"autocommit": True}, open=True, name="rowstate-reads",
                         check=_check_connection)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any] | None]:
        """A connection to the standby for a read-only unit, or None: the standby has not
        replayed the position this context reads after (the unit goes to the primary)."""
        try:
            conn: psycopg.Connection[Any] = self.pool.getconn()
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        try:
            after = self._after.get()
            row = None if after is None else conn.execute(CAUGHT_UP, [after]).fetchone()
        except psycopg.Error as exc:
            self.pool.putconn(conn)
            raise _translate(exc) from exc
        if row is not None and not row[0]:
            self.pool.putconn(conn)
            self.behind += 1
            yield None
            return
        try:
            yield conn
        finally:
            self.pool.putconn(conn)

    def close(self) -> None:
        self.pool.close()


class AsyncReads(_Routing):
    """:class:`Reads` for asyncio: the pool is opened on the store's first call."""

    def __init__(self, read_url: str, *, max_size: int,
                 connect_timeout: float | None) -> None:
        super().__init__(read_url, connect_timeout)
        self.pool = AsyncPool(self.conninfo, min_size=1, max_size=max_size,
                              kwargs={"autocommit": True}, open=False,
                              name="rowstate-async-reads", check=_acheck_connection)
        self.opened = False

    async def open(self) -> None:
        if self.opened:
            return
        await aprobe(self.conninfo, self.connect_timeout)
        await self.pool.open()
        self.opened = True

    async def caught_up(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """Whether ``conn``'s standby may serve this context's read-only unit (it has
        replayed the position the context reads after); the store checked it out."""
        after = self._after.get()
        if after is None:
            return True
        try:
            row = await (await conn.execute(CAUGHT_UP, [after])).fetchone()
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        if row is not None and row[0]:
            return True
        self.behind += 1
        return False

    async def close(self) -> None:
        if self.opened:
            await self.pool.close()
