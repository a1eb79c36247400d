"""Helpers of the dataset_lifecycle tests: one test body, every persistence path.

:class:`Env` is one persistence path and one front end:

* ``sqlite`` / ``postgres``: the engine path (``init(dsn=...)``) on an SQLite file or on a
  fresh schema of a real PostgreSQL database (the lifecycle's ``schema=`` option, so one
  database serves the whole session: a schema costs milliseconds, a database ~0.4 s);
* ``dict``: the adapter path over :class:`DictAdapter`, a thread-safe dict with an honest
  compare-and-set;
* ``adapter-pg``: the adapter path over the default adapter
  (``create_persistence_adapter``) on PostgreSQL.

``mode`` is ``sync`` (``DatasetLifecycleClient``) or ``async``
(``AsyncDatasetLifecycleClient``, every coroutine run to completion on the Env's own loop by
:class:`Blocking`, so a test body reads the same for both). Rows are seeded and poked
*directly* in the database (psycopg / sqlite3 / the dict), never through the library, so a
test can change a flag between the library's check and its write.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql as pg_sql
from psycopg.types.json import Jsonb

from dataset_lifecycle import (
    AsyncDatasetLifecycleClient,
    DatasetLifecycleClient,
    create_persistence_adapter,
    schema_sql,
)
from support import databases
from support.engine import Blocking

COLUMNS = ("userId", "datasetId", "dataloadingStatus", "jobId", "__DR", "queuedLoadToken",
           "finalizingJobId", "finalizingScope", "finalizingClaimTime", "metadataId",
           "rowCount")
EXTRA = {"metadataId": "VARCHAR(255)", "rowCount": "INTEGER"}
PAYLOAD = ("metadataId", "rowCount")
ID = {"userId": "u1", "datasetId": "d1"}

ENVS = [
    ("sqlite", "sync"), ("sqlite", "async"),
    ("postgres", "sync"), ("postgres", "async"),
    ("dict", "sync"), ("dict", "async"),
    ("adapter-pg", "sync"), ("adapter-pg", "async"),
]


def env_params(*only: str) -> list[Any]:
    out = []
    for kind, mode in ENVS:
        name = f"{kind}-{mode}"
        if only and name not in only and kind not in only and mode not in only:
            continue
        marks = [pytest.mark.postgres] if kind in ("postgres", "adapter-pg") else []
        out.append(pytest.param((kind, mode), id=name, marks=marks))
    return out


# -- time ----------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


# -- the dict adapter ----------------------------------------------------------------------


def _get_path(row: Mapping[str, Any], field: str) -> Any:
    column, *path = field.split(".")
    value: Any = row.get(column)
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _matches(got: Any, want: Any) -> bool:
    if want is None or got is None:
        return got is None and want is None
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got is want
    return bool(got == want)


class DictAdapter:
    """A PersistenceAdapter over a dict, as a user would write one: the condition is
    checked and the update applied under one lock (an honest compare-and-set)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.calls: list[tuple[str, Any, Any]] = []
        self.tables: set[str] = set()

    def get_by_keys(self, table: str, keys: Mapping[str, Any]) -> dict[str, Any] | None:
        with self.lock:
            self.tables.add(table)
            self.calls.append(("get", dict(keys), None))
            row = self.rows.get((keys["userId"], keys["datasetId"]))
            return copy.deepcopy(row)

    def update_by_expression(self, table: str, update: Mapping[str, Any],
                             condition: Mapping[str, Any]) -> bool:
        with self.lock:
            self.tables.add(table)
            self.calls.append(("update", copy.deepcopy(dict(update)),
                               copy.deepcopy(dict(condition))))
            row = self.rows.get((condition["userId"], condition["datasetId"]))
            if row is None:
                return False
            for field, want in condition.items():
                got = _get_path(row, field)
                options = want if isinstance(want, list) else [want]
                if not any(_matches(got, w) for w in options):
                    return False
            for field, value in update.items():
                column, *path = field.split(".")
                if not path:
                    row[column] = value
                    continue
                doc = row.get(column)
                doc = dict(doc) if isinstance(doc, Mapping) else {}
                inner = doc
                for part in path[:-1]:
                    inner = inner.setdefault(part, {})
                inner[path[-1]] = value
                row[column] = doc
            return True


