"""dataset_lifecycle on the rules of issue 10, on every persistence path and front end:

1. ``__DR.isJobRunning = 0`` is not "not running": the dry run, the busy check, the snapshot
   and the write agree (a JSON number is not a boolean);
2. the reasons of a refused result are plain strings;
3. / 4. the reservation write lands whatever ``__DR`` holds (missing objects created, a
   non-object document replaced), so a terminal move is never blocked by it;
5. a configured column the table lacks is one clear error at ``init`` (the async ``init``
   does no I/O: on first use).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql as pg_sql
from psycopg.types.json import Jsonb

import rowstate
from dataset_lifecycle import (
    AsyncDatasetLifecycleClient,
    DatasetLifecycleClient,
    ValidationError,
)
from dataset_lifecycle._rules import block_reasons, refused
from support.dataset import ID, Env, drop_pg_schema, env_params, new_pg_schema

GUARDS = {"__DR.isJobRunning": [None, False]}
SQL_NULL: Any = object()


@pytest.fixture(scope="module")
def ds_pg_schema(ds_pg_database: str) -> Iterator[str]:
    schema = new_pg_schema(ds_pg_database)
    try:
        yield schema
    finally:
        drop_pg_schema(ds_pg_database, schema)


@pytest.fixture(params=env_params())
def env(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Env]:
    kind, _ = request.param
    if kind in ("postgres", "adapter-pg"):
        made = Env(*request.param, request.getfixturevalue("ds_pg_database"),
                   request.getfixturevalue("ds_pg_schema"))
    else:
        made = Env(*request.param, f"{tmp_path}/datasets.db")
    try:
        yield made
    finally:
        made.close()


def set_dr(env: Env, doc: Any) -> None:
    """Write ``__DR`` as any JSON value (or SQL NULL), behind the library's back."""
    if env.kind == "dict":
        with env.dict.lock:
            env.dict.rows[(ID["userId"], ID["datasetId"])]["__DR"] = (
                None if doc is SQL_NULL else doc)
        return
    if env.kind == "sqlite":
        conn = sqlite3.connect(env.sqlite_path, isolation_level=None)
        try:
            conn.execute('UPDATE qv_dataset SET "__DR" = ?',
                         (None if doc is SQL_NULL else json.dumps(doc),))
        finally:
            conn.close()
        return
    env.pg().execute(pg_sql.SQL('UPDATE {} SET "__DR" = %s').format(
        pg_sql.Identifier(env.schema, "qv_dataset")), [None if doc is SQL_NULL else Jsonb(doc)])


# -- 1 and 2: a JSON number is not a boolean; reasons are plain strings --------------------


@pytest.mark.parametrize("flag", [0, 1])
def test_a_json_number_is_not_false_for_the_load_guard(env: Env, flag: int) -> None:
    """PostgreSQL refused the load as STATE_MISMATCH while the dry run and the busy check
    said go; the adapter path retried five times ("is its CAS honest?")."""
    lc = env.make(load_guards=GUARDS)
    env.seed(dataloadingStatus="FAILED", __DR={"isJobRunning": flag})

    dry = lc.can_transition_to(ID, "LOADING", owner_job_id="job-1")
    busy = lc.check_busy(ID)
    state = lc.get_lifecycle_state(ID)
    res = lc.transition(ID, to="LOADING", owner_job_id="job-1")

    assert (dry.allowed, dry.reasons) == (False, ["JOB_RUNNING"])
    assert (busy.busy, busy.reasons) == (True, ["JOB_RUNNING"])
    assert state is not None and state.is_job_running is True
    assert (res.applied, res.reason, res.reasons) == (False, "GUARD_FAILED", ["JOB_RUNNING"])
    assert all(type(r) is str for r in [res.reason, *res.reasons, *dry.reasons])
    assert env.row() is not None and env.row()["dataloadingStatus"] == "FAILED"  # type: ignore[index]


def test_a_json_false_is_still_not_running(env: Env) -> None:
    lc = env.make(load_guards=GUARDS)
    env.seed(dataloadingStatus="FAILED", __DR={"isJobRunning": False})
    assert lc.can_transition_to(ID, "LOADING", owner_job_id="job-1").allowed
    assert not lc.check_busy(ID).busy
    assert lc.transition(ID, to="LOADING", owner_job_id="job-1").applied


