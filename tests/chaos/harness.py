"""Run chaos rounds on PostgreSQL and load what happened.

A *round* runs ``workers`` processes for ``seconds`` over the rows of several histories (a
history is one group ``grp`` of ``rows`` rows; the groups of a round are disjoint, so the
histories are independent and can share the processes and the database). While it runs, the
parent SIGKILLs a random worker of its own (by pid) every so often and starts a replacement
with a new holder id. Afterwards, once every TTL has passed, a sweeper shows that no row is
stuck: each row's finalization claim can be taken by a newcomer and the row can be moved.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.machine import (
    BINDING,
    FINAL_TTL,
    LEASE_TTL,
    MACHINE,
    TABLE,
    edges_from,
    insert_rows,
)
from chaos.oracle import History
from rowstate import Lifecycle
from rowstate.stores import PostgresStore

TESTS_DIR = Path(__file__).resolve().parent.parent


@dataclass
class RoundStats:
    spawned: int = 0
    killed: int = 0
    hung: int = 0
    exit_codes: list[int] = field(default_factory=list)


def setup(dsn: str) -> None:
    store = PostgresStore(dsn, min_size=1, max_size=1)
    try:
        Lifecycle(store, BINDING).create_schema()
    finally:
        store.close()


def _spawn(spec: dict[str, Any], stderr: Any) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(TESTS_DIR), env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "chaos.worker", json.dumps(spec)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
    )


def run_round(dsn: str, groups: list[str], *, rows: int, workers: int, seconds: float,
              kill_every: tuple[float, float] | None, log_dir: Path, seed: int,
              max_ops: int = 1_000_000, sleepy: float = 1.0) -> RoundStats:
    """Run one round; the workers' logs land in ``log_dir`` (one file per process)."""
    rng = random.Random(seed)
    store = PostgresStore(dsn, min_size=1, max_size=1)
    try:
        insert_rows(store, [(g, r) for g in groups for r in range(rows)])
    finally:
        store.close()
    log_dir.mkdir(parents=True, exist_ok=True)
    stats = RoundStats()
    stderr = (log_dir / "stderr.txt").open("ab")
    deadline = time.time() + seconds
    live: dict[int, subprocess.Popen[bytes]] = {}
    counter = 0

    def spawn() -> None:
        nonlocal counter
        counter += 1
        wid = f"{log_dir.name}-w{counter}"
        spec = {"wid": wid, "dsn": dsn, "log": str(log_dir / f"{wid}.jsonl"),
                "seed": rng.randrange(2**32), "groups": groups, "rows": rows,
                "deadline": deadline, "max_ops": max_ops, "sleepy": sleepy,
                "mode": "async" if counter % 2 == 0 else "sync"}
        proc = _spawn(spec, stderr)
        live[proc.pid] = proc
        stats.spawned += 1

    try:
        for _ in range(workers):
            spawn()
        next_kill = time.time() + rng.uniform(*kill_every) if kill_every else None
        while time.time() < deadline:
            time.sleep(0.02)
            for pid, proc in list(live.items()):
                code = proc.poll()
                if code is not None:
                    stats.exit_codes.append(code)
                    del live[pid]
                    if time.time() < deadline - 0.5:
                        spawn()
            if next_kill is not None and time.time() >= next_kill and live:
                pid = rng.choice(sorted(live))
                os.kill(pid, signal.SIGKILL)  # one of our own children, by pid
                live.pop(pid).wait()
                stats.killed += 1
                if time.time() < deadline - 0.5:
                    spawn()
                assert kill_every is not None
                next_kill = time.time() + rng.uniform(*kill_every)
        # a worker may be inside an act that outlives the TTL: give it time to finish
        grace = time.time() + max(LEASE_TTL, FINAL_TTL) * 3 + 10
        for pid, proc in list(live.items()):
            try:
                stats.exit_codes.append(proc.wait(timeout=max(0.1, grace - time.time())))
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                proc.wait()
                stats.hung += 1
            del live[pid]
    finally:
        for pid, proc in live.items():
            os.kill(pid, signal.SIGKILL)
            proc.wait()
        stderr.close()
    return stats


def sweep(dsn: str, groups: list[str], rows: int, log_dir: Path, seed: int) -> None:
    """After every TTL: each row's claim can be taken and the row can be moved.

    The sweeper is a fresh worker with its own holder id; it logs like a worker (so the
    oracle checks its takeovers too) and writes ``stuck`` records the oracle reads.
    """
    from chaos.worker import Log  # the same log format as the workers

    time.sleep(max(LEASE_TTL, FINAL_TTL) + 0.1)
    rng = random.Random(seed)
    wid = f"{log_dir.name}-sweeper"
    log = Log(str(log_dir / f"{wid}.jsonl"), wid)
    store = PostgresStore(dsn, min_size=1, max_size=1)
    lc = Lifecycle(store, BINDING)
    try:
        for g in groups:
            for r in range(rows):
                key = (g, r)
                got = lc.claim_finalization(key, wid, "a")
                if got.claimed:
                    assert got.row is not None
                    log("fclaim", g=g, r=r, tok=got.token, v=got.row["version"],
                        at=got.row["fin_at"].isoformat(), h=wid, s="a")
                    log("frel", g=g, r=r, tok=got.token, h=wid, s="a")
                    lc.release_finalization(key, wid, "a")
                state = lc.state(key)
                edges = list(edges_from(state))
                rng.shuffle(edges)
                moved: list[str] = []
                tried: list[str] = []
                for edge in edges:
                    tried.append(edge.name)
                    if edge.lease:
                        data: dict[str, Any] = {"w": wid, "via": "run"}

                        def act(lease: Any, data: dict[str, Any] = data, g: str = g,
                                r: int = r) -> bool:
                            log("lease", g=g, r=r, e=lease.edge.name, tok=lease.token,
                                v=lease.row["version"], at=lease.row["acting_at"].isoformat(),
                                via="run")
                            data["tok"] = lease.token
                            log("act", g=g, r=r, tok=lease.token, b="ok")
                            return True

                        res: Any = lc.run(key, edge.name, act, holder=wid, data=data)
                    else:
                        res = lc.transition(key, edge.dst, from_=edge.src, data={"w": wid})
                    log("res", op="sweep", g=g, r=r, ok=bool(res), reason=res.reason,
                        ev=None if res.event is None else res.event.id, to=res.state,
                        e=edge.name, tok=data.get("tok") if edge.lease else None)
                    if res:
                        moved.append(edge.name)
                        break
                log("stuck", g=g, r=r, state=state, fclaim=bool(got.claimed),
                    fclaim_reason=got.reason, moved=moved, tried=tried)
    finally:
        store.close()
        log.close()


