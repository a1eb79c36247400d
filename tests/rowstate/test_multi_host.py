"""Several PostgreSQL hosts in one URL, and a pool that finds the primary again (issue 30).

Two real servers on loopback: the shared one (B) and a throwaway cluster of this module's
(A, :func:`support.pg_server.start_postgres`), each with a database of the same name
holding the same table. A node "becomes a standby" by ``ALTER SYSTEM SET
default_transaction_read_only = on`` and a reload (its sessions then refuse writes with
SQLSTATE 25006, as a demoted primary's do, and libpq's ``target_session_attrs=read-write``
skips it), and "goes away" by being stopped. The two servers do not replicate: each test
reads which one answered (``inet_server_port()``), not the data's journey.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql as pg_sql
from psycopg.conninfo import make_conninfo

import rowstate
from rowstate import (
    AsyncLifecycle,
    ConnectError,
    ConnectionLostError,
    Lifecycle,
    StatementCancelled,
    ValidationError,
)
from rowstate.ext import Batch
from rowstate.stores import AsyncPostgresStore, PostgresStore
from support.databases import admin_connect, drop_database
from support.engine import SLOTS
from support.pg_server import PostgresServer, start_postgres
from support.pg_standby import caught_up, promote
from support.pg_standby import replicated as streaming_pair
from support.services import LOCALHOST, ServiceUnavailable, free_port

pytestmark = pytest.mark.postgres

TWINS = ["sync", "async"]


async def call(got: Any) -> Any:
    return await got if inspect.isawaitable(got) else got


def _port(admin_dsn: str) -> int:
    with admin_connect(admin_dsn) as conn:
        row = conn.execute("SELECT inet_server_port()").fetchone()
    assert row is not None
    return int(row[0])


class Node:
    """One server of the pair, with this test's database on it."""

    def __init__(self, admin_dsn: str, name: str, server: PostgresServer | None = None):
        self.admin_dsn, self.name, self.server = admin_dsn, name, server
        self.port = _port(admin_dsn)
        self.dsn = make_conninfo(admin_dsn, dbname=name)

    def read_only(self, on: bool) -> None:
        """The node as a standby (``on``) or a primary again, for new transactions of every
        session (``default_transaction_read_only`` is reloaded by each backend)."""
        with admin_connect(self.admin_dsn) as conn:
            conn.execute("ALTER SYSTEM SET default_transaction_read_only = "
                         + ("on" if on else "off"))
            conn.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the reload reaches new sessions at once
            with psycopg.connect(self.dsn) as conn:
                row = conn.execute("SHOW default_transaction_read_only").fetchone()
            if row is not None and row[0] == ("on" if on else "off"):
                return
            time.sleep(0.05)
        raise AssertionError("the reload did not take")


@pytest.fixture(scope="module")
def scratch() -> Iterator[PostgresServer]:
    try:
        server = start_postgres()
    except ServiceUnavailable as exc:
        pytest.skip(f"no second PostgreSQL server: {exc}")
    try:
        yield server
    finally:
        server.stop()


def _database(admin_dsn: str, name: str) -> None:
    with admin_connect(admin_dsn) as conn:
        conn.execute(pg_sql.SQL("CREATE DATABASE {}").format(pg_sql.Identifier(name)))


def _slots(dsn: str) -> None:
    """The SLOTS table in the database at ``dsn``, with row ``s1`` in IDLE."""
    store = PostgresStore(dsn)
    try:
        lc = Lifecycle(store, SLOTS)
        lc.create_schema()
        lc.create("s1")
    finally:
        store.close()


@pytest.fixture
def pair(scratch: PostgresServer, pg_admin_dsn: str) -> Iterator[tuple[Node, Node]]:
    """(A, B): the scratch server and the shared one, each with database ``name`` holding
    the SLOTS table and row ``s1`` in IDLE; A is left writable."""
    name = f"rs_multi_{uuid.uuid4().hex[:12]}"
    nodes = []
    for admin, server in ((scratch.admin_dsn, scratch), (pg_admin_dsn, None)):
        _database(admin, name)
        node = Node(admin, name, server)
        _slots(node.dsn)
        nodes.append(node)
    try:
        yield nodes[0], nodes[1]
    finally:
        with contextlib.suppress(Exception):
            nodes[0].read_only(False)
        for node in nodes:
            with contextlib.suppress(Exception):
                drop_database(node.admin_dsn, name)


