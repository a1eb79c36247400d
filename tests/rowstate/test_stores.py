"""The PostgreSQL store's two ways to hold connections, on a real server: the pool (the
default) and ``per_thread=True`` (one connection kept per calling thread)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

import psycopg
import pytest

from rowstate import AsyncLifecycle, ConnectionLostError, Lifecycle, stores
from rowstate.ext import Batch
from rowstate.stores import AsyncPostgresStore, PostgresStore
from support import pg_server, services
from support import races as rh
from support.engine import JOBS

PID = Batch((("SELECT pg_backend_pid()", []),))


def _pid(store: PostgresStore) -> int:
    pid: int = store.run(PID)[0][0][0]
    return pid


def test_per_thread_keeps_one_connection_per_thread(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn, per_thread=True)
    try:
        mine = {_pid(store) for _ in range(5)}
        assert len(mine) == 1  # the same connection, call after call
        theirs: list[int] = []
        workers = [threading.Thread(target=lambda: theirs.extend({_pid(store), _pid(store)}))
                   for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert len(theirs) == 3 and len(set(theirs) | mine) == 4  # one per thread
        conns = store._threads.opened()
    finally:
        store.close()
    assert conns and all(c.closed for c in conns)  # close() closed every thread's one


def test_per_thread_runs_the_engine_and_reconnects_after_a_lost_connection(
        pg_dsn: str, pg_admin_dsn: str) -> None:
    store = PostgresStore(rh.with_app_name(pg_dsn, "rs-per-thread"), per_thread=True)
    try:
        jobs = Lifecycle(store, JOBS)
        jobs.create_schema()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO jobs (id, state) VALUES ('j1', 'NEW')")
        assert jobs.transition("j1", "READY").applied
        before = _pid(store)
        rh.terminate(pg_admin_dsn, rh.backends(pg_admin_dsn, rh.dbname_of(pg_dsn),
                                               "rs-per-thread"))

        with pytest.raises(ConnectionLostError):  # a clear error, nothing half-applied
            jobs.transition("j1", "FAILED")
        assert jobs.state("j1") == "READY"  # the next call connected anew
        assert _pid(store) != before
        assert jobs.transition("j1", "FAILED").applied  # and the retry is safe
    finally:
        store.close()


def test_per_thread_takes_no_pool() -> None:
    with pytest.raises(ValueError, match="per_thread"):
        PostgresStore("", pool=object(), per_thread=True)  # type: ignore[arg-type]


def test_the_pool_reuses_one_cursor_per_connection(pg_dsn: str) -> None:
    """``conn.execute`` builds a cursor per call; the store keeps one per connection."""
    store = PostgresStore(pg_dsn, min_size=1, max_size=1)
    try:
        store.run(PID)
        assert store.pool is not None
        with store.pool.connection() as conn:
            first: Any = stores._cursors.get(conn)
        store.run(PID)
        with store.pool.connection() as conn:
            assert stores._cursors.get(conn) is first is not None
    finally:
        store.close()


# -- the asyncio pool under cancellation, and after a restart ------------------------------


async def test_cancelled_callers_give_their_connections_back(pg_dsn: str) -> None:
    """A web handler's deadline (``asyncio.wait_for(lifecycle.get(...), <4 ms)``) cancels
    callers mid-checkout; the pool must get every connection back, so the call after
    1,000 cancelled ones succeeds promptly (psycopg_pool 3.3.3 alone lost all of them)."""
    store = AsyncPostgresStore(pg_dsn, min_size=1, max_size=4)
    try:
        jobs = AsyncLifecycle(store, JOBS)
        await jobs.create_schema()
        await store.run(Batch((("INSERT INTO jobs (id, state) VALUES ('j1', 'NEW')", []),)))
        deadlines = itertools.cycle([0.0002, 0.0005, 0.001, 0.002, 0.004])
        cancelled = 0

        async def handler() -> None:
            nonlocal cancelled
            while cancelled < 1000:
                try:
                    await asyncio.wait_for(jobs.get("j1"), next(deadlines))
                except TimeoutError:
                    cancelled += 1

        await asyncio.wait_for(asyncio.gather(*[handler() for _ in range(20)]), 120)
        assert cancelled >= 1000
        started = time.monotonic()
        row = await asyncio.wait_for(jobs.get("j1"), 5)
        assert row is not None and row["state"] == "NEW"
        assert time.monotonic() - started < 2  # promptly: not a pool timeout
        until = time.monotonic() + 5  # the last orphaned checkouts hand theirs back
        while (stats := store.pool.get_stats())["pool_available"] < stats["pool_size"]:
            assert time.monotonic() < until, stats
            await asyncio.sleep(0.01)
        assert stats.get("requests_waiting", 0) == 0
    finally:
        await store.close()


@pytest.mark.postgres
@pytest.mark.timeout(120)
async def test_a_restarted_server_costs_no_failed_call() -> None:
    """Every pooled connection dies with a restart; the pool's check finds each dead one
    at checkout and replaces it, so no call fails once the server is back (both twins)."""
    try:
        server = pg_server.start_postgres()  # our own cluster: the shared one is not ours
    except services.ServiceUnavailable:
        try:
            server = pg_server.start_embedded_postgres()
        except services.ServiceUnavailable as exc:
            pytest.skip(f"no cluster of our own to restart: {exc}")
    sync_store = PostgresStore(server.admin_dsn, min_size=2, max_size=2)
    async_store = AsyncPostgresStore(server.admin_dsn, min_size=2, max_size=2)
    try:
        pids = {_pid(sync_store)} | {(await async_store.run(PID))[0][0][0]}
        await asyncio.gather(*[async_store.run(PID) for _ in range(4)])  # both conns used
        server.restart()
        for _ in range(5):  # each idle connection is dead: no call may see it
            assert _pid(sync_store) not in pids
            (got,) = (await async_store.run(PID))[0][0]
            assert got not in pids
        assert sync_store.pool is not None
        assert sync_store.pool.get_stats().get("connections_lost", 0) >= 1
    finally:
        sync_store.close()
        await async_store.close()
        server.stop()


# -- SQLite: one writer of a store at a time, queued in the process -------------------------


def test_sqlite_writers_of_one_store_queue_and_time_out_as_sqlite_would(
        tmp_path: Any) -> None:
    """A write unit holds the store's turn until it ends: another thread's write waits for
    it (and then runs), or fails with the busy timeout's "database is locked" when it is
    held longer; a read-only unit reads meanwhile; an after-commit callback that writes
    again on the same thread takes the turn again (re-entrant), instead of hanging."""
    import threading

    from rowstate import StoreError
    from rowstate.stores import SQLiteStore

    store = SQLiteStore(str(tmp_path / "w.db"), busy_timeout=0.3)
    store.execute_script("CREATE TABLE t (n INTEGER)")
    holding, release, waited = threading.Event(), threading.Event(), []

    def first() -> None:
        with store.atomic() as tx:
            tx.execute("INSERT INTO t VALUES (1)")
            holding.set()
            release.wait(10)

    def second() -> None:
        try:
            with store.atomic() as tx:
                tx.execute("INSERT INTO t VALUES (2)")
        except StoreError as exc:
            waited.append(str(exc))

    holder = threading.Thread(target=first)
    holder.start()
    assert holding.wait(10)
    other = threading.Thread(target=second)
    other.start()
    other.join(10)  # the turn is held past the busy timeout: refused, as SQLite refuses
    assert waited and "database is locked" in waited[0]
    with store.atomic(read_only=True) as tx:
        assert tx.execute("SELECT COUNT(*) AS n FROM t") == [{"n": 0}]
    release.set()
    holder.join(10)

    after: list[str] = []

    def write_again() -> None:
        with store.atomic() as again:
            again.execute("INSERT INTO t VALUES (4)")
        after.append("written")

    with store.atomic() as tx:
        tx.execute("INSERT INTO t VALUES (3)")
        tx.after_commit(write_again)
    assert after == ["written"]  # on its own thread's turn: no wait, no timeout
    with store.atomic(read_only=True) as tx:
        assert [r["n"] for r in tx.execute("SELECT n FROM t ORDER BY n")] == [1, 3, 4]
    store.close()
