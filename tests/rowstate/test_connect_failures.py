"""A store that cannot connect says so in seconds, with the server's words (issue 27).

Each way a first connection fails (nothing listening, no such database, a role that may not
log in or does not exist, a wrong password, a host that never answers) is a
:class:`~rowstate.errors.ConnectError` within the connect timeout, from both PostgreSQL
twins (the sync store when it is built, the async one on its first call), carrying the
server's message, and logged once at most: not the pool's 30 s of retries, a warning per
attempt, ending in "couldn't get a connection". A store that did connect once keeps the
pool's behaviour: a dead connection is replaced in the background, and a call whose
connection died is a :class:`~rowstate.ConnectionLostError`. SQLite's own failures to open
are ConnectErrors too, when the store is built.

Timings are asserted with room (under 3x the connect timeout): the point is seconds, not
thirty of them. Only loopback addresses; "a host that never answers" is a loopback port
whose SYNs the kernel drops (see :func:`black_hole`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql as pg_sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rowstate.errors import ConnectError, ConnectionLostError, StoreError, ValidationError
from rowstate.ext import Batch
from rowstate.stores import AsyncPostgresStore, PostgresStore, connect, connect_async
from rowstate.stores.pgconnect import DEFAULT_CONNECT_TIMEOUT, with_connect_timeout
from support import databases
from support import races as rh
from support.services import LOCALHOST, ServiceUnavailable, free_port, services_required

TIMEOUT = 2  # seconds: libpq's smallest connect timeout, so the silent cases stay short
TWINS = ["sync", "async"]
PID = Batch((("SELECT pg_backend_pid()", []),))
SUICIDE = Batch((("SELECT pg_terminate_backend(pg_backend_pid())", []),))


# -- helpers ------------------------------------------------------------------------------


async def _open_and_call(conninfo: str, twin: str, timeout: float = TIMEOUT) -> None:
    """Open a store and make its first call: where each twin connects."""
    if twin == "sync":
        store = PostgresStore(conninfo, connect_timeout=timeout)
        try:
            store.run(PID)
        finally:
            store.close()
        return
    astore = AsyncPostgresStore(conninfo, connect_timeout=timeout)
    try:
        await astore.run(PID)
    finally:
        await astore.close()


async def _fails_fast(url: str, twin: str, caplog: pytest.LogCaptureFixture) -> ConnectError:
    """The ConnectError of a first connection: within 3x the timeout, one log line at most,
    the driver's error kept as ``__cause__``."""
    caplog.set_level(logging.INFO)
    started = time.monotonic()
    with pytest.raises(ConnectError) as info:
        await _open_and_call(url, twin)
    elapsed = time.monotonic() - started
    assert elapsed < 3 * TIMEOUT, f"{elapsed:.1f} s"
    assert len(caplog.records) <= 1, [r.getMessage() for r in caplog.records]
    assert isinstance(info.value.__cause__, psycopg.Error)
    assert isinstance(info.value, StoreError)
    return info.value


def _url(dsn: str, **changes: str) -> str:
    """``dsn`` with some of its parameters changed (a database, a user, a password)."""
    return make_conninfo(dsn, **changes)


