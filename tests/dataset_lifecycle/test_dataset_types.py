"""Issue 27: the seed's ``LifecycleConfig``, ``TransitionOptions`` and ``BusyReason``, used
where the seed uses them (``init``, ``transition``, ``check_busy``), and the persistence
sources' precedence, the seed's persistence > crudService > pool > environment: in Python
``persistence`` > ``store`` > ``pool`` > ``dsn`` > ``$MULTIPLATFORM_PG_CONNECTION_STRING``.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, get_args, get_type_hints

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import dataset_lifecycle
import rowstate
from dataset_lifecycle import (
    BUSY_SIGNALS,
    DEFAULT_LOAD_GUARDS,
    ENV_DSN,
    AsyncDatasetLifecycleApi,
    AsyncDatasetLifecycleClient,
    BusyCheckResult,
    BusyReason,
    DatasetLifecycleApi,
    DatasetLifecycleClient,
    LifecycleConfig,
    Reason,
    TransitionOptions,
    create_persistence_adapter,
    schema_sql,
)
from dataset_lifecycle.testing import AsyncMockDatasetLifecycle, MockDatasetLifecycle
from rowstate import UsageError, ValidationError
from support.dataset import EXTRA, ID, PAYLOAD, DictAdapter, Env, drop_pg_schema, new_pg_schema

SEED = Path("/work/shared/seeds/dataset-lifecycle.md")
BOGUS_DSN = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"
BUSY = ("DATALOADING_ACTIVE", "JOB_RUNNING", "JLO_RUNNING", "LOAD_QUEUED")
ALL_BUSY: dict[str, Any] = {"dataloadingStatus": "LOADING", "jobId": "job-1",
                            "queuedLoadToken": "t",
                            "__DR": {"isJobRunning": True, "isJLORunning": True}}


def test_the_three_types_are_exported_under_the_seeds_names() -> None:
    for name in ("LifecycleConfig", "TransitionOptions", "BusyReason"):
        assert name in dataset_lifecycle.__all__ and hasattr(dataset_lifecycle, name), name
        if SEED.exists():
            assert name in SEED.read_text()


# -- BusyReason ----------------------------------------------------------------------------


def test_busy_reason_is_the_seeds_union_of_plain_strings() -> None:
    assert get_args(BusyReason) == BUSY
    assert set(BUSY) <= {r.value for r in Reason}  # each is also a Reason
    assert get_type_hints(BusyCheckResult)["reasons"] == list[BusyReason]
    # the busy signals a row carries are the busy reasons but the status's own
    assert {reason for reason, _ in BUSY_SIGNALS.values()} == set(BUSY) - {"DATALOADING_ACTIVE"}


@pytest.mark.parametrize("kind", ["sqlite", "dict"])
def test_check_busy_reports_every_busy_reason_and_a_refused_load_the_same(
        kind: str, tmp_path: Path) -> None:
    env = Env(kind, "sync", str(tmp_path / "ds.db"))
    try:
        lc = env.make(load_guards=DEFAULT_LOAD_GUARDS)
        env.seed(**ALL_BUSY)
        busy = lc.check_busy(ID)
        assert (busy.busy, busy.reasons) == (True, list(BUSY))
        assert all(type(r) is str for r in busy.reasons)
        assert lc.is_busy(ID) is True
        env.seed(**{**ALL_BUSY, "dataloadingStatus": "FAILED"})
        refused = lc.transition(ID, to="LOADING", owner_job_id="job-2")
        assert refused.reasons == list(BUSY[1:]) == lc.check_busy(ID).reasons
        env.seed(dataloadingStatus="FAILED")
        assert lc.check_busy(ID).reasons == [] and lc.is_busy(ID) is False
    finally:
        env.close()


# -- TransitionOptions ---------------------------------------------------------------------


def _options() -> TransitionOptions:
    return TransitionOptions(to="SUCCEEDED", from_=["LOADING", "CANCELLING"],
                             owner_job_id="job-1", payload={"rowCount": 7},
                             event_data={"recordsAdded": 7},
                             guards={"__DR.isJobRunning": [None, False]})


def _keywords(options: TransitionOptions) -> dict[str, Any]:
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


@pytest.mark.parametrize("kind,mode", [("sqlite", "sync"), ("sqlite", "async"),
                                       ("dict", "sync")])
def test_transition_options_and_keywords_are_the_same_call(kind: str, mode: str,
                                                            tmp_path: Path) -> None:
    env = Env(kind, mode, str(tmp_path / "ds.db"))
    try:
        events: list[Any] = []
        lc = env.make(event_publisher=events.append)
        other = {"userId": "u1", "datasetId": "d2"}
        for ident in (ID, other):  # a guard the options carry refuses both alike
            env.seed(ident, dataloadingStatus="LOADING", jobId="job-1",
                     __DR={"isJobRunning": True})
        by_options = lc.transition(ID, _options())
        by_keywords = lc.transition(other, **_keywords(_options()))
        assert by_options == by_keywords and not by_options.applied
        assert by_options.reason == "GUARD_FAILED"
        for ident in (ID, other):
            env.seed(ident, dataloadingStatus="CANCELLING", jobId="job-1")
        assert lc.transition(ID, _options()) == lc.transition(other, **_keywords(_options()))
        for ident in (ID, other):
            row = env.row(ident)
            assert row is not None
            assert (row["dataloadingStatus"], row["rowCount"]) == ("SUCCEEDED", 7)
        assert [(e.from_, e.event_data) for e in events] == [
            ("CANCELLING", {"recordsAdded": 7})] * 2
    finally:
        env.close()


def test_a_transition_gives_options_or_keywords_and_always_a_target() -> None:
    lifecycle = MockDatasetLifecycle()
    lifecycle.set_initial_state(ID, {"dataloadingStatus": "LOADING", "jobId": "job-1"})
    bad: list[Callable[[], object]] = [
        lambda: lifecycle.transition(ID, TransitionOptions(to="FAILED"), to="FAILED"),
        lambda: lifecycle.transition(ID, TransitionOptions(to="FAILED"), owner_job_id="j"),
        lambda: lifecycle.transition(ID),
        lambda: lifecycle.transition(ID, from_="LOADING"),
        lambda: lifecycle.transition(ID, {"to": "FAILED"}),  # type: ignore[arg-type]
    ]
    for call in bad:
        with pytest.raises(UsageError) as info:
            call()
        assert isinstance(info.value, TypeError)  # as a missing argument is
    assert lifecycle.transition_calls == [] and lifecycle.get_status(ID) == "LOADING"
    options = TransitionOptions(to="FAILED", owner_job_id="job-1", event_data={"n": 1})
    result = lifecycle.transition(ID, options)
    [recorded] = lifecycle.transition_calls
    assert (recorded.to, recorded.from_, recorded.owner_job_id, recorded.event_data,
            recorded.result) == (
        "FAILED", None, "job-1", {"n": 1}, result)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.to = "LOADING"  # type: ignore[misc]
    lifecycle.close()


async def test_the_async_mock_takes_transition_options() -> None:
    lifecycle = AsyncMockDatasetLifecycle()
    lifecycle.set_initial_state(ID, {"dataloadingStatus": "LOADING", "jobId": "job-1"})
    assert (await lifecycle.transition(ID, TransitionOptions(to="CANCELLING",
                                                             owner_job_id="job-1"))).applied
    with pytest.raises(UsageError):
        await lifecycle.transition(ID, TransitionOptions(to="CANCELED"), to="CANCELED")
    assert [c.to for c in lifecycle.transition_calls] == ["CANCELLING"]
    await lifecycle.close()


def _parameters(fn: Any) -> list[tuple[str, Any]]:
    params = list(inspect.signature(fn).parameters.values())
    return [(p.name, p.kind) for p in params if p.name != "self"]


def test_every_transition_has_the_contracts_signature() -> None:
    """The protocols say ``transition(identifier, options=None, /, *, to=None, ...)`` and
    both clients and both mocks have exactly those parameters."""
    contract = _parameters(DatasetLifecycleApi.transition)
    assert contract[:2] == [("identifier", inspect.Parameter.POSITIONAL_ONLY),
                            ("options", inspect.Parameter.POSITIONAL_ONLY)]
    assert [name for name, _ in contract[2:]] == [
        f.name for f in dataclasses.fields(TransitionOptions)]
    for implementation in (AsyncDatasetLifecycleApi, DatasetLifecycleClient,
                           AsyncDatasetLifecycleClient, MockDatasetLifecycle,
                           AsyncMockDatasetLifecycle):
        assert _parameters(implementation.transition) == contract, implementation


# -- LifecycleConfig -----------------------------------------------------------------------


def test_init_keywords_are_the_configs_fields() -> None:
    """``init(**keywords)`` builds a LifecycleConfig: the same names, the same defaults, so
    the two forms cannot drift apart (the mocks take the rule options among them)."""
    fields = {f.name: f.default for f in dataclasses.fields(LifecycleConfig)}
    for client in (DatasetLifecycleClient, AsyncDatasetLifecycleClient):
        params = inspect.signature(client.init).parameters
        assert params["config"].kind is inspect.Parameter.POSITIONAL_ONLY
        keywords = {p.name: p.default for p in params.values()
                    if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert keywords == fields, client
    for mock in (MockDatasetLifecycle, AsyncMockDatasetLifecycle):
        params = inspect.signature(mock).parameters
        keywords = {p.name: p.default for p in params.values()
                    if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert keywords.items() <= fields.items(), mock
        assert not {"persistence", "store", "pool", "dsn"} & keywords.keys()


def test_init_takes_a_lifecycle_config(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/ds.db"
    with sqlite3.connect(tmp_path / "ds.db") as conn:
        conn.executescript(schema_sql("sqlite", extra_columns=EXTRA))
        conn.execute('INSERT INTO qv_dataset ("userId", "datasetId", "dataloadingStatus", '
                     '"__DR") VALUES (\'u1\', \'d1\', \'LOADING\', \'{"isJobRunning": true}\')')
    conn.close()
    events: list[Any] = []
    config = LifecycleConfig(dsn=url, payload_columns=(c for c in PAYLOAD),
                             reservation_field="__DR.isJobRunning",
                             load_guards=DEFAULT_LOAD_GUARDS, event_publisher=events.append)
    assert config.payload_columns == PAYLOAD  # a one-shot iterable kept as a tuple
    one, two = DatasetLifecycleClient(), DatasetLifecycleClient()
    one.init(config)
    two.init(config)  # a config is a value: reusable
    try:
        assert one.transition(ID, to="FAILED", payload={"rowCount": 3}).applied
        state = two.get_lifecycle_state(ID)
        assert state is not None and state.record["__DR"] == {"isJobRunning": False}
        assert state.record["rowCount"] == 3 and [e.to for e in events] == ["FAILED"]
        with sqlite3.connect(tmp_path / "ds.db") as conn:
            conn.execute("""UPDATE qv_dataset SET "queuedLoadToken" = 'q'""")
        conn.close()
        refused = two.transition(ID, to="LOADING", owner_job_id="job-2")
        assert refused.reasons == ["LOAD_QUEUED"]  # the config's load guards
    finally:
        one.reset()
        two.reset()


def test_init_takes_a_config_or_keywords_not_both(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/ds.db"
    lc = DatasetLifecycleClient()
    for call in (lambda: lc.init(LifecycleConfig(dsn=url), reservation_field="x"),
                 lambda: lc.init(LifecycleConfig(), dsn=url),
                 lambda: lc.init({"dsn": url})):  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            call()
        assert not lc.initialized
    with pytest.raises(ValidationError, match="stale_claim_ms"):  # checked by init
        lc.init(LifecycleConfig(dsn=url, stale_claim_ms=0))
    assert not lc.initialized
    with pytest.raises(dataclasses.FrozenInstanceError):
        LifecycleConfig().dsn = url  # type: ignore[misc]


def test_the_mock_takes_a_services_config_on_its_own_database() -> None:
    """A service's own config, source and all: the mock keeps its rules and runs on its
    private in-memory database (the bogus source is never opened)."""
    config = LifecycleConfig(dsn=BOGUS_DSN, pool=object(), load_guards=DEFAULT_LOAD_GUARDS,
                             reservation_field="__DR.isJobRunning")
    lifecycle = MockDatasetLifecycle(config)
    lifecycle.set_initial_state(ID, {"dataloadingStatus": "FAILED",
                                     "__DR": {"isJLORunning": True}})
    assert lifecycle.transition(ID, to="LOADING", owner_job_id="j").reasons == ["JLO_RUNNING"]
    lifecycle.reset()  # starts over with the same config
    lifecycle.set_initial_state(ID, {"dataloadingStatus": "LOADING", "jobId": "j",
                                     "__DR": {"isJobRunning": True}})
    assert lifecycle.transition(ID, to="SUCCEEDED", owner_job_id="j").applied
    state = lifecycle.get_lifecycle_state(ID)
    assert state is not None and state.record["__DR"] == {"isJobRunning": False}
    with pytest.raises(UsageError):
        MockDatasetLifecycle(config, reservation_field="y")
    lifecycle.close()


# -- the persistence sources and their precedence ------------------------------------------

ORDER = ("persistence", "store", "pool", "dsn")


def test_the_first_source_given_is_the_source() -> None:
    given: dict[str, Any] = {"persistence": DictAdapter(), "store": rowstate.connect("sqlite://"),
             "pool": object(), "dsn": "sqlite://"}
    assert LifecycleConfig().source == "environment"
    for n in range(1, len(ORDER) + 1):
        for names in itertools.combinations(ORDER, n):
            config = LifecycleConfig(**{name: given[name] for name in names})
            assert config.source == names[0], names  # combinations keep ORDER's order
    given["store"].close()


#: Each source holds the dataset in its own status: the status read says which one won.
STATUS = {"persistence": "CANCELED", "store": "FAILED", "pool": "SUCCEEDED",
          "dsn": "NOT_AVAILABLE", "environment": "LOADING"}


def _sqlite_db(path: Path, status: str) -> str:
    with sqlite3.connect(path) as conn:
        conn.executescript(schema_sql("sqlite", extra_columns=EXTRA))
        conn.execute('INSERT INTO qv_dataset ("userId", "datasetId", "dataloadingStatus") '
                     "VALUES ('u1', 'd1', ?)", [status])
    conn.close()
    return f"sqlite:///{path}"


@pytest.fixture
def pg_schema(ds_pg_database: str) -> Iterator[str]:
    schema = new_pg_schema(ds_pg_database)
    with psycopg.connect(ds_pg_database, autocommit=True) as conn:
        conn.execute(f'INSERT INTO {schema}.qv_dataset ("userId", "datasetId", '
                     '"dataloadingStatus") VALUES (%s, %s, %s)', ["u1", "d1", STATUS["pool"]])
    try:
        yield schema
    finally:
        drop_pg_schema(ds_pg_database, schema)


PAIRS = [pytest.param(higher, lower, id=f"{higher}-beats-{lower}",
                      marks=[pytest.mark.postgres] if "pool" in (higher, lower) else [])
         for higher, lower in itertools.pairwise((*ORDER, "environment"))]


@pytest.mark.parametrize("higher,lower", PAIRS)
def test_given_two_sources_the_higher_one_wins(higher: str, lower: str, tmp_path: Path,
                                               request: pytest.FixtureRequest,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real sources, the dataset in a different status in each: the lifecycle reads
    (and writes) the higher one's; the lower one is never opened."""
    adapter = DictAdapter()
    adapter.rows[("u1", "d1")] = {**ID, "dataloadingStatus": STATUS["persistence"]}
    store = rowstate.connect(_sqlite_db(tmp_path / "store.db", STATUS["store"]))
    schema, pool = "data_sources_datasets", None
    if "pool" in (higher, lower):
        dsn = request.getfixturevalue("ds_pg_database")
        schema = request.getfixturevalue("pg_schema")
        pool = ConnectionPool(dsn, min_size=1, max_size=2, open=True)
    sources: dict[str, Any] = {
        "persistence": adapter, "store": store, "pool": pool,
        "dsn": _sqlite_db(tmp_path / "dsn.db", STATUS["dsn"])}
    monkeypatch.setenv(ENV_DSN, _sqlite_db(tmp_path / "env.db", STATUS["environment"]))
    config = LifecycleConfig(schema=schema, payload_columns=PAYLOAD,
                             **{name: sources[name] for name in (higher, lower)
                                if name != "environment"})
    assert config.source == higher
    lc = DatasetLifecycleClient()
    lc.init(config)
    try:
        assert lc.get_status(ID) == STATUS[higher]
        to = "LOADING" if STATUS[higher] != "LOADING" else "SUCCEEDED"
        assert lc.transition(ID, to=to, owner_job_id="job-9").applied
        assert lc.get_status(ID) == to
    finally:
        lc.reset()
        if pool is not None:
            assert not pool.closed  # the caller's
            pool.close()
    # the given store stayed open (reset closes only what init opened), and the lower
    # source still holds its own status: nothing went there
    probe = DatasetLifecycleClient()
    probe.init(store=store, schema=schema)
    try:
        assert probe.get_status(ID) == (to if higher == "store" else STATUS["store"])
    finally:
        probe.reset()
        store.close()
    if lower == "persistence" or higher == "persistence":
        expected = to if higher == "persistence" else STATUS["persistence"]
        assert adapter.rows[("u1", "d1")]["dataloadingStatus"] == expected


