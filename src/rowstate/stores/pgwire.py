"""psycopg at the wire: error translation, the cached cursor per connection, running a
batch's statements and a unit of work's raw statements, and telling a connection that died
from one that is merely slow. The store classes (:mod:`rowstate.stores.postgres`) only
manage connections and units around these.
"""

from __future__ import annotations

import select
import weakref
from collections.abc import Callable
from typing import Any, overload

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ..errors import (
    ConnectionLostError,
    InvariantViolation,
    StatementCancelled,
    StoreError,
    ValidationError,
)
from ..protocol import Batch
from .common import (
    Raw,
    Rows,
    StatementCounter,
)


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


def _execute(conn: psycopg.Connection[Any], batch: Batch) -> Rows:
    cur = _cursor(conn)
    out: Rows = []
    for sql, params in batch.statements:
        cur.execute(sql, params)
        out.append(cur.fetchall() if _has_rows(cur) else [])
    if batch.otherwise is not None and not out[-1]:
        cur.execute(*batch.otherwise)
        out.append(cur.fetchall() if _has_rows(cur) else [])
    return out


async def _aexecute(conn: psycopg.AsyncConnection[Any], batch: Batch) -> Rows:
    cur = _cursor(conn)
    out: Rows = []
    for sql, params in batch.statements:
        await cur.execute(sql, params)
        out.append(await cur.fetchall() if _has_rows(cur) else [])
    if batch.otherwise is not None and not out[-1]:
        await cur.execute(*batch.otherwise)
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