class AsyncDictAdapter:
    """The same dict behind coroutine methods (an async adapter, as a JS port would be)."""

    def __init__(self, inner: DictAdapter) -> None:
        self.inner = inner

    async def get_by_keys(self, table: str, keys: Mapping[str, Any]) -> dict[str, Any] | None:
        await asyncio.sleep(0)
        return self.inner.get_by_keys(table, keys)

    async def update_by_expression(self, table: str, update: Mapping[str, Any],
                                   condition: Mapping[str, Any]) -> bool:
        await asyncio.sleep(0)
        return self.inner.update_by_expression(table, update, condition)


# -- PostgreSQL ----------------------------------------------------------------------------


@contextmanager
def session_database(pg_admin_dsn: str, pg_template: str) -> Iterator[str]:
    name = databases.make_database(pg_admin_dsn, template=pg_template, prefix="rs_ds_")
    try:
        yield databases.database_dsn(pg_admin_dsn, name)
    finally:
        databases.drop_database(pg_admin_dsn, name)


def new_pg_schema(dsn: str, extra: Mapping[str, str] | None = None) -> str:
    schema = f"ds_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(schema_sql("postgresql", schema=schema,
                                extra_columns=EXTRA if extra is None else extra))
    return schema


def drop_pg_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(pg_sql.SQL("DROP SCHEMA {} CASCADE").format(pg_sql.Identifier(schema)))


# -- the environment -----------------------------------------------------------------------


