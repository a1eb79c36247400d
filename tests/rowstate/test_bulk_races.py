"""Concurrent set-based moves on PostgreSQL (#17.29): rows are locked in key order, so two
``transition_many`` calls over overlapping rows never deadlock; the one that comes second
gets a per-row verdict for each row the other moved, never an error.

Real threads, each with its own pooled connection; the rows are inserted in shuffled order
(their physical order is not their key order) and the calls differ in size, so the planner
reads them by a sequential scan in one call and by the key's index in another: without an
order of its own, each locks the rows in the order its plan meets them."""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import pytest

import rowstate
from rowstate import Lifecycle
from rowstate.ext import Batch
from support.engine import JOBS

pytestmark = pytest.mark.postgres

BIG, SMALL = 2, 4  # threads moving the whole set or half of it; threads moving a few rows
THREADS = BIG + SMALL
ROWS = 2000
FILLER = 30_000  # rows no call matches: a few keys are read by the key's index
ROUNDS = 5
PAIRS = 40  # small calls per small thread


def _order(r: int) -> list[str]:
    """Round ``r``'s keys in the order they are inserted (READY, RUNNING, READY, ...)."""
    order = [f"r{r}-{i:04d}" for i in range(ROWS)]
    random.Random(r).shuffle(order)
    return order


def _seed(store: Any, r: int) -> list[str]:
    order = _order(r)
    store.run(Batch((("INSERT INTO jobs (id, state, priority, version) SELECT k, "
                      "CASE WHEN n %% 2 = 1 THEN 'READY' ELSE 'RUNNING' END, 1, 0 "
                      "FROM unnest(%s::text[]) WITH ORDINALITY AS u(k, n)", [order]),)))
    store.run(Batch((("ANALYZE jobs", []),)))
    return sorted(order)


def _race(jobs: Lifecycle, calls: list[list[list[str]]],
          froms: list[str]) -> tuple[list[Any], list[BaseException]]:
    """Each thread runs its calls one after the other, all threads started at once."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = []
    errors: list[BaseException] = []

    def body(batches: list[list[str]]) -> None:
        try:
            barrier.wait(timeout=30)
            for slice_ in batches:
                results.append(jobs.transition_many("FAILED", keys=slice_, from_=froms))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(b,)) for b in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a racing thread hung"
    return results, errors


@pytest.mark.parametrize("froms", [["READY", "RUNNING"], ["READY"]],
                         ids=["several-from-states", "one-from-state"])
def test_concurrent_transition_many_never_deadlock(pg_dsn: str, froms: list[str]) -> None:
    store = rowstate.connect(pg_dsn, min_size=THREADS, max_size=THREADS)
    try:
        jobs = Lifecycle(store, JOBS)
        jobs.create_schema()
        store.run(Batch((("INSERT INTO jobs (id, state, priority, version) SELECT "
                          "'filler' || g, 'DONE', 0, 0 FROM generate_series(1, %s) g",
                          [FILLER]),)))
        for r in range(ROUNDS):
            keys = _seed(store, r)
            # the big calls: the whole set, half of it (a scan in the table's order); the
            # small ones: pairs, one after the other (the key's index: in key order)
            rng = random.Random(r)
            calls = [[list(keys)], [keys[::-1][: ROWS // 2]]][:BIG]
            calls += [[rng.sample(keys, 2) for _ in range(PAIRS)] for _ in range(SMALL)]
            results, errors = _race(jobs, calls, froms)
            assert errors == [], f"round {r}: {errors!r}"
            assert len(results) == sum(len(batches) for batches in calls)
            moved = Counter(k for res in results for (k,) in res.applied)
            wanted = [k for i, k in enumerate(_order(r)) if i % 2 == 0 or len(froms) > 1]
            assert sorted(moved) == sorted(wanted) and set(moved.values()) == {1}, f"round {r}"
            for res in results:
                # a row another call moved first is this call's refusal, with its reason
                assert {why for _, why in res.refused} <= {"STATE_MISMATCH"}, res.refused
                assert sorted(e.key for e in res.events) == sorted(res.applied)
            events = store.run(Batch((
                ("SELECT row_key, COUNT(*) FROM rowstate_events WHERE machine = 'job' AND "
                 "to_state = 'FAILED' AND row_key LIKE %s GROUP BY row_key", [f'["r{r}-%']),)))
            assert len(events[0]) == len(wanted) and {n for _, n in events[0]} == {1}
    finally:
        store.close()
