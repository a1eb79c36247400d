"""Connecting to PostgreSQL: the connect timeout every connection of a store is opened with,
and a connection that could not be opened as :class:`~rowstate.errors.ConnectError`.

Why a store opens one connection itself before its pool: psycopg_pool opens connections in
the background and retries a failing one forever, a warning in the log per attempt, while
the caller waiting for a connection learns only "couldn't get a connection after 30.00 sec"
(a ``ConnectionLostError`` here), for a database that never existed. So the stores
(:mod:`.postgres`) open and close one connection first: a refusal (nothing listening, no
such database or role, a bad password) raises at once with the server's words, silence
after the connect timeout, and the pool is never opened. Once that connection worked, the
pool's retrying in the background is what we want: a restarted server is found again.

Why 5 s by default: libpq waits forever and psycopg 130 s. A connection on a LAN or in a
cloud region takes milliseconds, and one across the world with TLS a few round trips, well
under a second; 5 s leaves room for a busy server or a slow DNS answer, and is short enough
that a deploy pointed at the wrong host fails while someone is still watching it.
"""

from __future__ import annotations

import math
import os
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo, timeout_from_conninfo

from ..errors import ConnectError, ValidationError

#: seconds a new connection may take before it is given up (per host address tried)
DEFAULT_CONNECT_TIMEOUT = 5

#: psycopg >= 3.2 names a connect timeout; 3.1 raised a plain OperationalError saying so
_TIMED_OUT: Any = getattr(pg_errors, "ConnectionTimeout", ())


def with_connect_timeout(conninfo: str, seconds: float | None) -> tuple[str, int]:
    """``conninfo`` with its connect timeout set, and that timeout in seconds.

    ``seconds`` when given; else the conninfo's own ``connect_timeout`` or libpq's
    ``PGCONNECT_TIMEOUT``, left alone; else :data:`DEFAULT_CONNECT_TIMEOUT`. libpq (and
    psycopg after it) counts whole seconds, at least 2: 5.0 is 5 s, 2.5 is 3 s, 0.5 is 2 s.
    A conninfo psycopg cannot read is bad input, refused before any I/O.
    """
    if seconds is not None and not seconds > 0:
        raise ValidationError(f"connect_timeout={seconds!r}: give a number of seconds > 0")
    try:
        params = conninfo_to_dict(conninfo)
        if seconds is not None:
            conninfo = make_conninfo(conninfo, connect_timeout=max(2, math.ceil(seconds)))
        elif "connect_timeout" not in params and not os.environ.get("PGCONNECT_TIMEOUT"):
            conninfo = make_conninfo(conninfo, connect_timeout=DEFAULT_CONNECT_TIMEOUT)
        return conninfo, timeout_from_conninfo(conninfo_to_dict(conninfo))
    except psycopg.ProgrammingError as exc:
        raise ValidationError(f"not a PostgreSQL URL or conninfo: {exc}") from exc


def describe(conninfo: str) -> str:
    """Where ``conninfo`` points, for a message: database, host, port, user; no password."""
    params = conninfo_to_dict(conninfo)
    db, user, port = params.get("dbname"), params.get("user"), params.get("port")
    host = params.get("host") or params.get("hostaddr")
    where = [f'database "{db}"' if db else "the default database",
             f"on {host or 'the default host'}" + (f":{port}" if port else "")]
    if user:
        where.append(f"as {user}")
    return " ".join(where)


def connect_error(exc: psycopg.Error, conninfo: str, timeout: int) -> ConnectError:
    """The error of a connection that could not be opened, saying where and why (the
    driver's words, which carry the server's), and whether nobody answered at all."""
    target, detail = describe(conninfo), str(exc)
    timed_out = isinstance(exc, _TIMED_OUT) or "timeout expired" in detail
    why = f"no answer within {timeout} s (connect_timeout): " if timed_out else ""
    return ConnectError(f"cannot connect to PostgreSQL ({target}): {why}{detail}",
                        target=target, detail=detail, timed_out=timed_out)