def url(*ports: int, name: str = "postgres", attrs: str = "read-write") -> str:
    hosts = ",".join(f"{LOCALHOST}:{p}" for p in ports)
    return f"postgresql://postgres@{hosts}/{name}?target_session_attrs={attrs}"


def keywords(*ports: int, name: str = "postgres", attrs: str = "read-write") -> str:
    return (f"host={','.join([LOCALHOST] * len(ports))} port={','.join(map(str, ports))} "
            f"dbname={name} user=postgres target_session_attrs={attrs}")


def open_store(twin: str, conninfo: str, **options: Any) -> tuple[Any, Any]:
    if twin == "sync":
        store: Any = PostgresStore(conninfo, **options)
        return store, Lifecycle(store, SLOTS)
    astore = AsyncPostgresStore(conninfo, **options)
    return astore, AsyncLifecycle(astore, SLOTS)


async def server_port(store: Any) -> int:
    """Which server a unit of ``store`` runs on."""
    if isinstance(store, PostgresStore):
        with store.atomic() as tx:
            return int(tx.execute("SELECT inet_server_port() AS p")[0]["p"])
    async with store.atomic() as tx:
        return int((await tx.execute("SELECT inet_server_port() AS p"))[0]["p"])


async def filled(store: Any) -> None:
    """Wait until ``store``'s pool holds all its connections (none of a per-thread store):
    a connection still being made when a test turns its node read-only may have passed
    libpq's read-write check before, and join the pool after the drain (seen once in CI,
    on a loaded machine)."""
    if store.pool is not None:
        await call(store.pool.wait(timeout=10))


# -- connecting --------------------------------------------------------------------------


@pytest.mark.parametrize("form", [url, keywords])
@pytest.mark.parametrize("twin", TWINS)
async def test_connect_takes_several_hosts_and_skips_a_standby(
        pair: tuple[Node, Node], twin: str, form: Any) -> None:
    """A listed first, read-only: ``read-write`` lands on B; with A writable again, on A;
    a host with nothing listening before them is passed over."""
    a, b = pair
    dead = free_port()
    a.read_only(True)
    conninfo = form(dead, a.port, b.port, name=a.name)
    maker: Any = rowstate.connect if twin == "sync" else rowstate.connect_async
    store = maker(conninfo)
    try:
        assert await server_port(store) == b.port
    finally:
        await call(store.close())
    a.read_only(False)
    store = maker(conninfo)
    try:
        assert await server_port(store) == a.port
        lc: Any = Lifecycle(store, SLOTS) if twin == "sync" else AsyncLifecycle(store, SLOTS)
        assert (await call(lc.transition("s1", "LIVE", from_="IDLE"))).applied
    finally:
        await call(store.close())


@pytest.mark.parametrize("twin", TWINS)
async def test_a_connect_error_names_every_host_tried(twin: str) -> None:
    first, second = free_port(), free_port()
    store_url = url(first, second)
    with pytest.raises(ConnectError) as info:
        store, _ = open_store(twin, store_url, connect_timeout=2)
        try:
            await call(store.run(Batch((("SELECT 1", []),))))
        finally:
            await call(store.close())
    message = str(info.value)
    for port in (first, second):
        assert f"{LOCALHOST}:{port}" in info.value.target  # type: ignore[operator]
        assert f"port {port} failed" in message
    assert "(read-write)" in message
    assert not info.value.timed_out


def _black_hole() -> tuple[socket.socket, socket.socket, int]:
    """A loopback port whose SYNs go unanswered (see test_connect_failures.black_hole)."""
    listener, filler = socket.socket(), socket.socket()
    listener.bind((LOCALHOST, 0))
    listener.listen(0)
    filler.connect(listener.getsockname())
    return listener, filler, int(listener.getsockname()[1])


