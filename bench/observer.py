"""Case ``observer_cost``: what an observer costs on the hot path (issue 21).

The lane transition of ``pure_transition`` (A -> B -> A on a worker's own rows, binding
with a version column and no events) three ways in the same run, one worker, alternating
rounds with the order rotated each round: the library with no observer, the library with
:class:`rowstate.contrib.prometheus.PrometheusObserver` (its own registry), and the
hand-written ``UPDATE ... RETURNING``. Two rows per backend and mode:

* ``observer_none``: no observer / hand-written: the hot-path ratio, which must read as
  ``pure_transition``'s of the same run (the observer's wiring costs nothing unobserved);
* ``observer_prom``: Prometheus observer / hand-written; its note says the ratio to the
  unobserved library (median of the per-round ratios) and the cost per call in
  microseconds (median of the per-round differences of the two sides' time per call).

And one row that a loaded machine cannot blur, ``observer_cpu``: the same transition on an
in-memory SQLite database in this process, the two lifecycles (Prometheus observer /
none) alternating short runs of 200 calls, each side's best run kept: the observer's own
CPU cost per call, without the disk or the network.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

import rowstate
from rowstate import AsyncLifecycle, Lifecycle
from rowstate.contrib.prometheus import PrometheusObserver

from . import model
from .cas import (
    ROWS_PER_WORKER,
    ALibFlip,
    AsyncPgBase,
    AsyncSqliteBase,
    BaseFlip,
    Flip,
    LibFlip,
    SqliteThreads,
    SyncBase,
    Tables,
)
from .env import Env
from .harness import Result, Settings, Team, _per_worker, async_phase, sync_phase

SIDES = ("no observer", "Prometheus", "hand-written")


def _table(tables: Tables) -> Any:
    """This case's own table (the cycling cases each insert their rows from id 1)."""
    binding = model.ab_binding("bench_observed")
    if not getattr(tables, "observed_made", False):
        script = binding.schema_sql(tables.backend)
        if tables.pg:
            tables.admin.execute(script)
        else:
            tables.admin.executescript(script)
        tables.observed_made = True  # type: ignore[attr-defined]
    return binding


def _rounds(settings: Settings, phase: Callable[[int, int], float]) -> list[list[float]]:
    """Each side's rates per round; the order of the three is rotated each round."""
    for i in range(3):
        phase(i, settings.warmup_ops)
    ns = [_per_worker(phase(i, settings.warmup_ops), settings, 1, None) for i in range(3)]
    rates: list[list[float]] = [[], [], []]
    for r in range(settings.rounds):
        for i in (r % 3, (r + 1) % 3, (r + 2) % 3):
            rates[i].append(phase(i, ns[i]))
    return rates


async def _arounds(settings: Settings,
                   sides: Sequence[Sequence[Any]]) -> list[list[float]]:
    for side in sides:
        await async_phase(side, settings.warmup_ops)
    ns = [_per_worker(await async_phase(side, settings.warmup_ops), settings, 1, None)
          for side in sides]
    rates: list[list[float]] = [[], [], []]
    for r in range(settings.rounds):
        for i in (r % 3, (r + 1) % 3, (r + 2) % 3):
            rates[i].append(await async_phase(sides[i], ns[i]))
    return rates


def _results(backend: str, mode: str, rates: list[list[float]]) -> list[Result]:
    none, prom, hand = rates
    med = statistics.median
    # per round: the two library sides ran back to back, so a load spike mostly cancels
    cost_us = med([(1 / p - 1 / n) for p, n in zip(prom, none, strict=True)]) * 1e6
    over = med([p / n for p, n in zip(prom, none, strict=True)])
    out = []
    for case, lib, note in (
            ("observer_none", none, "no observer"),
            ("observer_prom", prom, f"x{over:.3f} of unobserved, {cost_us:+.1f} us/call")):
        detail = {"rounds_library_ops_s": [round(x) for x in lib],
                  "rounds_baseline_ops_s": [round(x) for x in hand],
                  "median_round_ratio": round(med([a / b for a, b in
                                                   zip(lib, hand, strict=True)]), 3),
                  "note": note}
        if case == "observer_prom":
            detail["over_unobserved"] = round(over, 3)
            detail["cost_us_per_call"] = round(cost_us, 2)
        out.append(Result(case, backend, mode, 1, med(lib), med(hand), None, detail=detail))
    return out