class Env:
    def __init__(self, kind: str, mode: str, where: str, schema: str | None = None) -> None:
        """``where``: the SQLite file, or the PostgreSQL DSN; ``schema``: an existing
        PostgreSQL schema to use (emptied at close) instead of a new one (dropped)."""
        self.kind, self.mode = kind, mode
        self.loop = asyncio.new_event_loop() if mode == "async" else None
        self.dsn = ""
        self.schema = "data_sources_datasets"
        self.own_schema = False
        self.sqlite_path = ""
        self.dict = DictAdapter()
        self.adapter: Any = None
        self.clients: list[Any] = []
        self._pg: psycopg.Connection[Any] | None = None
        if kind in ("postgres", "adapter-pg"):
            self.dsn = where
            self.own_schema = schema is None
            self.schema = schema or new_pg_schema(where)
        elif kind == "sqlite":
            self.sqlite_path = where
            with sqlite3.connect(where) as conn:
                conn.executescript(schema_sql("sqlite", extra_columns=EXTRA))
            conn.close()

    @property
    def is_async(self) -> bool:
        return self.loop is not None

    @property
    def table(self) -> str:
        return "qv_dataset"

    # -- the library -------------------------------------------------------------------

    def persistence_options(self) -> dict[str, Any]:
        if self.kind == "sqlite":
            return {"dsn": f"sqlite:///{self.sqlite_path}"}
        if self.kind == "postgres":
            return {"dsn": self.dsn, "schema": self.schema}
        if self.kind == "dict":
            return {"persistence": AsyncDictAdapter(self.dict) if self.is_async else self.dict}
        if self.adapter is None:
            self.adapter = create_persistence_adapter(
                dsn=self.dsn, schema=self.schema, payload_columns=PAYLOAD,
                reservation_field="__DR.isJobRunning", asynchronous=self.is_async)
        return {"persistence": self.adapter, "schema": self.schema}

    def make(self, **options: Any) -> Any:
        """An initialized client (sync, or the async one behind :class:`Blocking`)."""
        opts = {"payload_columns": PAYLOAD, **self.persistence_options(), **options}
        if self.is_async:
            assert self.loop is not None
            client: Any = AsyncDatasetLifecycleClient()
            client.init(**opts)
            self.clients.append(client)
            return Blocking(client, self.loop)
        client = DatasetLifecycleClient()
        client.init(**opts)
        self.clients.append(client)
        return client

    def run(self, coro: Any) -> Any:
        assert self.loop is not None
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        try:
            for client in self.clients:
                if self.is_async:
                    self.run(client.reset())
                else:
                    client.reset()
            if self.adapter is not None:
                got = self.adapter.close()
                if inspect.isawaitable(got):
                    self.run(got)
        finally:
            if self.loop is not None:
                self.loop.close()
            if self.dsn and self.own_schema:
                drop_pg_schema(self.dsn, self.schema)
            elif self.dsn:
                self.pg().execute(pg_sql.SQL("DELETE FROM {}").format(
                    pg_sql.Identifier(self.schema, "qv_dataset")))
            if self._pg is not None:
                self._pg.close()

    def pg(self) -> psycopg.Connection[Any]:
        if self._pg is None:
            self._pg = psycopg.connect(self.dsn, autocommit=True)
        return self._pg

    # -- rows, directly ----------------------------------------------------------------

    def seed(self, ident: Mapping[str, str] = ID, **fields: Any) -> None:
        row: dict[str, Any] = {c: None for c in COLUMNS}
        row["dataloadingStatus"] = "NOT_AVAILABLE"
        row.update(ident)
        row.update(fields)
        if self.kind == "dict":
            with self.dict.lock:
                self.dict.rows[(ident["userId"], ident["datasetId"])] = copy.deepcopy(row)
            return
        cols = ", ".join(f'"{c}"' for c in row)
        if self.kind == "sqlite":
            values = [json.dumps(v) if isinstance(v, dict) else
                      _sqlite_time(v) if isinstance(v, datetime) else v for v in row.values()]
            with self._sqlite() as conn:
                conn.execute('DELETE FROM qv_dataset WHERE "userId" = ? AND "datasetId" = ?',
                             (ident["userId"], ident["datasetId"]))
                conn.execute(f"INSERT INTO qv_dataset ({cols}) VALUES "
                             f"({', '.join('?' * len(row))})", values)
            return
        values = [Jsonb(v) if isinstance(v, dict) else v for v in row.values()]
        table = pg_sql.Identifier(self.schema, "qv_dataset")
        pg = self.pg()
        with pg.transaction():
            pg.execute(pg_sql.SQL('DELETE FROM {} WHERE "userId" = %s AND "datasetId" = %s')
                       .format(table), [ident["userId"], ident["datasetId"]])
            pg.execute(pg_sql.SQL("INSERT INTO {} (" + cols + ") VALUES ("
                                  + ", ".join(["%s"] * len(row)) + ")").format(table),
                       values)

    def poke(self, field: str, value: Any, ident: Mapping[str, str] = ID) -> None:
        """Write one field (``"__DR.isJobRunning"`` is a JSON path) behind the library's
        back: another writer, between the library's check and its write."""
        row = self.row(ident)
        assert row is not None
        column, *path = field.split(".")
        if path:
            doc = dict(row.get(column) or {})
            doc[path[0]] = value
            value = doc
        row[column] = value
        self.seed(ident, **{k: v for k, v in row.items() if k not in ("userId", "datasetId")})

    def row(self, ident: Mapping[str, str] = ID) -> dict[str, Any] | None:
        """The row as plain data: JSON decoded, the claim time a datetime."""
        if self.kind == "dict":
            with self.dict.lock:
                got = self.dict.rows.get((ident["userId"], ident["datasetId"]))
                return copy.deepcopy(got)
        cols = ", ".join(f'"{c}"' for c in COLUMNS)
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                found = conn.execute(f"SELECT {cols} FROM qv_dataset WHERE \"userId\" = ? "
                                     'AND "datasetId" = ?',
                                     (ident["userId"], ident["datasetId"])).fetchone()
            if found is None:
                return None
            out = dict(zip(COLUMNS, found, strict=True))
            if isinstance(out["__DR"], str):
                out["__DR"] = json.loads(out["__DR"])
            if isinstance(out["finalizingClaimTime"], str):
                out["finalizingClaimTime"] = datetime.fromisoformat(out["finalizingClaimTime"])
            return out
        table = pg_sql.Identifier(self.schema, "qv_dataset")
        found = self.pg().execute(pg_sql.SQL("SELECT " + cols + ' FROM {} WHERE "userId" = %s '
                                             'AND "datasetId" = %s').format(table),
                                  [ident["userId"], ident["datasetId"]]).fetchone()
        return None if found is None else dict(zip(COLUMNS, found, strict=True))

    @contextmanager
    def _sqlite(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.sqlite_path, isolation_level=None, timeout=30)
        try:
            yield conn
        finally:
            conn.close()


def _sqlite_time(at: datetime) -> str:
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


class Events:
    """A publisher that keeps what it receives (sync ``publish``)."""

    def __init__(self) -> None:
        self.got: list[Any] = []

    def publish(self, event: Any) -> None:
        self.got.append(event)


class AsyncEvents(Events):
    async def publish(self, event: Any) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        self.got.append(event)


Handler = Callable[..., int]
