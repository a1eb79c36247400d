"""Races on one row: exactly one winner, no lost update, a leased act runs once.

Every check reads the database with a plain driver connection (support.races.read_row /
read_events), not through the engine under test. The version column, the fencing token and
the event rows are three independent counters of what was applied; they must agree with the
results the workers saw.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import rowstate
import rowstate.stores
from rowstate import AsyncLifecycle, Lifecycle, Reason
from support import races as rh

THREADS = 8
REFUSED = {Reason.STATE_MISMATCH, Reason.LEASE_HELD}


@pytest.fixture
def pg_url(pg_dsn: str) -> str:
    return pg_dsn


def store_for(url: str) -> rowstate.stores.SQLiteStore | rowstate.stores.PostgresStore:
    if url.startswith("sqlite:"):
        return rh.open_store(url)
    return rh.open_store(url, min_size=THREADS, max_size=THREADS)


def in_threads(n: int, body: Callable[[int], None]) -> list[BaseException]:
    """Run ``body(i)`` in ``n`` threads; every exception any of them raised."""
    errors: list[BaseException] = []
    lock = threading.Lock()

    def wrapped(i: int) -> None:
        try:
            body(i)
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a racing thread hung"
    return errors


def race_rounds(lc: Lifecycle, keys: list[str],
                move: Callable[[int, str], Any]) -> dict[str, list[Any]]:
    """For each key in turn, THREADS threads released by one barrier call ``move(i, key)``."""
    barrier = threading.Barrier(THREADS, timeout=60)
    results: dict[str, list[Any]] = {k: [] for k in keys}
    lock = threading.Lock()

    def body(i: int) -> None:
        try:
            for key in keys:
                barrier.wait()
                got = move(i, key)
                with lock:
                    results[key].append(got)
        except BaseException:
            barrier.abort()  # the others stop at once instead of waiting for the timeout
            raise

    errors = in_threads(THREADS, body)
    assert errors == [], f"a racing call raised instead of returning a result: {errors!r}"
    return results


def assert_one_winner(url: str, key: str, results: list[Any], to: str) -> None:
    applied = [r for r in results if r.applied]
    refused = [r for r in results if not r.applied]
    assert len(applied) == 1, (key, results)
    assert {r.reason for r in refused} <= REFUSED, (key, [r.reason for r in refused])
    row = rh.read_row(url, key)
    assert row["state"] == to
    assert row["version"] == 1
    events = rh.read_events(url, key)
    assert [(e["from_state"], e["to_state"], e["version"]) for e in events] == [("A", to, 1)]


# -- threads -------------------------------------------------------------------------------


def test_threads_race_one_transition_exactly_one_wins(url: str) -> None:
    keys = [f"k{i}" for i in range(12)]
    rh.create_rows(url, rh.race_binding(), keys)
    store = store_for(url)
    try:
        lc = Lifecycle(store, rh.race_binding())
        results = race_rounds(lc, keys, lambda i, key: lc.transition(key, "B", from_="A"))
    finally:
        store.close()
    for key in keys:
        assert_one_winner(url, key, results[key], "B")
        assert {r.reason for r in results[key] if not r.applied} == {Reason.STATE_MISMATCH}
    if url.startswith("sqlite:"):
        with rh.raw(url) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_threads_race_mixed_moves_out_of_one_state(url: str) -> None:
    """A pure edge and two leased edges (different kinds) race out of A: the row leaves A
    once, only the winner's act runs, the losers are refused with a reason."""
    keys = [f"m{i}" for i in range(8)]
    rh.create_rows(url, rh.race_binding(), keys)
    acts: Counter[tuple[str, str]] = Counter()
    lock = threading.Lock()

    def act(lease: rowstate.ActiveLease) -> bool:
        with lock:
            acts[(str(lease.key[0]), lease.edge.name)] += 1
        time.sleep(0.01)
        return True

    store = store_for(url)
    try:
        lc = Lifecycle(store, rh.race_binding())

        def move(i: int, key: str) -> Any:
            if i % 3 == 0:
                return lc.transition(key, "B", from_="A")
            return lc.run(key, "work" if i % 3 == 1 else "audit", act)

        results = race_rounds(lc, keys, move)
    finally:
        store.close()
    for key in keys:
        winner = next(r for r in results[key] if r.applied)
        assert_one_winner(url, key, results[key], winner.state)
        ran = {edge: n for (k, edge), n in acts.items() if k == key}
        if winner.state == "B":
            assert ran == {}, "a leased act ran although a pure move won"
        else:
            assert ran == {"work" if winner.state == "C" else "audit": 1}
            assert rh.read_row(url, key)["acting_token"] == 1, "more than one claim landed"