@pytest.mark.postgres
async def test_async_a_store_beats_a_pool_and_stays_the_callers(
        ds_pg_database: str, pg_schema: str, tmp_path: Path) -> None:
    store = rowstate.connect_async(_sqlite_db(tmp_path / "store.db", STATUS["store"]))
    async with AsyncConnectionPool(ds_pg_database, min_size=1, max_size=2,
                                   open=False) as pool:
        lc = AsyncDatasetLifecycleClient()
        lc.init(LifecycleConfig(store=store, pool=pool, schema=pg_schema))
        try:
            assert await lc.get_status(ID) == STATUS["store"]
        finally:
            await lc.reset()
        lc.init(pool=pool, schema=pg_schema)  # and without the store, the pool
        try:
            assert await lc.get_status(ID) == STATUS["pool"]
        finally:
            await lc.reset()
    again = AsyncDatasetLifecycleClient()
    again.init(store=store)
    try:
        assert await again.get_status(ID) == STATUS["store"]  # still open
    finally:
        await again.reset()
        await store.close()


def test_a_given_store_is_checked_at_init_and_never_closed(tmp_path: Path) -> None:
    store = rowstate.connect("sqlite://")  # in memory: closing it would lose the table
    sync, async_ = DatasetLifecycleClient(), AsyncDatasetLifecycleClient()
    bad: list[tuple[Callable[[], object], type[Exception]]] = [
        (lambda: sync.init(store=rowstate.connect_async("sqlite://")), UsageError),  # type: ignore[arg-type]
        (lambda: async_.init(store=store), UsageError),  # type: ignore[arg-type]
        (lambda: sync.init(store=object()), ValidationError),  # type: ignore[arg-type]
    ]
    for call, error in bad:
        with pytest.raises(error, match="store"):
            call()
        assert not sync.initialized and not async_.initialized
    sync.init(store=store, payload_columns=PAYLOAD)  # no table yet: create_schema next
    try:
        sync.create_schema(extra_columns=EXTRA)
        assert sync.get_status(ID) is None
    finally:
        sync.reset()
    store.execute_script('INSERT INTO qv_dataset ("userId", "datasetId") '
                         "VALUES ('u1', 'd1')")
    with pytest.raises(ValidationError, match="nope"):  # a column the table lacks
        sync.init(store=store, payload_columns=("nope",))
    adapter = create_persistence_adapter(store=store)
    assert adapter.get_by_keys("qv_dataset", ID)["dataloadingStatus"] == "NOT_AVAILABLE"
    adapter.close()
    sync.init(store=store)
    try:
        assert sync.get_status(ID) == "NOT_AVAILABLE"  # the failed init left it open too
    finally:
        sync.reset()
        store.close()