@contextlib.contextmanager
def black_hole() -> Iterator[int]:
    """A loopback port that drops every SYN, as a host that is down or firewalled does: a
    listener with a backlog of 0 whose queue is filled by one connection never accepted
    (Linux drops a SYN to a full accept queue, and the client hears nothing)."""
    with socket.socket() as listener, socket.socket() as filler:
        listener.bind((LOCALHOST, 0))
        listener.listen(0)
        filler.connect(listener.getsockname())
        with socket.socket() as probe:
            probe.settimeout(0.3)
            try:
                probe.connect(listener.getsockname())
            except TimeoutError:
                pass
            else:
                pytest.skip("this kernel answers SYNs past a full accept queue")
        yield listener.getsockname()[1]


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A loopback port that accepts TCP connections (the kernel does) and never says a word:
    a server that hangs, or a port forwarded to nothing."""
    with socket.socket() as listener:
        listener.bind((LOCALHOST, 0))
        listener.listen(8)
        yield listener.getsockname()[1]


@contextlib.contextmanager
def role(admin_dsn: str, *options: str) -> Iterator[str]:
    """A role of this test (``CREATE ROLE name <options>``), dropped after it."""
    name = f"rs_role_{uuid.uuid4().hex[:12]}"
    with databases.admin_connect(admin_dsn) as conn:
        conn.execute(pg_sql.SQL("CREATE ROLE {} " + " ".join(options)).format(
            pg_sql.Identifier(name)))
    try:
        yield name
    finally:
        with databases.admin_connect(admin_dsn) as conn:
            conn.execute(pg_sql.SQL("DROP ROLE {}").format(pg_sql.Identifier(name)))


# -- each way a first connection fails -----------------------------------------------------


@pytest.mark.parametrize("twin", TWINS)
async def test_nothing_listening_is_a_connect_error_at_once(
        twin: str, caplog: pytest.LogCaptureFixture) -> None:
    url = f"postgresql://postgres@{LOCALHOST}:{free_port()}/postgres"
    err = await _fails_fast(url, twin, caplog)
    assert "Connection refused" in str(err) and not err.timed_out
    with pytest.raises(ConnectError, match="Connection refused"):  # through the URL door
        if twin == "sync":
            connect(url, connect_timeout=TIMEOUT)
        else:
            await connect_async(url, connect_timeout=TIMEOUT).run(PID)


@pytest.mark.postgres
@pytest.mark.parametrize("twin", TWINS)
async def test_a_database_that_does_not_exist_is_a_connect_error_with_its_name(
        pg_admin_dsn: str, twin: str, caplog: pytest.LogCaptureFixture) -> None:
    name = f"rs_missing_{uuid.uuid4().hex[:12]}"
    err = await _fails_fast(_url(pg_admin_dsn, dbname=name), twin, caplog)
    assert f'database "{name}" does not exist' in str(err)
    assert err.target is not None and name in err.target and not err.timed_out
    assert f'database "{name}" does not exist' in err.detail


@pytest.mark.postgres
@pytest.mark.parametrize("twin", TWINS)
async def test_a_role_that_may_not_log_in_is_a_connect_error(
        pg_admin_dsn: str, twin: str, caplog: pytest.LogCaptureFixture) -> None:
    """The role has a password and no LOGIN: refused whatever pg_hba says (a server that
    trusts 127.0.0.1, as this machine's does, lets a wrong password in: see below)."""
    with role(pg_admin_dsn, "NOLOGIN PASSWORD 'right'") as name:
        err = await _fails_fast(_url(pg_admin_dsn, user=name, password="right"), twin,
                                caplog)
    assert f'role "{name}" is not permitted to log in' in str(err)
    assert "right" not in (err.target or "")  # never the password


@pytest.mark.postgres
@pytest.mark.parametrize("twin", TWINS)
async def test_a_role_that_does_not_exist_is_a_connect_error(
        pg_admin_dsn: str, twin: str, caplog: pytest.LogCaptureFixture) -> None:
    """Under trust the server names the missing role; under password auth it does not tell
    (checked on a throwaway cluster with scram-sha-256): either way, its words."""
    name = f"rs_nobody_{uuid.uuid4().hex[:12]}"
    err = await _fails_fast(_url(pg_admin_dsn, user=name), twin, caplog)
    assert (f'role "{name}" does not exist' in str(err)
            or f'password authentication failed for user "{name}"' in str(err)), str(err)


@pytest.fixture(scope="module")
def password_cluster() -> Iterator[str]:
    """A cluster that asks for passwords (:func:`support.pg_server.password_cluster`)."""
    from support.pg_server import password_cluster

    try:
        with password_cluster() as admin:
            yield admin
    except ServiceUnavailable as exc:
        why = f"no throwaway PostgreSQL cluster for the password test: {exc}"
        if services_required():
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


@pytest.mark.postgres
@pytest.mark.parametrize("twin", TWINS)
async def test_a_wrong_password_is_a_connect_error(
        password_cluster: str, twin: str, caplog: pytest.LogCaptureFixture) -> None:
    """On a cluster that asks for passwords (the shared server trusts loopback)."""
    with role(password_cluster, "LOGIN PASSWORD 'right'") as name:
        err = await _fails_fast(_url(password_cluster, user=name, password="wrong"), twin,
                                caplog)
    assert "password authentication failed" in str(err)


@pytest.mark.parametrize("twin", TWINS)
async def test_a_host_that_never_answers_fails_after_the_connect_timeout(
        twin: str, caplog: pytest.LogCaptureFixture) -> None:
    with black_hole() as port:
        err = await _fails_fast(f"postgresql://postgres@{LOCALHOST}:{port}/postgres", twin,
                                caplog)
    assert err.timed_out and f"no answer within {TIMEOUT} s" in str(err)


@pytest.mark.parametrize("twin", TWINS)
async def test_a_server_that_accepts_and_says_nothing_fails_after_the_connect_timeout(
        twin: str, caplog: pytest.LogCaptureFixture) -> None:
    with silent_server() as port:
        err = await _fails_fast(f"postgresql://postgres@{LOCALHOST}:{port}/postgres", twin,
                                caplog)
    assert err.timed_out


# -- the async store's first call -----------------------------------------------------------


async def test_async_first_calls_that_arrive_together_share_one_attempt() -> None:
    """Five calls on a silent host wait for one connect timeout, not five in a row."""
    with black_hole() as port:
        store = AsyncPostgresStore(f"postgresql://postgres@{LOCALHOST}:{port}/postgres",
                                   connect_timeout=TIMEOUT)
        started = time.monotonic()
        got = await asyncio.gather(*[store.run(PID) for _ in range(5)], return_exceptions=True)
        elapsed = time.monotonic() - started
        await store.close()
    assert all(isinstance(e, ConnectError) for e in got), got
    assert elapsed < 2 * TIMEOUT, f"{elapsed:.1f} s"


@pytest.mark.postgres
async def test_an_async_store_that_failed_tries_again_on_its_next_call(
        pg_admin_dsn: str) -> None:
    """The pool stays unopened after a ConnectError: once the database exists, the same
    store works."""
    name = f"rs_later_{uuid.uuid4().hex[:12]}"
    store = AsyncPostgresStore(_url(pg_admin_dsn, dbname=name), connect_timeout=TIMEOUT)
    try:
        with pytest.raises(ConnectError, match="does not exist"):
            await store.run(PID)
        with databases.admin_connect(pg_admin_dsn) as conn:
            conn.execute(pg_sql.SQL("CREATE DATABASE {}").format(pg_sql.Identifier(name)))
        try:
            assert (await store.run(PID))[0][0][0] > 0
        finally:
            await store.close()
    finally:
        databases.drop_database(pg_admin_dsn, name)


# -- a store that connected once: the pool's behaviour, as before -------------------------


@pytest.mark.postgres
def test_a_pool_that_worked_recovers_from_terminated_backends(
        pg_dsn: str, pg_admin_dsn: str) -> None:
    app = f"rs-recover-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(rh.with_app_name(pg_dsn, app), connect_timeout=TIMEOUT)
    try:
        first = store.run(PID)[0][0][0]
        rh.terminate(pg_admin_dsn, rh.backends(pg_admin_dsn, rh.dbname_of(pg_dsn), app))
        second = store.run(PID)[0][0][0]  # the pool's check replaced the dead one
        assert second != first
        with pytest.raises(ConnectionLostError):  # a call whose connection died mid-call
            store.run(SUICIDE)
        assert store.run(PID)[0][0][0] > 0  # and the next one is served
    finally:
        store.close()


@pytest.mark.postgres
async def test_an_async_pool_that_worked_recovers_from_terminated_backends(
        pg_dsn: str, pg_admin_dsn: str) -> None:
    app = f"rs-arecover-{uuid.uuid4().hex[:8]}"
    store = AsyncPostgresStore(rh.with_app_name(pg_dsn, app), connect_timeout=TIMEOUT)
    try:
        first = (await store.run(PID))[0][0][0]
        await asyncio.to_thread(rh.terminate, pg_admin_dsn,
                                rh.backends(pg_admin_dsn, rh.dbname_of(pg_dsn), app))
        second = (await store.run(PID))[0][0][0]
        assert second != first
        with pytest.raises(ConnectionLostError):
            await store.run(SUICIDE)
        assert (await store.run(PID))[0][0][0] > 0
    finally:
        await store.close()


# -- the connect timeout --------------------------------------------------------------------


@pytest.mark.parametrize(("url", "given", "seconds"), [
    ("postgresql://h/db", None, DEFAULT_CONNECT_TIMEOUT),  # ours, by default
    ("postgresql://h/db", 10.0, 10),
    ("postgresql://h/db", 2.5, 3),  # libpq counts whole seconds...
    ("postgresql://h/db", 0.5, 2),  # ...at least 2
    ("postgresql://h/db?connect_timeout=7", None, 7),  # the URL's own
    ("postgresql://h/db?connect_timeout=7", 3, 3),  # the keyword wins
    ("host=h dbname=db", None, DEFAULT_CONNECT_TIMEOUT),
])
def test_the_connect_timeout_is_the_callers_or_the_urls_or_5_s(
        url: str, given: float | None, seconds: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    conninfo, timeout = with_connect_timeout(url, given)
    assert timeout == seconds
    assert int(conninfo_to_dict(conninfo)["connect_timeout"]) == seconds


def test_pgconnect_timeout_in_the_environment_is_left_to_libpq(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "9")
    assert with_connect_timeout("postgresql://h/db", None)[1] == 9


@pytest.mark.parametrize(("url", "given"), [
    ("postgresql://h/db", 0), ("postgresql://h/db", -1.0), ("not a conninfo", None),
    ("postgresql://h/db?connect_timeout=soon", None),
])
def test_a_bad_timeout_or_conninfo_is_refused_before_any_io(url: str, given: float | None,
                                                            ) -> None:
    with pytest.raises(ValidationError):
        PostgresStore(url, connect_timeout=given)
    with pytest.raises(ValidationError):
        AsyncPostgresStore(url, connect_timeout=given)


@pytest.mark.postgres
def test_a_store_says_its_connect_timeout(pg_dsn: str) -> None:
    store = connect(pg_dsn)
    try:
        assert isinstance(store, PostgresStore) and store.connect_timeout == 5
    finally:
        store.close()


# -- SQLite ----------------------------------------------------------------------------------


def _in_a_missing_directory(tmp_path: Path) -> Path:
    return tmp_path / "no" / "such" / "dir" / "x.db"


def _a_directory(tmp_path: Path) -> Path:
    return tmp_path


def _not_a_database(tmp_path: Path) -> Path:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database, only some text " * 200)
    return path


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize(("where", "words"), [
    (_in_a_missing_directory, "does not exist"),
    (_a_directory, "it is a directory"),
    (_not_a_database, "file is not a database"),
])
def test_a_sqlite_file_that_cannot_open_is_a_connect_error_when_the_store_is_built(
        tmp_path: Path, twin: str, where: Callable[[Path], Path], words: str) -> None:
    path = where(tmp_path)
    started = time.monotonic()
    with pytest.raises(ConnectError) as info:
        (connect if twin == "sync" else connect_async)(f"sqlite:///{path}")
    assert time.monotonic() - started < 1
    assert words in str(info.value) and str(path) in str(info.value)
    assert info.value.target == str(path)
    assert isinstance(info.value.__cause__, sqlite3.Error)