@pytest.mark.parametrize("twin", TWINS)
async def test_the_connect_timeout_is_per_host_and_the_next_host_is_tried(
        pair: tuple[Node, Node], twin: str) -> None:
    """libpq's rule: each host gets the whole timeout. Two silent hosts fail after about
    twice the timeout, saying nobody answered; a silent host before a live one costs one
    timeout and the store connects to the live one."""
    _, b = pair
    holes = [_black_hole(), _black_hole()]
    try:
        started = time.monotonic()
        with pytest.raises(ConnectError) as info:
            store, _ = open_store(twin, url(holes[0][2], holes[1][2]), connect_timeout=2)
            try:
                await call(store.run(Batch((("SELECT 1", []),))))
            finally:
                await call(store.close())
        elapsed = time.monotonic() - started
        assert 2 * 2 * 0.8 < elapsed < 2 * 2 * 2, f"{elapsed:.1f} s"
        assert info.value.timed_out
        assert "no answer within 2 s from any host" in str(info.value)

        started = time.monotonic()
        store, _ = open_store(twin, url(holes[0][2], b.port, name=b.name), connect_timeout=2)
        try:
            assert await server_port(store) == b.port
        finally:
            await call(store.close())
        assert time.monotonic() - started < 2 * 2.5
    finally:
        for listener, filler, _ in holes:
            filler.close()
            listener.close()


@pytest.mark.parametrize(("conninfo", "says"), [
    ("postgresql://u@h1:1,h2:2,h3:3/db?port=1,2", "ports for"),
    ("host=a,b,c port=1,2 dbname=x", "2 ports for 3 hosts"),
    ("postgresql://u@h1,h2/db?target_session_attrs=primary-ish", "target_session_attrs"),
])
def test_host_lists_libpq_would_refuse_are_refused_before_any_io(conninfo: str,
                                                                  says: str) -> None:
    started = time.monotonic()
    with pytest.raises(ValidationError, match=says):
        rowstate.connect(conninfo)
    with pytest.raises(ValidationError, match=says):
        rowstate.connect_async(conninfo)
    assert time.monotonic() - started < 0.5


# -- the pool after a failover -----------------------------------------------------------


@pytest.mark.parametrize("twin", [*TWINS, "per_thread"])
async def test_a_node_turned_standby_is_dropped_and_the_primary_found(
        pair: tuple[Node, Node], twin: str) -> None:
    """A pool of two connections to A; A turns read-only. The write on A is refused with a
    typed error (nothing landed), every connection to A is dropped (not only the one that
    failed), and the next unit and the next move run on B."""
    a, b = pair
    options: dict[str, Any] = {"min_size": 2, "max_size": 2}
    if twin == "per_thread":
        options = {"per_thread": True}
    store, lc = open_store("sync" if twin == "per_thread" else twin,
                           url(a.port, b.port, name=a.name), **options)
    try:
        assert await server_port(store) == a.port
        await filled(store)
        a.read_only(True)
        with pytest.raises(StatementCancelled) as info:
            await call(lc.transition("s1", "LIVE", from_="IDLE"))
        assert isinstance(info.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)
        assert "read-only" in str(info.value)
        assert await server_port(store) == b.port
        assert (await call(lc.transition("s1", "LIVE", from_="IDLE"))).applied
        assert await server_port(store) == b.port
    finally:
        await call(store.close())
    with psycopg.connect(a.dsn) as conn:  # nothing landed on A
        row = conn.execute("SELECT state FROM slots WHERE id = 's1'").fetchone()
    assert row == ("IDLE",)


@pytest.mark.parametrize("twin", TWINS)
async def test_a_unit_on_a_node_turned_standby_drops_it_too(pair: tuple[Node, Node],
                                                             twin: str) -> None:
    a, b = pair
    store, _ = open_store(twin, url(a.port, b.port, name=a.name), min_size=2, max_size=2)
    try:
        assert await server_port(store) == a.port
        await filled(store)
        a.read_only(True)
        with pytest.raises(StatementCancelled):
            if twin == "sync":
                with store.atomic() as tx:
                    tx.execute("UPDATE slots SET state = state")
            else:
                async with store.atomic() as tx:
                    await tx.execute("UPDATE slots SET state = state")
        assert await server_port(store) == b.port
    finally:
        await call(store.close())