def test_threads_race_leased_edge_act_runs_once(url: str) -> None:
    keys = [f"l{i}" for i in range(6)]
    rh.create_rows(url, rh.race_binding(), keys)
    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def act(lease: rowstate.ActiveLease) -> str:
        with lock:
            calls[str(lease.key[0])] += 1
        time.sleep(0.05)  # the others try while the lease is held
        return "done"

    store = store_for(url)
    try:
        lc = Lifecycle(store, rh.race_binding())
        results = race_rounds(lc, keys, lambda i, key: lc.run(key, "work", act))
    finally:
        store.close()
    for key in keys:
        assert_one_winner(url, key, results[key], "C")
        assert calls[key] == 1, f"the act of {key} ran {calls[key]} times"
        assert not any(r.acted for r in results[key] if not r.applied)
        row = rh.read_row(url, key)
        assert row["acting_token"] == 1, "a second claim landed"
        assert row["acting_at"] is None and row["acting_kind"] is None


def test_no_lost_update_under_flip_storm(url: str) -> None:
    """THREADS threads flip A <-> B on a few rows for a while. Each row's version must equal
    the number of flips the workers saw applied and the number of its event rows, and its
    events must form one unbroken chain (versions 1..n, each from the previous to)."""
    keys = [f"f{i}" for i in range(3)]
    rh.create_rows(url, rh.race_binding(), keys)
    seconds = 1.5 if url.startswith("sqlite:") else 2.0
    applied: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    lock = threading.Lock()
    store = store_for(url)
    try:
        lc = Lifecycle(store, rh.race_binding())

        def body(i: int) -> None:
            rnd = random.Random(i)
            mine: Counter[str] = Counter()
            missed: Counter[str] = Counter()
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                key = rnd.choice(keys)
                to, from_ = ("B", "A") if rnd.random() < 0.5 else ("A", "B")
                res = lc.transition(key, to, from_=from_, data={"worker": i})
                if res.applied:
                    mine[key] += 1
                else:
                    assert res.reason == Reason.STATE_MISMATCH, res
                    missed[key] += 1
            with lock:
                applied.update(mine)
                refused.update(missed)

        errors = in_threads(THREADS, body)
    finally:
        store.close()
    assert errors == []
    assert sum(applied.values()) > 50, f"too little happened to prove anything: {applied}"
    assert sum(refused.values()) > 0, "no race happened"
    for key in keys:
        row = rh.read_row(url, key)
        events = rh.read_events(url, key)
        assert row["version"] == applied[key] == len(events), (key, row, applied, len(events))
        assert row["state"] == ("A" if row["version"] % 2 == 0 else "B")
        state = "A"
        for n, e in enumerate(events, start=1):
            assert (e["version"], e["from_state"]) == (n, state), (key, n, e)
            state = e["to_state"]
        assert state == row["state"]


def test_async_coroutines_race_one_winner(pg_url: str) -> None:
    keys = [f"a{i}" for i in range(6)]
    rh.create_rows(pg_url, rh.race_binding(), keys)

    async def main() -> dict[str, list[Any]]:
        store = rowstate.connect_async(pg_url, min_size=THREADS, max_size=THREADS)
        try:
            lc = AsyncLifecycle(store, rh.race_binding())
            out = {}
            for key in keys:
                out[key] = list(await asyncio.gather(
                    *(lc.transition(key, "B", from_="A") for _ in range(THREADS))))
            return out
        finally:
            await store.close()

    results = asyncio.run(main())
    for key in keys:
        assert_one_winner(pg_url, key, results[key], "B")


# -- processes -----------------------------------------------------------------------------


def test_processes_race_one_winner(pg_url: str, children: list[rh.Child],
                                   tmp_path: Path) -> None:
    """4 processes, each with its own store, race the same move on one row (several rows in
    turn): a pure edge, then a leased edge whose act leaves a mark in a shared file."""
    flips = [f"p{i}" for i in range(6)]
    works = [f"w{i}" for i in range(3)]
    rh.create_rows(pg_url, rh.race_binding(), flips + works)
    marks = tmp_path / "acts.txt"
    marks.touch()
    children.extend(rh.Child("serve", pg_url, 60.0) for _ in range(4))
    assert len({c.expect()["ready"] for c in children}) == 4
    for cmd, keys in (("flip", flips), ("work", works)):
        for key in keys:
            for c in children:
                c.send(f"{cmd} {key} {marks}")
            results = [c.expect() for c in children]
            assert sum(r["applied"] for r in results) == 1, (key, results)
            assert {r["reason"] for r in results if not r["applied"]} <= REFUSED, results
            to = "B" if cmd == "flip" else "C"
            row = rh.read_row(pg_url, key)
            assert (row["state"], row["version"]) == (to, 1)
            assert len(rh.read_events(pg_url, key)) == 1
    lines = marks.read_text().split()
    acted = Counter(lines[0::3])
    assert acted == Counter(dict.fromkeys(works, 1)), f"acts per row: {acted}"
    for c in children:
        c.send("quit")
        c.close()
        assert c.proc.returncode == 0, c.stderr