def _sync(env: Env, tables: Tables, settings: Settings, team: Team) -> list[Result]:
    binding = _table(tables)
    store = env.store(tables.backend, 1)
    conn = env.connect(tables.backend)
    try:
        plain = Lifecycle(store, binding)
        metered = Lifecycle(store, binding,
                            observer=PrometheusObserver(CollectorRegistry()))
        rows = [Flip(tables.flip_rows(binding, ROWS_PER_WORKER)) for _ in SIDES]
        sides: list[list[Any]] = [[LibFlip(plain, rows[0])], [LibFlip(metered, rows[1])],
                                  [SyncBase(conn, BaseFlip(rows[2], binding.table, tables.pg))]]
        rates = _rounds(settings, lambda i, n: sync_phase(team, sides[i], n))
        return _results(tables.backend, "sync", rates)
    finally:
        conn.close()
        store.close()


async def _async(env: Env, tables: Tables, settings: Settings) -> list[Result]:
    binding = _table(tables)
    store = env.astore(tables.backend, 1)
    conn: Any = None
    threads: SqliteThreads | None = None
    try:
        plain: Any = AsyncLifecycle(store, binding)
        metered: Any = AsyncLifecycle(store, binding,
                                      observer=PrometheusObserver(CollectorRegistry()))
        body = BaseFlip(Flip(tables.flip_rows(binding, ROWS_PER_WORKER)), binding.table,
                        tables.pg)
        if tables.pg:
            conn = await env.aconnect()
            hand: Any = AsyncPgBase(conn, body)
        else:
            threads = SqliteThreads(env.sqlite_path, 1)
            hand = AsyncSqliteBase(threads, body)
        sides: list[list[Any]] = [
            [ALibFlip(plain, Flip(tables.flip_rows(binding, ROWS_PER_WORKER)))],
            [ALibFlip(metered, Flip(tables.flip_rows(binding, ROWS_PER_WORKER)))], [hand]]
        return _results(tables.backend, "async", await _arounds(settings, sides))
    finally:
        if conn is not None:
            await conn.close()
        if threads is not None:
            threads.close()
        await store.close()


def _cpu(settings: Settings) -> Result:
    store = rowstate.connect("sqlite://")
    try:
        binding = model.ab_binding("bench_observed")
        plain = Lifecycle(store, binding)
        plain.create_schema()
        metered = Lifecycle(store, binding, observer=PrometheusObserver(CollectorRegistry()))
        sides = [LibFlip(plain, Flip(range(1, 2))), LibFlip(metered, Flip(range(2, 3)))]
        for i in (1, 2):
            plain.create(i, state="A")
        best = [float("inf"), float("inf")]
        for _ in range(settings.rounds * 40):
            for i, side in enumerate(sides):
                t0 = time.perf_counter()
                for _ in range(200):
                    side.op()
                best[i] = min(best[i], (time.perf_counter() - t0) / 200)
        none_s, prom_s = best
        note = (f"in-process: {none_s * 1e6:.2f} us/call unobserved, {prom_s * 1e6:.2f} "
                f"with Prometheus ({(prom_s - none_s) * 1e6:+.2f} us)")
        return Result("observer_cpu", "sqlite", "in-memory, sync", 1, 1 / prom_s, 1 / none_s,
                      None, detail={"note": note, "none_us": round(none_s * 1e6, 2),
                                    "prometheus_us": round(prom_s * 1e6, 2)})
    finally:
        store.close()


def run(env: Env, settings: Settings, backends: list[str],
        report: Callable[[Result], None]) -> None:
    team = Team(1)
    try:
        report(_cpu(settings))
        for backend in backends:
            tables = Tables(env, backend)
            try:
                for r in _sync(env, tables, settings, team):
                    report(r)
                for r in asyncio.run(_async(env, tables, settings)):
                    report(r)
            finally:
                tables.close()
    finally:
        team.close()
