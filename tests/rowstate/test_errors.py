"""Typed errors, always; "did not land" told from "may have landed"; one identity per key.

* Every error a caller can get is a :class:`~rowstate.RowstateError`, the driver's error
  kept as ``__cause__``: also when a SQLite connection opens (its PRAGMAs: a
  :class:`~rowstate.errors.ConnectError`, raised when the store is built) or a script runs.
* A statement PostgreSQL cancelled (``statement_timeout``) rolled back whole: it is a
  :class:`~rowstate.StatementCancelled`, not a :class:`~rowstate.ConnectionLostError`, so
  run() releases the lease at once instead of leaving it for its TTL.
* A key is canonicalised to its column's type, so one row has one identity in its events.

The contrib stores run two of these by default (``@conformance``), both error translation
by the store: test_a_too_deep_jsonb_value_read_is_a_store_error (the driver's
RecursionError, read through the wrapper's error) and
test_a_cancelled_transition_is_statement_cancelled (the server's cancel). The rest runs on
them under ``-m contrib``.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import rowstate
import rowstate.stores
from rowstate import (
    ActiveLease,
    ConnectionLostError,
    Lifecycle,
    RowstateError,
    StatementCancelled,
    StoreError,
    ValidationError,
)
from rowstate.ext import Batch
from rowstate.stores import SQLiteStore
from support.engine import (
    JOBS,
    SEATS,
    TICKETS,
    Backend,
    as_dict,
    conformance,
    events_of,
    on,
    refused_before_io,
)

# -- 7. typed errors -----------------------------------------------------------------------


def _sqlite_cause(exc: BaseException) -> None:
    assert isinstance(exc, StoreError), repr(exc)
    assert isinstance(exc.__cause__, sqlite3.Error), repr(exc.__cause__)


def test_a_sqlite_path_that_is_a_directory_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(rowstate.errors.ConnectError) as info:  # a StoreError, at once
        SQLiteStore(str(tmp_path))
    _sqlite_cause(info.value)


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database, only some text " * 200)
    with pytest.raises(rowstate.errors.ConnectError) as info:
        SQLiteStore(str(path))
    _sqlite_cause(info.value)


def test_a_database_locked_at_open_is_a_store_error(tmp_path: Path) -> None:
    """The connection's own PRAGMAs (journal_mode=WAL needs the lock) meet the busy wait."""
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (a)")  # a rollback-journal database, not yet WAL
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(rowstate.errors.ConnectError) as info:  # when the store is built
            SQLiteStore(str(path), busy_timeout=0.1)
        _sqlite_cause(info.value)
        assert "locked" in str(info.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_script_on_a_locked_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    store = SQLiteStore(str(path), busy_timeout=0.1)
    holder = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    try:
        lc = Lifecycle(store, JOBS)
        assert store.run(Batch((("SELECT 1", []),))) == [[(1,)]]  # its connection is open
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        with pytest.raises(StoreError) as info:
            lc.create_schema()
        _sqlite_cause(info.value)
        holder.execute("ROLLBACK")
        lc.create_schema()  # and once it is free, the same script runs
    finally:
        holder.close()
        store.close()


def test_the_postgres_script_error_is_typed(pg_dsn: str) -> None:
    store = rowstate.stores.PostgresStore(pg_dsn)
    try:
        with pytest.raises(StoreError) as info:
            store.execute_script("SELECT * FROM no_such_table")
        assert isinstance(info.value.__cause__, psycopg.Error)
    finally:
        store.close()


@pytest.mark.parametrize("make", [
    lambda: SQLiteStore(synchronous="FAST"),
    lambda: rowstate.connect("mysql://db"),
    lambda: rowstate.connect_async("mysql://db"),
    lambda: rowstate.connect("sqlite:relative.db"),
    lambda: rowstate.stores.PostgresStore("", pool=object(), per_thread=True),  # type: ignore[arg-type]
    lambda: JOBS.dialect_for("oracle"),
], ids=["synchronous", "url", "async-url", "sqlite-url", "per-thread-pool", "dialect"])
def test_configuration_mistakes_are_rowstate_errors(make: Any) -> None:
    with pytest.raises(ValidationError):  # still a ValueError, as before
        make()


@refused_before_io
def test_a_naive_injected_clock_is_a_validation_error(backend: Backend) -> None:
    jobs = backend.make(JOBS, clock=lambda: datetime(2026, 1, 1, 12, 0))  # no tzinfo
    backend.seed(JOBS, id="j1", state="NEW")
    with backend.no_io(), pytest.raises(ValidationError):
        jobs.transition("j1", "READY")
    assert backend.execute("SELECT state FROM jobs WHERE id = ?", "j1") == [("NEW",)]


@on("sync")
def test_an_async_act_under_the_sync_front_end_is_a_rowstate_error(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")

    async def act(lease: ActiveLease) -> bool:
        return True

    with pytest.raises(RowstateError) as info:
        jobs.run("j1", "start", act)
    assert isinstance(info.value, TypeError)  # still a TypeError, as before

    async def inner(lease: ActiveLease) -> bool:
        return True

    with pytest.raises(RowstateError) as info:
        jobs.run("j1", "start", lambda lease: inner(lease))
    assert isinstance(info.value, TypeError)
    assert as_dict(jobs.get("j1"))["lease_at"] is None


# -- 8. a cancelled statement did not land -------------------------------------------------


def _with_statement_timeout(conninfo: str, ms: int) -> str:
    options = conninfo_to_dict(conninfo).get("options") or ""
    return make_conninfo(conninfo, options=f"{options} -c statement_timeout={ms}".strip())


@on("postgres")
def test_a_finalize_cancelled_by_statement_timeout_releases_the_lease(
        backend: Backend) -> None:
    """The finalize writes the event row; another transaction holds the events table, so
    the finalize waits until statement_timeout cancels it. Nothing landed: run() releases
    the lease (the release touches only the row) and says why; the row is retryable now,
    not after the lease's TTL."""
    timed = Backend(backend.db, backend.mode, _with_statement_timeout(backend.where, 300),
                    backend.door)
    blocker = psycopg.connect(backend.where)  # a transaction, not autocommit
    try:
        jobs = timed.make(JOBS)
        timed.seed(JOBS, id="j1", state="READY")

        def act(lease: ActiveLease) -> bool:
            blocker.execute("LOCK TABLE rowstate_events IN EXCLUSIVE MODE")
            return True

        with pytest.raises(StatementCancelled) as info:
            jobs.run("j1", "start", act, holder="w1")
        assert not isinstance(info.value, ConnectionLostError)
        assert isinstance(info.value.__cause__, psycopg.errors.QueryCanceled)
        blocker.rollback()
        row = as_dict(jobs.get("j1"))
        assert (row["state"], row["lease_at"], row["lease_kind"]) == ("READY", None, None)
        assert "StatementCancelled" in row["last_error"]
        assert timed.count("rowstate_events") == 0
        assert jobs.run("j1", "start", lambda lease: True).applied  # retryable at once
    finally:
        blocker.close()
        timed.close()


@conformance
@on("postgres")
def test_a_cancelled_transition_is_statement_cancelled(backend: Backend) -> None:
    timed = Backend(backend.db, backend.mode, _with_statement_timeout(backend.where, 200),
                    backend.door)
    blocker = psycopg.connect(backend.where)
    try:
        jobs = timed.make(JOBS)
        timed.seed(JOBS, id="j1", state="NEW")
        blocker.execute("SELECT 1 FROM jobs WHERE id = 'j1' FOR UPDATE")  # the row's lock
        with pytest.raises(StatementCancelled):
            jobs.transition("j1", "READY")
        blocker.rollback()
        assert as_dict(jobs.get("j1"))["state"] == "NEW"
        assert jobs.transition("j1", "READY").applied
    finally:
        blocker.close()
        timed.close()


# -- 12. one identity per key ----------------------------------------------------------


def test_an_int_key_for_a_text_column_is_recorded_as_text(backend: Backend) -> None:
    jobs = backend.make(JOBS)  # "id" is TEXT (undeclared)
    backend.seed(JOBS, id="1", state="NEW")
    res = jobs.transition(1, "READY")
    assert res.applied, res
    assert res.event is not None and res.event.key == ("1",)
    assert jobs.transition("1", "FAILED", from_="READY").applied
    assert [e[1] for e in events_of(backend, "job")] == ['["1"]', '["1"]']
    assert [e.to_state for e in jobs.history(1)] == ["READY", "FAILED"]
    assert jobs.history(1) == jobs.history("1")
    assert as_dict(jobs.get(1))["id"] == "1"


def test_a_text_key_for_an_integer_column_is_recorded_as_an_int(backend: Backend) -> None:
    seats = backend.make(SEATS)  # "seat" is INTEGER
    backend.seed(SEATS, venue="v", seat=7, state="FREE")
    res = seats.transition(("v", "7"), "HELD")
    assert res.applied, res
    assert res.event is not None and res.event.key == ("v", 7)
    assert seats.transition({"venue": "v", "seat": 7}, "FREE").applied
    assert [e[1] for e in events_of(backend, "seat")] == ['["v", 7]', '["v", 7]']
    sent = backend.statements
    for bad in ("x", "7.0", " 7", str(2**63)):
        with pytest.raises(ValidationError):
            seats.get(("v", bad))
    assert backend.statements == sent


@conformance
@on("postgres")
def test_a_too_deep_jsonb_value_read_is_a_store_error(backend: Backend) -> None:
    """Another writer of the row stored JSON nested deeper than Python decodes: reading the
    row is a StoreError, not a bare RecursionError from inside psycopg."""
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    backend.execute("UPDATE jobs SET meta = ?::jsonb WHERE id = 'j1'",
                    "[" * 5000 + "]" * 5000)
    with pytest.raises(StoreError) as info:
        jobs.get("j1")
    assert isinstance(info.value.__cause__, RecursionError)
    backend.execute("UPDATE jobs SET meta = NULL WHERE id = 'j1'")
    assert as_dict(jobs.get("j1"))["state"] == "NEW"  # the store (its pool) still works


@pytest.mark.parametrize("args", [
    {"limit": "x"}, {"limit": None}, {"limit": -1}, {"limit": 1.5}, {"limit": True},
    {"limit": 2**70}, {"acts": 1}, {"acts": "x"}, {"acts": {"escalate": 1}}, {"notify": [1]},
    {"holder": 1}, {"holder": "\x00"}, {"holder": "\ud800"},
], ids=lambda a: f"{next(iter(a))}={next(iter(a.values()))!r}")
def test_bad_fire_due_arguments_are_validation_errors(args: dict[str, Any]) -> None:
    store = SQLiteStore()
    try:
        tickets = Lifecycle(store, TICKETS)
        tickets.create_schema()
        sent = store.statements
        call = {"acts": {"escalate": lambda lease: True}, "notify": {"remind": print}, **args}
        with pytest.raises(ValidationError):
            tickets.fire_due(**call)
        assert store.statements == sent
    finally:
        store.close()
