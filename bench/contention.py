"""Case 5: 8 workers racing on the same 10 rows.

Every op picks a row and a target at random and tries the move from the other state; about
half are refused (the row is already there). Library and hand-written phases alternate on
the *same* 10 rows, so the proof of no lost update covers both: at the end each row's
``version`` must equal the number of moves applied to it by either side (each applied move
bumps it by one; a lost update would leave it short). The row reports applied transitions
per second on each side, with a target for their ratio.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from rowstate import AsyncLifecycle, Lifecycle

from . import model
from .cas import SqliteThreads, Tables
from .env import Env
from .harness import Result, Settings, Team, compare_async, compare_sync

WORKERS = 8
HOT_ROWS = 10
APPLIED_TARGET = 0.80  # library applied/s over hand-written applied/s (issue 10)


class Tally:
    def __init__(self) -> None:
        self.applied: Counter[int] = Counter()
        self.refused = 0


class Racer:
    def __init__(self, ids: range, seed: int) -> None:
        self.ids = list(ids)
        self.rng = random.Random(seed)
        self.tally = Tally()

    def pick(self) -> tuple[int, str, str]:
        key = self.rng.choice(self.ids)
        to = self.rng.choice("AB")
        return key, model.OTHER[to], to

    def count(self, key: int, applied: bool) -> None:
        if applied:
            self.tally.applied[key] += 1
        else:
            self.tally.refused += 1


class LibRacer(Racer):
    def __init__(self, lc: Any, ids: range, seed: int) -> None:
        super().__init__(ids, seed)
        self.lc = lc

    def op(self) -> None:
        key, frm, to = self.pick()
        res = self.lc.transition(key, to, from_=frm)
        if not res.applied and res.reason != "STATE_MISMATCH":
            raise AssertionError(f"unexpected refusal {res.reason}")
        self.count(key, res.applied)


class ALibRacer(LibRacer):
    async def op(self) -> None:  # type: ignore[override]
        key, frm, to = self.pick()
        res = await self.lc.transition(key, to, from_=frm)
        if not res.applied and res.reason != "STATE_MISMATCH":
            raise AssertionError(f"unexpected refusal {res.reason}")
        self.count(key, res.applied)


class BaseRacer(Racer):
    def __init__(self, conn: Any, ids: range, seed: int, pg: bool) -> None:
        super().__init__(ids, seed)
        self.conn = conn
        self.sql = model.sql(model.CAS, pg=pg, t="bench_hot")

    def op(self) -> None:
        key, frm, to = self.pick()
        self.count(key, bool(self.conn.execute(self.sql, (to, key, frm)).fetchall()))


class ABaseRacer(BaseRacer):
    async def op(self) -> None:  # type: ignore[override]
        key, frm, to = self.pick()
        cur = await self.conn.execute(self.sql, (to, key, frm))
        self.count(key, bool(await cur.fetchall()))


class ASqliteRacer(BaseRacer):
    def __init__(self, threads: SqliteThreads, ids: range, seed: int) -> None:
        super().__init__(None, ids, seed, False)
        self.threads = threads

    def _op(self) -> None:
        key, frm, to = self.pick()
        conn = self.threads.conn()
        self.count(key, bool(conn.execute(self.sql, (to, key, frm)).fetchall()))

    async def op(self) -> None:  # type: ignore[override]
        await asyncio.get_running_loop().run_in_executor(self.threads.pool, self._op)


def _verdict(tables: Tables, ids: range, racers: list[Racer],
             lib: list[Racer]) -> tuple[bool, dict[str, Any]]:
    p = tables.p
    rows = tables.admin.execute(
        f"SELECT id, version FROM bench_hot WHERE id BETWEEN {p} AND {p}",
        (ids[0], ids[-1])).fetchall()
    applied: Counter[int] = Counter()
    for r in racers:
        applied.update(r.tally.applied)
    ok = all(version == applied[key] for key, version in rows) and len(rows) == len(ids)

    def rates(side: list[Racer]) -> dict[str, int]:
        return {"applied": sum(sum(r.tally.applied.values()) for r in side),
                "refused": sum(r.tally.refused for r in side)}

    base = [r for r in racers if r not in lib]
    return ok, {
        "library_counts": rates(lib), "baseline_counts": rates(base),
        "versions_sum": sum(v for _, v in rows), "applied_sum": sum(applied.values()),
        "no_lost_update": ok,
        "note": ("no lost update: version == applied on every row" if ok
                 else "LOST UPDATE: version != applied"),
    }


def run(env: Env, settings: Settings, backends: list[str],
        report: Callable[[Result], None]) -> None:
    team = Team(WORKERS)
    try:
        for backend in backends:
            tables = Tables(env, backend)
            hot = model.ab_binding("bench_hot")
            script = hot.schema_sql(backend)
            if tables.pg:
                tables.admin.execute(script)
            else:
                tables.admin.executescript(script)
            try:
                for mode in ("sync", "async"):
                    ids = tables.flip_rows(hot, HOT_ROWS)
                    if mode == "sync":
                        detail = _run_sync(env, tables, settings, team, hot, ids)
                    else:
                        detail = asyncio.run(_run_async(env, tables, settings, hot, ids))
                    lib_s, base_s, extra, ok = detail
                    report(_applied_rates(backend, mode, lib_s, base_s, extra, ok))
            finally:
                tables.close()
    finally:
        team.close()


def _applied_rates(backend: str, mode: str, lib_s: float, base_s: float,
                   extra: dict[str, Any], ok: bool) -> Result:
    """The row of one contention run: applied transitions per second on both sides (a
    refusal is cheap work that moves nothing); the ops/s of both stay in the detail."""
    def share(counts: dict[str, int]) -> float:
        done = counts["applied"] + counts["refused"]
        return counts["applied"] / done if done else 0.0

    lib_share, base_share = share(extra["library_counts"]), share(extra["baseline_counts"])
    extra = {**extra, "library_ops_s": round(lib_s, 1), "baseline_ops_s": round(base_s, 1)}
    paired = extra.get("median_round_ratio")
    ratio = (paired * lib_share / base_share if paired is not None and base_share
             else None)
    return Result("contention", backend, mode, WORKERS, lib_s * lib_share,
                  base_s * base_share, f">= {APPLIED_TARGET:.2f}", APPLIED_TARGET,
                  extra_ok=ok, detail=extra, paired_ratio=ratio)


def _run_sync(env: Env, tables: Tables, settings: Settings, team: Team, hot: Any,
              ids: range) -> tuple[float, float, dict[str, Any], bool]:
    store = env.store(tables.backend, WORKERS)
    conns = [env.connect(tables.backend) for _ in range(WORKERS)]
    try:
        lc = Lifecycle(store, hot)
        lib: list[Racer] = [LibRacer(lc, ids, i) for i in range(WORKERS)]
        base: list[Racer] = [BaseRacer(c, ids, 100 + i, tables.pg)
                             for i, c in enumerate(conns)]
        lib_s, base_s, detail = compare_sync(settings, team, lib, base)
    finally:
        for c in conns:
            c.close()
        store.close()
    ok, extra = _verdict(tables, ids, lib + base, lib)
    return lib_s, base_s, {**detail, **extra}, ok


async def _run_async(env: Env, tables: Tables, settings: Settings, hot: Any,
                     ids: range) -> tuple[float, float, dict[str, Any], bool]:
    store = env.astore(tables.backend, WORKERS)
    conns: list[Any] = []
    threads: SqliteThreads | None = None
    try:
        lc = AsyncLifecycle(store, hot)
        lib: list[Racer] = [ALibRacer(lc, ids, i) for i in range(WORKERS)]
        base: list[Racer]
        if tables.pg:
            conns = [await env.aconnect() for _ in range(WORKERS)]
            base = [ABaseRacer(c, ids, 100 + i, True) for i, c in enumerate(conns)]
        else:
            threads = SqliteThreads(env.sqlite_path, WORKERS)
            base = [ASqliteRacer(threads, ids, 100 + i) for i in range(WORKERS)]
        lib_s, base_s, detail = await compare_async(settings, lib, base)
    finally:
        for c in conns:
            await c.close()
        if threads is not None:
            threads.close()
        await store.close()
    ok, extra = _verdict(tables, ids, lib + base, lib)
    return lib_s, base_s, {**detail, **extra}, ok
