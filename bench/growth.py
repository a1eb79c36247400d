"""Case 7: do the lookups stay flat as the table grows? (PostgreSQL)

Three copies of each table, at 10k, 100k and 1M rows (``--quick``: 10k, 100k, 300k), made
by the library's own DDL (its partial indexes included) and filled with ``generate_series``.
Whatever the size, the same few rows are "live": 20 datasets hold a finalization claim
(10 of them stale), one run is COLLECTING; every other row is finished history. The calls:

* ``check_busy``: ``dataset_lifecycle``'s ``check_busy(identifier)`` when the package is
  usable, else the read it is built on (``Lifecycle.get``), on random keys;
* ``stale_sweep``: the finalization claims older than their TTL (the query the seed's
  partial index ``WHERE "finalizingJobId" IS NOT NULL`` exists for);
* ``collecting_lookup``: ``can_transition(draft, "COLLECTING")``, whose invariant check
  looks for the one COLLECTING run (partial UNIQUE index);
* ``fire_due``: the every-minute tick with nothing due (index on (state, due)).

Sizes alternate within each round. ratio = time per call at the smallest size / at the
largest (``library_ops_s`` is the largest table's rate, ``baseline_ops_s`` the smallest's).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg

from rowstate import Lifecycle

from . import model
from .env import Env
from .harness import Result, Settings, time_per_call

TARGET = 1 / 1.5  # the largest table within 1.5x the time per call of the smallest
STALE_SQL = (
    'SELECT "userId", "datasetId" FROM {t} WHERE "finalizingJobId" IS NOT NULL '
    'AND "finalizingClaimTime" < now() - make_interval(secs => %s) '
    'ORDER BY "finalizingClaimTime" LIMIT 100'
)


def _populate(conn: psycopg.Connection[Any], size: int, ds: str, runs: str) -> None:
    conn.execute(
        f'INSERT INTO {ds} ("userId", "datasetId", "dataloadingStatus", "jobId", "__DR") '
        "SELECT 'u' || (x %% 1000), lpad(x::text, 8, '0'), 'SUCCEEDED', 'job-' || x, "
        "'{\"isJobRunning\": false}'::jsonb FROM generate_series(1, %s) AS g(x)", (size,))
    conn.execute(
        f'UPDATE {ds} SET "dataloadingStatus" = \'LOADING\', "finalizingJobId" = "jobId", '
        '"finalizingScope" = \'complete\', "finalizingClaimTime" = now() - '
        "CASE WHEN x.n % 2 = 0 THEN interval '1 hour' ELSE interval '0' END "
        f'FROM (SELECT "userId" AS u, "datasetId" AS d, row_number() OVER () AS n FROM {ds} '
        f'ORDER BY "datasetId" LIMIT 20) AS x WHERE "userId" = x.u AND "datasetId" = x.d')
    conn.execute(
        f"INSERT INTO {runs} (week_of, v2_state, version, deadline_at) "
        "SELECT lpad(x::text, 8, '0'), 'SENT', 3, now() - make_interval(hours => x) "
        "FROM generate_series(1, %s) AS g(x)", (size - 2,))
    conn.execute(f"INSERT INTO {runs} (week_of, v2_state, version, deadline_at) VALUES "
                 "('collecting', 'COLLECTING', 1, now() + interval '1 day'), "
                 "('draft', 'DRAFT', 0, NULL)")
    conn.execute(f"VACUUM ANALYZE {ds}")
    conn.execute(f"VACUUM ANALYZE {runs}")


class Sized:
    """The two tables at one size and the four calls on them."""

    def __init__(self, env: Env, conn: psycopg.Connection[Any], size: int) -> None:
        assert env.pg_dsn
        self.size = size
        ds, runs = f"bench_ds_{size}", f"bench_runs_{size}"
        dsb, rb = model.dataset_binding(ds), model.run_binding(runs)
        # the dataset_lifecycle package's own DDL when it is there (a superset of ours)
        conn.execute(_dl_schema(ds) or dsb.schema_sql("postgresql"))
        conn.execute(rb.schema_sql("postgresql"))
        t0 = time.perf_counter()
        _populate(conn, size, ds, runs)
        self.populate_s = time.perf_counter() - t0
        self.store = env.store("postgresql", 1)
        self.ds = Lifecycle(self.store, dsb)
        self.runs = Lifecycle(self.store, rb)
        self.conn = psycopg.connect(env.pg_dsn, autocommit=True)
        self.stale_sql = STALE_SQL.format(t=ds)
        self.rng = random.Random(size)
        self.busy_via = "rowstate Lifecycle.get (dataset_lifecycle not usable)"
        self.dl: Any = _dataset_lifecycle(env.pg_dsn, ds)
        if self.dl is not None:
            self.busy_via = "dataset_lifecycle.check_busy"
        self.plans = {
            "stale_sweep": _plan(conn, self.stale_sql, (300.0,)),
        }

    def calls(self) -> dict[str, Callable[[], Any]]:
        return {"check_busy": self.check_busy, "stale_sweep": self.stale_sweep,
                "collecting_lookup": self.collecting_lookup, "fire_due": self.fire_due}

    def _key(self) -> tuple[str, str]:
        x = self.rng.randrange(1, self.size + 1)
        return f"u{x % 1000}", f"{x:08d}"

    def check_busy(self) -> None:
        user, ds = self._key()
        if self.dl is not None:
            self.dl.check_busy({"userId": user, "datasetId": ds})
            return
        row = self.ds.get((user, ds))
        assert row is not None
        _ = row["dataloadingStatus"] in model.DATASET.active

    def stale_sweep(self) -> None:
        rows = self.conn.execute(self.stale_sql, (300.0,)).fetchall()
        assert len(rows) == 10, rows

    def collecting_lookup(self) -> None:
        check = self.runs.can_transition("draft", "COLLECTING")
        assert not check.allowed and "INVARIANT" in check.reasons, check

    def fire_due(self) -> None:
        assert not self.runs.fire_due().fired

    def close(self) -> None:
        self.conn.close()
        self.store.close()
        if self.dl is not None:
            self.dl.reset()


def _dataset_lifecycle(dsn: str, table: str) -> Any:
    """A DatasetLifecycleClient on ``table`` if the package is there and works, else None."""
    try:
        from dataset_lifecycle import DatasetLifecycleClient

        client = DatasetLifecycleClient()
        client.init(dsn=dsn, schema="public", table_name=table,
                    reservation_field="__DR.isJobRunning")
        client.check_busy({"userId": "u1", "datasetId": "00000001"})
        return client
    except Exception as exc:  # an API in flux must not stop the suite
        print(f"  (growth: dataset_lifecycle not used: {type(exc).__name__}: {exc})")
        return None


def _dl_schema(table: str) -> str | None:
    try:
        from dataset_lifecycle import schema_sql

        text: str = schema_sql("postgresql", schema="public", table_name=table)
        return text
    except Exception:
        return None


def _plan(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...]) -> str:
    rows = conn.execute("EXPLAIN " + sql, params).fetchall()
    return " / ".join(r[0].strip() for r in rows[:3])


def run(env: Env, settings: Settings, report: Callable[[Result], None]) -> None:
    assert env.pg_dsn
    sizes = (10_000, 100_000, 300_000) if settings.quick else (10_000, 100_000, 1_000_000)
    per_call_s = 0.15 if settings.quick else 0.3
    conn = psycopg.connect(env.pg_dsn, autocommit=True)
    tables: list[Sized] = []
    try:
        for size in sizes:
            tables.append(Sized(env, conn, size))
        names = list(tables[0].calls())
        times: dict[str, dict[int, list[float]]] = {n: {s: [] for s in sizes} for n in names}
        for t in tables:  # warm: prepared statements, caches
            for fn in t.calls().values():
                time_per_call(fn, 0.05)
        for r in range(settings.rounds):
            order = tables if r % 2 == 0 else tables[::-1]
            for name in names:
                for t in order:
                    times[name][t.size].append(time_per_call(t.calls()[name], per_call_s))
        small, large = sizes[0], sizes[-1]
        for name in names:
            med = {s: statistics.median(times[name][s]) for s in sizes}
            detail: dict[str, Any] = {
                "us_per_call": {str(s): round(med[s] * 1e6, 1) for s in sizes},
                "populate_s": {str(t.size): round(t.populate_s, 1) for t in tables},
                "note": " / ".join(f"{s // 1000}k {med[s] * 1e6:.0f} us" for s in sizes),
            }
            if name == "check_busy":
                detail["via"] = tables[0].busy_via
            if name == "stale_sweep":
                detail["plan_at_largest"] = tables[-1].plans["stale_sweep"]
            report(Result("growth", "postgresql", name, 1, 1 / med[large], 1 / med[small],
                          ">= 0.67", TARGET, detail=detail))
    finally:
        for t in tables:
            t.close()
        conn.close()