def test_reasons_of_a_refusal_are_plain_strings() -> None:
    """The engine's reasons are its ``Reason`` members (a StrEnum); a STATE_MISMATCH the
    table does not explain (the row moved between the write and the read) was passed on as
    the member itself, ``<Reason.STATE_MISMATCH: 'STATE_MISMATCH'>`` in the logs."""
    engine = (rowstate.Reason.STATE_MISMATCH, rowstate.Reason.NOT_OWNER, "JOB_RUNNING")
    for reasons in (block_reasons(engine, "FAILED", "LOADING"),
                    refused(rowstate.Reason.STATE_MISMATCH, engine, "FAILED", "LOADING").reasons):
        assert reasons == ["STATE_MISMATCH", "NOT_OWNER", "JOB_RUNNING"]
        assert [type(r) for r in reasons] == [str, str, str]
    got = refused(rowstate.Reason.NOT_OWNER, engine, "FAILED", "LOADING")
    assert type(got.reason) is str


# -- 3 and 4: the reservation write always lands --------------------------------------------


def test_a_nested_reservation_field_creates_its_objects(env: Env) -> None:
    """``reservation_field="__DR.flags.running"`` on ``{"other": 1}``: PostgreSQL applied
    the terminal move and left ``__DR`` unchanged."""
    lc = env.make(reservation_field="__DR.flags.running")
    env.seed(dataloadingStatus="LOADING", jobId="job-1", __DR={"other": 1})

    res = lc.transition(ID, to="FAILED", owner_job_id="job-1")

    assert res.applied
    want = {"other": 1, "flags": {"running": False}}
    assert env.row()["__DR"] == want  # type: ignore[index]
    state = lc.get_lifecycle_state(ID)
    assert state is not None and state.record["__DR"] == want


@pytest.mark.parametrize("doc", [None, "x", [1], 5, True, SQL_NULL],
                         ids=["json-null", "string", "array", "number", "true", "sql-null"])
def test_a_terminal_move_is_not_blocked_by_what_dr_holds(env: Env, doc: Any) -> None:
    """A ``__DR`` of JSON null, ``"x"`` or ``[1]``: PostgreSQL raised "cannot set path in
    scalar" and the dataset stayed LOADING; SQLite applied the move without the flag."""
    lc = env.make(reservation_field="__DR.isJobRunning")
    env.seed(dataloadingStatus="LOADING", jobId="job-1")
    set_dr(env, doc)

    res = lc.transition(ID, to="FAILED", owner_job_id="job-1")

    assert res.applied
    row = env.row()
    assert row is not None and row["dataloadingStatus"] == "FAILED"
    assert row["__DR"] == {"isJobRunning": False}


# -- 5: configured columns are checked against the table -------------------------------------


@pytest.mark.parametrize("env", env_params("sqlite", "postgres"), indirect=True)
@pytest.mark.parametrize(("option", "column", "source"), [
    ({"payload_columns": ("rowCont",)}, "rowCont", "payload_columns"),
    ({"reservation_field": "flags.running"}, "flags", "reservation_field"),
    ({"load_guards": {"flags.busy": None}}, "flags", "load_guards"),
])
def test_a_column_the_table_lacks_fails_at_init(env: Env, option: dict[str, Any],
                                               column: str, source: str) -> None:
    """A typo in ``payload_columns`` was accepted, and then every call failed on
    PostgreSQL, reads included, with ``column "rowCont" does not exist``."""
    pattern = f"no column '{column}' \\(from {source}\\)"
    if not env.is_async:
        with pytest.raises(ValidationError, match=pattern):
            env.make(**option)
        return
    lc = env.make(**option)  # the async init does no I/O: the first call checks
    with pytest.raises(ValidationError, match=pattern):
        lc.get_status(ID)


def test_create_schema_checks_the_columns_it_made(tmp_path: Path) -> None:
    lc = DatasetLifecycleClient()
    lc.init(dsn=f"sqlite:///{tmp_path}/new.db", payload_columns=("rowCount", "rowCont"))
    try:  # no table yet at init: create_schema may come next
        with pytest.raises(ValidationError, match="no column 'rowCont'"):
            lc.create_schema(extra_columns={"rowCount": "INTEGER"})
    finally:
        lc.reset()


def test_the_async_check_runs_once_and_then_steps_aside(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        from dataset_lifecycle import schema_sql
        conn.execute(schema_sql("postgresql", extra_columns={"rowCount": "INTEGER"}))

    async def main() -> None:
        lc = AsyncDatasetLifecycleClient()
        lc.init(dsn=pg_dsn, payload_columns=("rowCount",))
        try:
            store = lc._setup.store  # type: ignore[union-attr]
            assert await lc.get_status(ID) is None
            before = store.statements
            assert await lc.get_status(ID) is None
            assert store.statements - before == 1
        finally:
            await lc.reset()

    asyncio.run(main())
