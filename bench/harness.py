"""Timing: the library and its baseline in alternating rounds, medians, results.

A *worker* is an object with ``op()`` (one operation: one transition, one leased edge, one
finalization path...) and optionally ``prepare(n)`` (untimed set-up before a phase of ``n``
ops, e.g. resetting the rows a phase consumes). Async workers have coroutine methods.

A *phase* runs ``n`` ops on every worker of one side at once (threads for sync, tasks for
async) and yields ops/s. Phases are count-bounded: ``n`` is calibrated per side from a
warm-up so that a phase lasts about ``phase_s`` seconds. Rounds alternate the order
(library first, then baseline first), so a drift of the shared machine hits both sides.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Settings:
    quick: bool
    rounds: int
    phase_s: float
    warmup_ops: int


@dataclass
class Result:
    case: str
    backend: str
    mode: str
    workers: int
    library_ops_s: float
    baseline_ops_s: float
    target: str | None  # e.g. ">= 0.90"; None: reported only
    threshold: float | None = None
    extra_ok: bool | None = None  # a second condition (e.g. no lost update)
    detail: dict[str, Any] = field(default_factory=dict)

    paired_ratio: float | None = None  # median of the per-round ratios, when measured

    def __post_init__(self) -> None:
        if self.paired_ratio is None and "median_round_ratio" in self.detail:
            self.paired_ratio = self.detail["median_round_ratio"]

    @property
    def ratio(self) -> float:
        """The median of the per-round library/baseline ratios (each round's two phases ran
        back to back, so a load spike from elsewhere mostly cancels out); without rounds,
        the ratio of the medians."""
        if self.paired_ratio is not None:
            return self.paired_ratio
        if not self.baseline_ops_s:
            return float("nan")
        return self.library_ops_s / self.baseline_ops_s

    @property
    def passed(self) -> bool | None:
        checks = []
        if self.threshold is not None:
            checks.append(self.ratio >= self.threshold)
        if self.extra_ok is not None:
            checks.append(self.extra_ok)
        return all(checks) if checks else None

    def as_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "backend": self.backend,
            "mode": self.mode,
            "workers": self.workers,
            "library_ops_s": round(self.library_ops_s, 1),
            "baseline_ops_s": round(self.baseline_ops_s, 1),
            "ratio": round(self.ratio, 3),
            "target": self.target,
            "pass": self.passed,
            "detail": self.detail,
        }


# -- sync ----------------------------------------------------------------------------------


class Team:
    """Persistent threads, so that per-thread connections (the SQLite store keeps one per
    thread) survive across phases; a phase runs one job per thread, all started together."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.pool = ThreadPoolExecutor(size, thread_name_prefix=f"bench-{size}")

    def run(self, jobs: Sequence[Callable[[], int]]) -> tuple[float, int]:
        """Runs the jobs at once; returns (wall seconds from first start to last end, ops)."""
        assert len(jobs) <= self.size
        barrier = threading.Barrier(len(jobs))

        def wrapped(job: Callable[[], int]) -> tuple[float, float, int]:
            barrier.wait()
            t0 = time.perf_counter()
            done = job()
            return t0, time.perf_counter(), done

        futures = [self.pool.submit(wrapped, job) for job in jobs]
        got = [f.result() for f in futures]
        return max(g[1] for g in got) - min(g[0] for g in got), sum(g[2] for g in got)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def _loop(op: Callable[[], Any], n: int) -> int:
    for _ in range(n):
        op()
    return n


def sync_phase(team: Team, workers: Sequence[Any], n: int) -> float:
    for w in workers:
        prepare = getattr(w, "prepare", None)
        if prepare is not None:
            prepare(n)
    elapsed, ops = team.run([lambda w=w: _loop(w.op, n) for w in workers])
    return ops / elapsed


def _per_worker(rate: float, settings: Settings, workers: int, cap: int | None) -> int:
    n = max(20, math.ceil(rate * settings.phase_s / workers))
    return min(n, cap) if cap else n


