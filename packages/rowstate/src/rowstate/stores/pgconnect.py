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

Several hosts (``postgresql://u@a:5432,b:5433/db?target_session_attrs=read-write``, or
``host=a,b port=5432,5433``: a Patroni cluster's nodes) are libpq's: psycopg tries them in
order and keeps the first that answers and has the session attributes asked for (a
standby is skipped by ``read-write``). The connect timeout is libpq's too, per host (per
address): a host that is down costs its timeout and the next one is still tried, so a
store fails after at most the timeout times the number of hosts. The lists are checked
before any I/O (as many ports as hosts, or one for all; a ``target_session_attrs`` libpq
knows), and a :class:`ConnectError` names every host tried with each one's answer.
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
        _check_hosts(params)
        if seconds is not None:
            conninfo = make_conninfo(conninfo, connect_timeout=max(2, math.ceil(seconds)))
        elif "connect_timeout" not in params and not os.environ.get("PGCONNECT_TIMEOUT"):
            conninfo = make_conninfo(conninfo, connect_timeout=DEFAULT_CONNECT_TIMEOUT)
        return conninfo, timeout_from_conninfo(conninfo_to_dict(conninfo))
    except psycopg.ProgrammingError as exc:
        raise ValidationError(f"not a PostgreSQL URL or conninfo: {exc}") from exc


#: libpq's values of ``target_session_attrs`` (PostgreSQL 14 and later)
SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")


def _split(value: object) -> list[str]:
    return str(value).split(",") if value else []


def _check_hosts(params: dict[str, Any]) -> None:
    """Refuse, before any I/O, the lists libpq would refuse only when connecting."""
    hosts = _split(params.get("host")) or _split(params.get("hostaddr"))
    ports = _split(params.get("port"))
    if len(ports) > 1 and len(ports) != max(len(hosts), 1):
        raise ValidationError(f"{len(ports)} ports for {len(hosts)} hosts: give one port "
                              "per host, in the same order, or one port for all")
    attrs = params.get("target_session_attrs")
    if attrs is not None and attrs not in SESSION_ATTRS:
        raise ValidationError(f"target_session_attrs={attrs!r}: one of "
                              f"{', '.join(SESSION_ATTRS)}")


def hosts(conninfo: str) -> list[str]:
    """The ``host:port`` of each host ``conninfo`` names, in libpq's order."""
    params = conninfo_to_dict(conninfo)
    names = _split(params.get("host")) or _split(params.get("hostaddr")) or [""]
    ports = _split(params.get("port")) or [""]
    ports = ports * len(names) if len(ports) == 1 else ports
    return [(name or "the default host") + (f":{port}" if port else "")
            for name, port in zip(names, ports, strict=False)]


def describe(conninfo: str) -> str:
    """Where ``conninfo`` points, for a message: database, each host and port, user and the
    session attributes asked for; no password."""
    params = conninfo_to_dict(conninfo)
    db, user = params.get("dbname"), params.get("user")
    where = [f'database "{db}"' if db else "the default database",
             "on " + ", ".join(hosts(conninfo))]
    if user:
        where.append(f"as {user}")
    if (attrs := params.get("target_session_attrs")) not in (None, "any"):
        where.append(f"({attrs})")
    return " ".join(where)


def connect_error(exc: psycopg.Error, conninfo: str, timeout: int) -> ConnectError:
    """The error of a connection that could not be opened, saying where and why (the
    driver's words, which carry the server's and, with several hosts, each host's), and
    whether nobody answered at all (every host timed out)."""
    target, detail = describe(conninfo), str(exc)
    attempts = detail.count("\n- host: ")  # psycopg lists each failed attempt so
    timed_out = (isinstance(exc, _TIMED_OUT) or "timeout expired" in detail) and (
        detail.count("timeout expired") >= attempts)
    many = len(hosts(conninfo)) > 1
    why = ""
    if timed_out:
        why = (f"no answer within {timeout} s from any host (connect_timeout, per host): "
               if many else f"no answer within {timeout} s (connect_timeout): ")
    return ConnectError(f"cannot connect to PostgreSQL ({target}): {why}{detail}",
                        target=target, detail=detail, timed_out=timed_out)


def probe(conninfo: str, timeout: int) -> None:
    """Open one connection and close it, or raise :class:`ConnectError`: what a store does
    before opening a pool, which would retry in silence (the module docstring)."""
    try:
        psycopg.connect(conninfo, autocommit=True).close()
    except psycopg.Error as exc:
        raise connect_error(exc, conninfo, timeout) from exc


async def aprobe(conninfo: str, timeout: int) -> None:
    """:func:`probe` for asyncio."""
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        await conn.close()
    except psycopg.Error as exc:
        raise connect_error(exc, conninfo, timeout) from exc

