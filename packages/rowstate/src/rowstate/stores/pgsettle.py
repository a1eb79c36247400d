"""Settling a COMMIT whose answer was lost, so that reading the row tells its outcome.

When a connection dies with its COMMIT in flight (:class:`~rowstate.OutcomeUnknown`), the
server's session may still be alive and working: the COMMIT sits in its socket buffer, or
it is waiting for a synchronous standby's acknowledgement, or its transaction holds the
row's lock until it reads the hang-up. A read made at once on another connection can see
the row as it was and the commit land a moment later: "not applied" would be a wrong
answer. So before raising, the store ends that session on its server, waiting for it to be
gone (``pg_terminate_backend(pid, timeout)``, PostgreSQL 14+): a session ended before its
commit rolls back, one past it has committed, and either way the row read afterwards is
final on that server.

The session is named by its server (the host and port the connection reached), its backend
pid and the client port the server saw, read once when the connection opened
(:func:`remember`): a pid alone could name another session after a restart, and a session
seen through a proxy (PgBouncer) has another client port and is left alone. Settling is
best effort: a server that went away (a failover) has no session left, and the new primary
holds what was replicated to it.

Then one empty write on that server (:data:`_BARRIER`, its own transaction), for a primary
with a synchronous standby: a session ended while its COMMIT waited for the standby keeps
that commit, made locally only (PostgreSQL says so in a warning), and a ``resolve`` read
there would answer "applied" for a move the standby never had, lost if the primary dies
next (measured on the Patroni cluster: tests/failover/test_rowstate_failover.py). The
barrier's commit comes later in the WAL than any commit of the ended session, and its
answer waits for the synchronous standby like any commit, so once it answers the standby
holds that move too; while the standby gets nothing it waits, until the standby catches up
or the primary goes away (then the error raises as usual and ``resolve`` reads on the new
primary). Without a synchronous standby it answers at once. No timeout is set on it: a
cancelled wait for the standby answers as if replicated.
"""

from __future__ import annotations

import contextlib
import os
import socket
import weakref
from typing import Any, NamedTuple

import psycopg
from psycopg.conninfo import make_conninfo

#: the lost session is waited for this long once it was asked to end (ms)
WAIT_MS = 5000


class Session(NamedTuple):
    host: str
    port: str
    pid: int
    client_port: int


# the backend pid and client port of each connection, read when it opened: libpq forgets
# the pid and closes the socket of a connection it finds dead
_opened: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()


def remember(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Note ``conn``'s backend pid and client port (a pool's ``configure``, a thread's new
    connection): a few microseconds, once per connection."""
    with contextlib.suppress(OSError, ValueError, psycopg.Error):
        with socket.socket(fileno=os.dup(conn.fileno())) as dup:  # its family, detected
            name = dup.getsockname()
        if isinstance(name, tuple):  # TCP; a unix socket has no port to tell sessions by
            _opened[conn] = (conn.info.backend_pid, int(name[1]))


async def aremember(conn: psycopg.AsyncConnection[Any]) -> None:
    remember(conn)


def session(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> Session | None:
    """The server session of ``conn`` (just lost), if it can be named safely."""
    opened = _opened.get(conn)
    if opened is None:
        return None
    with contextlib.suppress(psycopg.Error):
        info = conn.info  # the host and port it reached: libpq keeps them after the loss
        return Session(info.host, str(info.port), *opened)
    return None


_END = ("SELECT pg_terminate_backend(pid, %s) FROM pg_stat_activity "
        "WHERE pid = %s AND client_port = %s")

#: a transaction that writes WAL (a logical-decoding message, prefix "rowstate.settle") and
#: so waits for the synchronous standby (see the docstring); ``txid_current()`` alone does
#: not: PostgreSQL waits only for a transaction that wrote WAL before its commit record
_BARRIER = "SELECT pg_logical_emit_message(true, 'rowstate.settle', '')"


def _target(conninfo: str, lost: Session) -> str:
    return make_conninfo(conninfo, host=lost.host, port=lost.port, hostaddr=None,
                         target_session_attrs=None)


def settle(conninfo: str, lost: Session | None) -> None:
    """End the ``lost`` session on its server and wait for it (see the module docstring);
    nothing when it cannot be named or its server does not answer."""
    if lost is None:
        return
    with (contextlib.suppress(psycopg.Error),
          psycopg.connect(_target(conninfo, lost), autocommit=True) as conn):
        conn.execute(_END, (WAIT_MS, lost.pid, lost.client_port))
        conn.execute(_BARRIER)


async def asettle(conninfo: str, lost: Session | None) -> None:
    if lost is None:
        return
    with contextlib.suppress(psycopg.Error):
        conn = await psycopg.AsyncConnection.connect(_target(conninfo, lost), autocommit=True)
        async with conn:
            await conn.execute(_END, (WAIT_MS, lost.pid, lost.client_port))
            await conn.execute(_BARRIER)
