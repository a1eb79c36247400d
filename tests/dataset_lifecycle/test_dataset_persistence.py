"""init(), its persistence sources and their precedence, the default adapter's shape
semantics, the adapter path against the engine path, publishers, the migration on an
existing table."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from dataset_lifecycle import (
    ENV_DSN,
    MIGRATION_SQL,
    AsyncDatasetLifecycle,
    AsyncDatasetLifecycleClient,
    DatasetLifecycle,
    DatasetLifecycleClient,
    LifecycleNotInitializedError,
    ValidationError,
    create_persistence_adapter,
    schema_sql,
)
from rowstate import RowstateError
from support.dataset import (
    EXTRA,
    ID,
    PAYLOAD,
    AsyncDictAdapter,
    Clock,
    DictAdapter,
    Env,
    drop_pg_schema,
    new_pg_schema,
)

BOGUS_DSN = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"



@pytest.fixture
def pg_schema(ds_pg_database: str) -> Iterator[str]:
    schema = new_pg_schema(ds_pg_database)
    with psycopg.connect(ds_pg_database, autocommit=True) as conn:
        conn.execute(f'INSERT INTO {schema}.qv_dataset ("userId", "datasetId", '
                     '"dataloadingStatus") VALUES (%s, %s, %s)', ["u1", "d1", "SUCCEEDED"])
    try:
        yield schema
    finally:
        drop_pg_schema(ds_pg_database, schema)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    path = tmp_path / "ds.db"
    conn = sqlite3.connect(path)
    conn.executescript(schema_sql("sqlite", extra_columns=EXTRA))
    conn.execute('INSERT INTO qv_dataset ("userId", "datasetId", "dataloadingStatus") '
                 "VALUES ('u1', 'd1', 'FAILED')")
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


# -- init and reset ------------------------------------------------------------------------


def test_every_method_needs_init_and_reset_returns_there(sqlite_url: str) -> None:
    lc = DatasetLifecycleClient()
    calls: list[Callable[[], object]] = [
        lambda: lc.transition(ID, to="FAILED"), lambda: lc.claim_finalization(ID, "j"),
        lambda: lc.release_claim(ID, "j"), lambda: lc.get_lifecycle_state(ID),
        lambda: lc.check_busy(ID), lambda: lc.is_busy(ID),
        lambda: lc.can_transition_to(ID, "LOADING"), lambda: lc.get_status(ID),
        lambda: lc.is_loading(ID), lambda: lc.create_schema()]
    for call in calls:
        with pytest.raises(LifecycleNotInitializedError):
            call()
    lc.init(dsn=sqlite_url)
    assert lc.initialized and lc.get_status(ID) == "FAILED"
    with pytest.raises(ValidationError, match="already initialized"):
        lc.init(dsn=sqlite_url)
    lc.reset()
    lc.reset()  # idempotent
    for call in calls:
        with pytest.raises(LifecycleNotInitializedError):
            call()
    assert not DatasetLifecycle.initialized and not AsyncDatasetLifecycle.initialized
    assert isinstance(DatasetLifecycle, DatasetLifecycleClient)
    assert isinstance(AsyncDatasetLifecycle, AsyncDatasetLifecycleClient)


async def test_the_async_twin_needs_init_too(sqlite_url: str) -> None:
    lc = AsyncDatasetLifecycleClient()
    with pytest.raises(LifecycleNotInitializedError):
        await lc.get_status(ID)
    lc.init(dsn=sqlite_url)  # a plain call
    try:
        assert await lc.get_status(ID) == "FAILED"
        assert await lc.is_busy(ID) is False
    finally:
        await lc.reset()
    with pytest.raises(LifecycleNotInitializedError):
        await lc.check_busy(ID)


def test_a_bad_configuration_fails_at_init(sqlite_url: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_DSN, raising=False)
    lc = DatasetLifecycleClient()
    for bad in ({"stale_claim_ms": 0}, {"stale_claim_ms": True},
                {"load_guards": {"nope": None}}, {"load_guards": ["x"]},
                {"payload_columns": "rowCount"}, {"reservation_field": ""},
                {"payload_columns": ("jobId",)}, {"table_name": "bad-name"},
                {"pool": object()}, {"dsn": "mysql://x"}):
        with pytest.raises(ValidationError):
            lc.init(**({"dsn": sqlite_url} | bad))
        assert not lc.initialized
    with pytest.raises(ValidationError, match=ENV_DSN):
        lc.init()
    with pytest.raises(ValidationError, match="update_by_expression"):
        lc.init(persistence=object())


# -- the sources and their precedence ------------------------------------------------------


def test_the_environment_is_the_turnkey_source(ds_pg_database: str, pg_schema: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DSN, ds_pg_database)
    lc = DatasetLifecycleClient()
    lc.init(schema=pg_schema)
    try:
        assert lc.get_status(ID) == "SUCCEEDED"
    finally:
        lc.reset()


def test_dsn_beats_the_environment(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DSN, BOGUS_DSN)
    lc = DatasetLifecycleClient()
    lc.init(dsn=sqlite_url)
    try:
        assert lc.get_status(ID) == "FAILED"
    finally:
        lc.reset()


def test_a_pool_beats_dsn_and_stays_open(ds_pg_database: str, pg_schema: str) -> None:
    with ConnectionPool(ds_pg_database, min_size=1, max_size=2, open=True) as pool:
        lc = DatasetLifecycleClient()
        lc.init(pool=pool, dsn=BOGUS_DSN, schema=pg_schema)
        assert lc.transition(ID, to="LOADING", owner_job_id="j1").applied
        lc.reset()
        assert not pool.closed  # the caller's pool is the caller's to close
        with pool.connection() as conn:
            got = conn.execute(f'SELECT "jobId" FROM {pg_schema}.qv_dataset').fetchone()
        assert got == ("j1",)


async def test_an_async_pool(ds_pg_database: str, pg_schema: str) -> None:
    async with AsyncConnectionPool(ds_pg_database, min_size=1, max_size=2,
                                   open=False) as pool:
        lc = AsyncDatasetLifecycleClient()
        with pytest.raises(ValidationError, match="AsyncConnectionPool"):
            lc.init(pool=ConnectionPool(ds_pg_database, open=False), schema=pg_schema)
        lc.init(pool=pool, schema=pg_schema)
        try:
            assert (await lc.transition(ID, to="LOADING", owner_job_id="j1")).applied
        finally:
            await lc.reset()
        assert not pool.closed


def test_persistence_beats_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DSN, BOGUS_DSN)
    adapter = DictAdapter()
    Env("dict", "sync", "").close()
    adapter.rows[("u1", "d1")] = {"userId": "u1", "datasetId": "d1",
                                  "dataloadingStatus": "CANCELED"}
    lc = DatasetLifecycleClient()
    lc.init(persistence=adapter, pool=object(), dsn=BOGUS_DSN, table_name="datasets")
    try:
        assert lc.get_status(ID) == "CANCELED"
        assert adapter.tables == {"datasets"}  # the adapter is told the table's name
        with pytest.raises(ValidationError, match="database"):
            lc.create_schema()
    finally:
        lc.reset()


def test_create_schema_on_a_new_install(tmp_path: Path) -> None:
    lc = DatasetLifecycleClient()
    lc.init(dsn=f"sqlite:///{tmp_path}/new.db", payload_columns=PAYLOAD)
    try:
        lc.create_schema(extra_columns=EXTRA)
        lc.create_schema(extra_columns=EXTRA)  # idempotent
        assert lc.get_status(ID) is None
    finally:
        lc.reset()


def test_the_migration_upgrades_an_existing_services_table(pg_dsn: str) -> None:
    """The existing service's table, before the seed's migration: the migration verbatim,
    twice (idempotent), then the lifecycle works on it."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("""
            CREATE SCHEMA data_sources_datasets;
            CREATE TABLE data_sources_datasets.qv_dataset (
                "userId" VARCHAR(255) NOT NULL, "datasetId" VARCHAR(255) NOT NULL,
                "dataloadingStatus" VARCHAR(32), "jobId" VARCHAR(255), "__DR" JSONB,
                "queuedLoadToken" VARCHAR(255), "name" TEXT,
                PRIMARY KEY ("userId", "datasetId"));
            INSERT INTO data_sources_datasets.qv_dataset VALUES
                ('u1', 'd1', 'LOADING', 'job-1', '{"isJobRunning": true}', NULL, 'sales');
        """)
        conn.execute(MIGRATION_SQL)
        conn.execute(MIGRATION_SQL)
        conn.execute(schema_sql("postgresql"))
        index = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = "
                             "'idx_qv_dataset_finalizing_claim'").fetchone()
    assert index is not None and 'WHERE ("finalizingJobId" IS NOT NULL)' in index[0]
    lc = DatasetLifecycleClient()
    lc.init(dsn=pg_dsn, reservation_field="__DR.isJobRunning")
    try:
        assert lc.claim_finalization(ID, "job-1", scope="complete").claimed
        assert lc.transition(ID, to="SUCCEEDED", owner_job_id="job-1").applied
        state = lc.get_lifecycle_state(ID)
        assert state is not None and state.status == "SUCCEEDED"
        assert state.record["__DR"] == {"isJobRunning": False}
        assert "name" not in state.record  # the snapshot holds the lifecycle's columns
    finally:
        lc.reset()


# -- the default adapter's shapes ----------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_adapter(request: pytest.FixtureRequest, sqlite_url: str) -> Iterator[Any]:
    if request.param == "sqlite":
        adapter = create_persistence_adapter(dsn=sqlite_url, payload_columns=PAYLOAD)
        try:
            yield adapter
        finally:
            adapter.close()
        return
    dsn = request.getfixturevalue("ds_pg_database")
    schema = request.getfixturevalue("pg_schema")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {schema}.qv_dataset SET \"dataloadingStatus\" = 'FAILED'")
    adapter = create_persistence_adapter(dsn=dsn, schema=schema, payload_columns=PAYLOAD)
    try:
        yield adapter
    finally:
        adapter.close()


def test_the_default_adapter_reads_records_as_plain_data(store_adapter: Any) -> None:
    assert store_adapter.get_by_keys("qv_dataset", {"userId": "u1", "datasetId": "x"}) is None
    clock = Clock()
    assert store_adapter.update_by_expression(
        "qv_dataset", {"__DR.isJobRunning": True, "finalizingClaimTime": clock.now,
                       "rowCount": 3}, {**ID, "dataloadingStatus": "FAILED"})
    row = store_adapter.get_by_keys("qv_dataset", ID)
    assert row["__DR"] == {"isJobRunning": True} and row["rowCount"] == 3
    assert isinstance(row["finalizingClaimTime"], datetime)
    assert row["finalizingClaimTime"] == clock.now
    # the observed time, handed back, matches exactly (what a claim steal relies on)
    assert store_adapter.update_by_expression(
        "qv_dataset", {"finalizingJobId": "j"},
        {**ID, "finalizingClaimTime": row["finalizingClaimTime"]})


def test_the_default_adapter_condition_semantics(store_adapter: Any) -> None:
    table = "qv_dataset"

    def write(condition: dict[str, Any]) -> bool:
        return bool(store_adapter.update_by_expression(table, {"metadataId": "m"},
                                                       {**ID, **condition}))

    assert write({"dataloadingStatus": "FAILED"})
    assert not write({"dataloadingStatus": "LOADING"})
    assert write({"dataloadingStatus": ["LOADING", "FAILED"]})  # one of
    assert write({"jobId": None})                               # IS NULL
    assert write({"__DR.isJobRunning": [None, False]})          # missing key counts
    assert not write({"__DR.isJobRunning": True})
    assert store_adapter.update_by_expression(table, {"__DR.isJobRunning": False,
                                                      "__DR.isJLORunning": True}, ID)
    assert write({"__DR.isJobRunning": [None, False], "__DR.isJLORunning": True})
    assert not write({"__DR.isJobRunning": [None, True]})
    assert store_adapter.update_by_expression(table, {"__DR.other": 1}, ID)
    assert store_adapter.get_by_keys(table, ID)["__DR"] == {
        "isJobRunning": False, "isJLORunning": True, "other": 1}  # other keys kept
    assert store_adapter.update_by_expression(table, {"jobId": None}, ID)
    assert not store_adapter.update_by_expression(table, {"jobId": "x"},
                                                  {"userId": "u1", "datasetId": "nope"})
    for bad in ({**ID, "nope": 1}, {"userId": "u1"}, {**ID, "jobId": []},
                {**ID, "jobId": {"a": 1}}):
        with pytest.raises(ValidationError):
            store_adapter.update_by_expression(table, {"jobId": "x"}, bad)
    with pytest.raises(ValidationError):
        store_adapter.update_by_expression(table, {"userId": "u2"}, ID)
    with pytest.raises(ValidationError):
        store_adapter.update_by_expression("other_table", {"jobId": "x"}, ID)
    with pytest.raises(ValidationError):
        store_adapter.get_by_keys(table, {"userId": "u1"})


async def test_the_async_default_adapter(sqlite_url: str) -> None:
    adapter = create_persistence_adapter(dsn=sqlite_url, asynchronous=True)
    try:
        assert (await adapter.get_by_keys("qv_dataset", ID))["dataloadingStatus"] == "FAILED"
        assert await adapter.update_by_expression("qv_dataset", {"jobId": "j"}, ID)
    finally:
        await adapter.close()


# -- the adapter path and the engine path agree ----------------------------------------------


def test_the_adapter_path_writes_what_the_engine_writes(tmp_path: Path) -> None:
    """The same script on the engine (SQLite) and on the dict adapter, one clock: the rows
    agree after every step. (The adapter path reads the engine's checks; this pins the
    writes too.)"""
    clock = Clock()
    envs = [Env("sqlite", "sync", f"{tmp_path}/a.db"), Env("dict", "sync", "")]
    options = {"reservation_field": "__DR.isJobRunning", "clock": clock,
               "load_guards": {"__DR.isJLORunning": [None, False], "queuedLoadToken": None},
               "stale_claim_ms": 10_000}
    lcs = [env.make(**options) for env in envs]
    try:
        for env in envs:
            env.seed(dataloadingStatus="NOT_AVAILABLE", __DR={"isJobRunning": True, "k": 1})
        script: list[Any] = [
            lambda lc: lc.transition(ID, to="LOADING", owner_job_id="job-1"),
            lambda lc: lc.claim_finalization(ID, "job-1", scope="complete"),
            lambda lc: lc.claim_finalization(ID, "job-1", scope="cancel"),
            lambda lc: lc.transition(ID, to="CANCELLING", owner_job_id="job-1"),
            "advance",
            lambda lc: lc.claim_finalization(ID, "job-1", scope="cancel"),
            lambda lc: lc.transition(ID, to="FAILED", owner_job_id="job-2"),
            lambda lc: lc.transition(ID, from_=["LOADING", "CANCELLING"], to="CANCELED",
                                     owner_job_id="job-1", payload={"rowCount": 0}),
            lambda lc: lc.release_claim(ID, "job-1", scope="cancel"),
            lambda lc: lc.transition(ID, to="NOT_AVAILABLE"),
            lambda lc: lc.transition(ID, to="LOADING", owner_job_id="job-2",
                                     payload={"metadataId": "m"}),
        ]
        for step in script:
            if step == "advance":
                clock.advance(11)
                continue
            results = [step(lc) for lc in lcs]
            assert results[0] == results[1]
            rows = [env.row() for env in envs]
            assert rows[0] is not None and rows[1] is not None
            assert rows[0] == {**rows[1], **{k: None for k in set(rows[0]) - set(rows[1])}}
        assert rows[0] is not None and rows[0]["__DR"] == {"isJobRunning": False, "k": 1}
    finally:
        for env in envs:
            env.close()


def test_the_adapter_paths_conditions_are_the_rules_branch_that_holds() -> None:
    """A known from-state: one conditional write, no read. A claim: a read, then a write
    conditioned on the branch of "free, ours, or stale" that held: the steal is pinned to
    the exact claim time it saw, so of two stealers only one can win."""
    clock = Clock()
    env = Env("dict", "sync", "")
    lc = env.make(clock=clock, stale_claim_ms=1_000)
    try:
        env.seed(dataloadingStatus="LOADING", jobId="j")
        env.dict.calls.clear()
        assert lc.transition(ID, from_="LOADING", to="CANCELLING", owner_job_id="j").applied
        assert env.dict.calls == [("update", {"dataloadingStatus": "CANCELLING"},
                                   {**ID, "dataloadingStatus": "LOADING", "jobId": "j"})]
        env.dict.calls.clear()
        assert lc.claim_finalization(ID, "j", scope="s").claimed  # free
        assert [c[0] for c in env.dict.calls] == ["get", "update"]
        assert env.dict.calls[1][2] == {**ID, "finalizingJobId": None}
        env.dict.calls.clear()
        assert lc.claim_finalization(ID, "j", scope="s").claimed  # a redelivery: ours
        assert env.dict.calls[1][2] == {**ID, "finalizingJobId": "j", "finalizingScope": "s"}
        seen = clock.now
        clock.advance(2)
        env.dict.calls.clear()
        assert lc.claim_finalization(ID, "j", scope="t").claimed  # stale: stolen
        assert env.dict.calls[1][1] == {"finalizingJobId": "j", "finalizingScope": "t",
                                        "finalizingClaimTime": clock.now}
        assert env.dict.calls[1][2] == {**ID, "finalizingClaimTime": seen}
    finally:
        env.close()


def test_an_async_adapter_under_the_sync_api_is_a_type_error() -> None:
    lc = DatasetLifecycleClient()
    lc.init(persistence=AsyncDictAdapter(DictAdapter()))
    try:
        with pytest.raises(TypeError, match="AsyncDatasetLifecycle") as info:
            lc.get_status(ID)
        assert isinstance(info.value, RowstateError)  # typed, and still a TypeError
    finally:
        lc.reset()


def test_a_dishonest_adapter_cannot_loop_forever(caplog: pytest.LogCaptureFixture) -> None:
    class Refuses(DictAdapter):
        def update_by_expression(self, table: str, update: Any, condition: Any) -> bool:
            super().update_by_expression(table, {}, {**condition, "userId": "nobody"})
            return False

    adapter = Refuses()
    adapter.rows[("u1", "d1")] = {"userId": "u1", "datasetId": "d1",
                                  "dataloadingStatus": "LOADING"}
    lc = DatasetLifecycleClient()
    lc.init(persistence=adapter)
    try:
        with caplog.at_level(logging.WARNING, logger="dataset_lifecycle"):
            res = lc.transition(ID, from_="LOADING", to="FAILED")
        assert (res.applied, res.reason) == (False, "STATE_MISMATCH")
        assert "is its CAS honest" in caplog.text
        assert sum(1 for c in adapter.calls if c[0] == "update") == 5
    finally:
        lc.reset()


# -- publishers ----------------------------------------------------------------------------


def test_publishers_may_be_async_or_plain_callables() -> None:
    got: list[Any] = []

    class AsyncPublisher:
        async def publish(self, event: Any) -> None:
            await asyncio.sleep(0)
            got.append(("async", event.to))

    for publisher in (AsyncPublisher(), lambda event: got.append(("callable", event.to))):
        env = Env("dict", "sync", "")
        lc = env.make(event_publisher=publisher)
        try:
            env.seed(dataloadingStatus="LOADING", jobId="j")
            assert lc.transition(ID, to="FAILED", owner_job_id="j").applied
        finally:
            env.close()
    assert got == [("async", "FAILED"), ("callable", "FAILED")]


async def test_an_async_publisher_under_the_sync_api_inside_a_running_loop() -> None:
    got: list[str] = []

    class AsyncPublisher:
        async def publish(self, event: Any) -> None:
            got.append(event.to)

    env = Env("dict", "sync", "")
    lc = env.make(event_publisher=AsyncPublisher())
    try:
        env.seed(dataloadingStatus="LOADING", jobId="j")
        assert lc.transition(ID, to="FAILED", owner_job_id="j").applied
        await asyncio.sleep(0.01)  # it ran as a task on this loop
        assert got == ["FAILED"]
    finally:
        env.close()