@pytest.mark.parametrize("twin", TWINS)
async def test_a_node_that_goes_away_is_left_for_the_next_host(pg_admin_dsn: str,
                                                                twin: str) -> None:
    """A is stopped under the pool: at most one call fails (a ConnectionLostError), and
    the pool connects to B for the next."""
    try:
        server = start_postgres()
    except ServiceUnavailable as exc:
        pytest.skip(f"no second PostgreSQL server: {exc}")
    name = f"rs_multi_{uuid.uuid4().hex[:12]}"
    try:
        nodes = []
        for admin in (server.admin_dsn, pg_admin_dsn):
            _database(admin, name)
            nodes.append(Node(admin, name))
        a, b = nodes
        store, _ = open_store(twin, url(a.port, b.port, name=name), min_size=2, max_size=2)
        try:
            assert await server_port(store) == a.port
            server.stop()
            failures = 0
            for _ in range(3):
                try:
                    assert await server_port(store) == b.port
                    break
                except ConnectionLostError:
                    failures += 1
                    await asyncio.sleep(0.1)
            else:
                raise AssertionError("the pool never reached B")
            assert failures <= 1
        finally:
            await call(store.close())
    finally:
        server.stop()
        drop_database(pg_admin_dsn, name)


# -- a real standby, and its promotion -----------------------------------------------------


@pytest.fixture
def replicated() -> Iterator[tuple[PostgresServer, PostgresServer, str]]:
    """(primary, standby, database) (:func:`support.pg_standby.replicated`), the database
    holding SLOTS with row ``s1`` in IDLE."""
    try:
        with streaming_pair(_slots) as pair:
            yield pair
    except ServiceUnavailable as exc:
        pytest.skip(f"no throwaway primary and standby: {exc}")


@pytest.mark.parametrize("twin", TWINS)
async def test_a_write_on_a_real_standby_is_refused_typed_and_nothing_lands(
        replicated: tuple[PostgresServer, PostgresServer, str], twin: str) -> None:
    primary, standby, name = replicated
    assert standby.port is not None and primary.port is not None
    store, lc = open_store(twin, url(standby.port, name=name, attrs="any"))
    try:
        with pytest.raises(StatementCancelled) as info:
            await call(lc.transition("s1", "LIVE", from_="IDLE"))
        assert isinstance(info.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)
        assert (await call(lc.get("s1")))["state"] == "IDLE"  # reads still answer
    finally:
        await call(store.close())
    store, _ = open_store(twin, url(standby.port, primary.port, name=name))
    try:  # read-write passes over the standby, listed first
        assert await server_port(store) == primary.port
    finally:
        await call(store.close())


@pytest.mark.parametrize("twin", TWINS)
async def test_a_pool_follows_a_failover_to_the_promoted_standby(
        replicated: tuple[PostgresServer, PostgresServer, str], twin: str) -> None:
    """The primary is stopped (immediate: its postmaster gone, as a node killed) and the
    standby promoted: the pool, on ``standby,primary`` with read-write, wrote on the primary
    and writes on the new one after at most one failed call; what the old primary had
    acknowledged is there."""
    primary, standby, name = replicated
    assert standby.port is not None and primary.port is not None
    store, lc = open_store(twin, url(standby.port, primary.port, name=name),
                           min_size=2, max_size=2)
    try:
        assert await server_port(store) == primary.port
        assert (await call(lc.transition("s1", "LIVE", from_="IDLE"))).applied
        caught_up(primary.admin_dsn, standby.admin_dsn)
        primary.stop()
        promote(standby)
        failures = 0
        for _ in range(3):
            try:
                moved = await call(lc.transition("s1", "IDLE", from_="LIVE"))
                break
            except ConnectionLostError:
                failures += 1
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the pool never reached the promoted standby")
        assert failures <= 1
        assert moved.applied  # the LIVE acknowledged on the old primary survived
        assert await server_port(store) == standby.port
    finally:
        await call(store.close())