def compare_sync(settings: Settings, team: Team, lib: Sequence[Any], base: Sequence[Any],
                 *, cap: int | None = None) -> tuple[float, float, dict[str, Any]]:
    """Median ops/s of the library and of the baseline, alternating; plus the raw rounds."""
    warm = min(settings.warmup_ops, cap) if cap else settings.warmup_ops
    sync_phase(team, lib, warm)  # connections, prepared statements, plan caches
    sync_phase(team, base, warm)
    n_lib = _per_worker(sync_phase(team, lib, warm), settings, len(lib), cap)
    n_base = _per_worker(sync_phase(team, base, warm), settings, len(base), cap)
    lib_rates: list[float] = []
    base_rates: list[float] = []
    for r in range(settings.rounds):
        if r % 2 == 0:
            lib_rates.append(sync_phase(team, lib, n_lib))
            base_rates.append(sync_phase(team, base, n_base))
        else:
            base_rates.append(sync_phase(team, base, n_base))
            lib_rates.append(sync_phase(team, lib, n_lib))
    return _summary(lib_rates, base_rates)


# -- async ---------------------------------------------------------------------------------


async def _aloop(op: Callable[[], Any], n: int) -> int:
    for _ in range(n):
        await op()
    return n


async def async_phase(workers: Sequence[Any], n: int) -> float:
    for w in workers:
        prepare = getattr(w, "prepare", None)
        if prepare is not None:
            got = prepare(n)  # untimed; may be sync (a reset on an admin connection)
            if inspect.isawaitable(got):
                await got
    t0 = time.perf_counter()
    done = await asyncio.gather(*(_aloop(w.op, n) for w in workers))
    return sum(done) / (time.perf_counter() - t0)


async def compare_async(settings: Settings, lib: Sequence[Any], base: Sequence[Any],
                        *, cap: int | None = None) -> tuple[float, float, dict[str, Any]]:
    warm = min(settings.warmup_ops, cap) if cap else settings.warmup_ops
    await async_phase(lib, warm)
    await async_phase(base, warm)
    n_lib = _per_worker(await async_phase(lib, warm), settings, len(lib), cap)
    n_base = _per_worker(await async_phase(base, warm), settings, len(base), cap)
    lib_rates: list[float] = []
    base_rates: list[float] = []
    for r in range(settings.rounds):
        if r % 2 == 0:
            lib_rates.append(await async_phase(lib, n_lib))
            base_rates.append(await async_phase(base, n_base))
        else:
            base_rates.append(await async_phase(base, n_base))
            lib_rates.append(await async_phase(lib, n_lib))
    return _summary(lib_rates, base_rates)


def _summary(lib_rates: list[float], base_rates: list[float],
             ) -> tuple[float, float, dict[str, Any]]:
    ratios = [a / b for a, b in zip(lib_rates, base_rates, strict=True)]
    detail = {
        "rounds_library_ops_s": [round(x) for x in lib_rates],
        "rounds_baseline_ops_s": [round(x) for x in base_rates],
        "median_round_ratio": round(statistics.median(ratios), 3),
        "ratio_of_medians": round(statistics.median(lib_rates) / statistics.median(base_rates),
                                  3),
    }
    return statistics.median(lib_rates), statistics.median(base_rates), detail


def time_per_call(fn: Callable[[], Any], seconds: float) -> float:
    """Seconds per call of ``fn``, run for about ``seconds``."""
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(10):
            fn()
        n += 10
        now = time.perf_counter()
        if now >= deadline:
            return (now - t0) / n


# -- the table -----------------------------------------------------------------------------


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def print_header() -> None:
    print(f"{'case':<18} {'backend':<10} {'mode':<18} {'w':>2} {'library/s':>11} "
          f"{'baseline/s':>11} {'ratio':>7}  {'target':<9} verdict")
    print("-" * 100)


def print_row(r: Result) -> None:
    verdict = {True: "PASS", False: "FAIL", None: "info"}[r.passed]
    note = r.detail.get("note", "")
    print(f"{r.case:<18} {r.backend:<10} {r.mode:<18} {r.workers:>2} "
          f"{fmt_rate(r.library_ops_s):>11} {fmt_rate(r.baseline_ops_s):>11} "
          f"{r.ratio:>7.3f}  {r.target or '-':<9} {verdict}{'  ' + note if note else ''}",
          flush=True)
