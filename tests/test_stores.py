"""The PostgreSQL store's two ways to hold connections, on a real server: the pool (the
default) and ``per_thread=True`` (one connection kept per calling thread)."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

import race_helpers as rh
from engine_fixtures import JOBS
from rowstate import ConnectionLostError, Lifecycle, PostgresStore, stores
from rowstate.compiler import Batch

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