# -- reconnecting ------------------------------------------------------------------------


@pytest.mark.parametrize("twin", TWINS)
async def test_the_pool_retries_a_refused_connection_within_half_a_second(
        pg_admin_dsn: str, twin: str) -> None:
    """The database refuses every connection for 3.5 s (``ALLOW_CONNECTIONS false``, its
    sessions ended), with a call waiting for one: that call is answered within about half
    a second of the database taking connections again. psycopg_pool alone retries after 1,
    2, 4 s ... (its next attempt here ~3.5 s later); a failover's new primary is found the
    same way (rowstate.stores.pgpool; tests/failover/test_rowstate_failover.py)."""
    name = f"rs_retry_{uuid.uuid4().hex[:12]}"
    _database(pg_admin_dsn, name)
    ident = pg_sql.Identifier(name)
    try:
        node = Node(pg_admin_dsn, name)
        store, _ = open_store(twin, node.dsn, min_size=1, max_size=1)
        try:
            assert await server_port(store) == node.port
            with admin_connect(pg_admin_dsn) as admin:
                admin.execute(pg_sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(
                    ident))
                # ended, and gone before the call (the wait makes it so: without it the
                # pool's check could still find the session alive, and the call then fail)
                admin.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                              "WHERE datname = %s", [name])
                waiting = asyncio.ensure_future(
                    server_port(store) if twin == "async"
                    else asyncio.to_thread(asyncio.run, server_port(store)))
                await asyncio.sleep(3.5)
                assert not waiting.done()  # it waits for a connection, not fails
                admin.execute(pg_sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(
                    ident))
                allowed = time.monotonic()
            assert await asyncio.wait_for(waiting, 30) == node.port
            waited = time.monotonic() - allowed
            assert waited < 1.5, f"answered {waited:.2f} s after connections were allowed"
        finally:
            await call(store.close())
    finally:
        drop_database(pg_admin_dsn, name)


def test_the_pools_hook_fits_the_installed_psycopg_pool() -> None:
    """The capped retries hang on a private hook of psycopg_pool; an upgrade that changes
    it leaves the stores on psycopg_pool's own waits (slower after a failover, never
    broken): this says so here rather than in a failover's figures."""
    from rowstate.stores import pgpool

    assert pgpool.HOOK_FITS
    assert pgpool.Pool is not pgpool.ConnectionPool


@pytest.mark.parametrize("twin", TWINS)
async def test_filling_and_refilling_a_pool_leaves_the_random_module_alone(
        pg_admin_dsn: str, twin: str) -> None:
    """A program's seeded ``random`` sequence (and Hypothesis, which checks that nothing
    moved it while it drew an example) is not moved by a store's pool: psycopg_pool draws
    its jitter from the global generator in its worker threads, the stores' pools from
    their own. Four connections made, then made again after a drain, then a retry series
    after refused connections."""
    import random

    name = f"rs_random_{uuid.uuid4().hex[:12]}"
    _database(pg_admin_dsn, name)
    try:
        random.seed(30)
        state = random.getstate()
        store, _ = open_store(twin, make_conninfo(pg_admin_dsn, dbname=name),
                              min_size=4, max_size=4)
        try:
            await server_port(store)
            pool = store.pool
            for _ in range(2):
                await call(pool.wait(timeout=10))
                await call(pool.drain())
            await call(pool.wait(timeout=10))
            with admin_connect(pg_admin_dsn) as admin:  # refused, then retried
                admin.execute(pg_sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(
                    pg_sql.Identifier(name)))
                await call(pool.drain())
                await asyncio.sleep(0.5)
                admin.execute(pg_sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(
                    pg_sql.Identifier(name)))
            await call(pool.wait(timeout=10))
            assert random.getstate() == state
        finally:
            await call(store.close())
    finally:
        drop_database(pg_admin_dsn, name)