def last_event_id(dsn: str) -> int:
    """Events of later rounds have larger ids: a round loads only its own."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT COALESCE(MAX(id), 0) FROM rowstate_events").fetchone()
    return int(row[0]) if row else 0


def load(dsn: str, groups: list[str], log_dir: Path, after_id: int = 0,
         ) -> dict[str, History]:
    """The history of each group: its rows, its events and the log lines about it."""
    import psycopg

    wanted = set(groups)
    with psycopg.connect(dsn, autocommit=True) as conn:
        cols = sorted(BINDING.known)
        rows = conn.execute(
            f"SELECT {', '.join(cols)} FROM {TABLE} WHERE grp = ANY(%s)", [groups]).fetchall()
        events = conn.execute(
            "SELECT id, row_key, edge, from_state, to_state, data, version, created_at "
            "FROM rowstate_events WHERE machine = %s AND id > %s ORDER BY id",
            [MACHINE.name, after_id]).fetchall()
    out = {g: History(g) for g in groups}
    for row in rows:
        d = dict(zip(cols, row, strict=True))
        out[d["grp"]].rows[(d["grp"], d["rid"])] = d
    for ev in events:
        g, r = json.loads(ev[1])
        if g in wanted:
            out[g].events.append({"id": ev[0], "key": (g, r), "edge": ev[2], "from": ev[3],
                                  "to": ev[4], "data": ev[5] or {}, "version": ev[6],
                                  "at": ev[7]})
    for path in sorted(log_dir.glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            lines = f.read().split("\n")
        for n, line in enumerate(lines):
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                if n == len(lines) - 1:
                    continue  # the one line a SIGKILL may cut short
                raise
            g = rec.get("g")
            if g in wanted:
                out[g].log.append(rec)
    return out


@dataclass
class Totals:
    """What a campaign of rounds found, summed over its histories."""

    histories: int = 0
    operations: int = 0
    rounds: int = 0
    spawned: int = 0
    killed: int = 0
    hung: int = 0
    violations: dict[str, list[str]] = field(default_factory=dict)
    coverage: dict[str, int] = field(default_factory=dict)
    kept: dict[str, History] = field(default_factory=dict)

    def add(self, history: History, report: dict[str, list[str]],
            coverage: dict[str, int]) -> None:
        self.histories += 1
        self.operations += history.operations
        for name, found in report.items():
            self.violations.setdefault(name, []).extend(
                f"[{history.group}] {v}" for v in found)
        for name, n in coverage.items():
            self.coverage[name] = self.coverage.get(name, 0) + n

    def summary(self) -> list[str]:
        return [f"{name}: {self.histories} histories, {self.operations} operations, "
                f"{len(found)} violations" for name, found in self.violations.items()]

    def failures(self, limit: int = 5) -> str:
        return "\n".join(f"{name}: {v}" for name, found in self.violations.items()
                         for v in found[:limit])


def campaign(dsn: str, histories: int, *, per_round: int, seconds: float, log_root: Path,
             seed: int, rows: int = 3, workers: int = 8,
             kill_every: tuple[float, float] | None = (0.5, 2.5), keep: bool = False,
             progress: Any = None) -> Totals:
    """Run ``histories`` histories, ``per_round`` at a time, and check each with the oracle."""
    from chaos.oracle import Oracle

    setup(dsn)
    totals = Totals()
    rng = random.Random(seed)
    done = 0
    while done < histories:
        n = min(per_round, histories - done)
        name = f"r{totals.rounds + 1}"
        groups = [f"{name}h{done + i + 1}" for i in range(n)]
        log_dir = log_root / name
        after = last_event_id(dsn)
        stats = run_round(dsn, groups, rows=rows, workers=workers, seconds=seconds,
                          kill_every=kill_every, log_dir=log_dir, seed=rng.randrange(2**32))
        sweep(dsn, groups, rows, log_dir, seed=rng.randrange(2**32))
        # what the workers printed (a traceback, a warning) is a finding too
        noise = (log_dir / "stderr.txt").read_text(errors="replace").strip()
        for group, history in load(dsn, groups, log_dir, after).items():
            oracle = Oracle(history)
            report = oracle.check()
            if noise and group == groups[0]:
                report["clean_workers"].append(f"worker stderr: {noise[:2000]}")
            totals.add(history, report, oracle.coverage())
            if keep:
                totals.kept[group] = history
        totals.rounds += 1
        totals.spawned += stats.spawned
        totals.killed += stats.killed
        totals.hung += stats.hung
        done += n
        if progress is not None:
            progress(totals)
    return totals
