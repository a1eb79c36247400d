"""Competing finalizers: 16 threads, two scopes, one dataset (DP-3816).

Every thread is a status handler of the same job, half of them the "complete" finalizer and
half the "cancel" one. Exactly one scope may win the claim, and exactly one terminal
transition may apply, on every persistence path (the engine on PostgreSQL, the adapter path
over PostgreSQL and over a dict).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dataset_lifecycle import STATUSES, AsyncDatasetLifecycleClient
from support.dataset import Env, drop_pg_schema, new_pg_schema

THREADS = 16
ROUNDS = 3
TARGET = {"complete": STATUSES.SUCCEEDED, "cancel": STATUSES.CANCELED}



@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres),
                        pytest.param("adapter-pg", marks=pytest.mark.postgres), "dict"])
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    where = request.getfixturevalue("ds_pg_database") if request.param != "dict" else ""
    made = Env(request.param, "sync", where)
    try:
        yield made
    finally:
        made.close()


def ident(round_: int) -> dict[str, str]:
    return {"userId": "u1", "datasetId": f"race-{round_}"}


def test_claims_then_transitions_one_scope_wins(env: Env) -> None:
    """All claims land before any transition: exactly one scope holds the claim, and only
    its handlers try (and exactly one of them lands) the terminal move."""
    lc = env.make(reservation_field="__DR.isJobRunning")
    for round_ in range(ROUNDS):
        key = ident(round_)
        env.seed(key, dataloadingStatus="CANCELLING", jobId="job-1",
                 __DR={"isJobRunning": True})
        claimed = threading.Barrier(THREADS)

        def handler(i: int, key: dict[str, str] = key,
                    claimed: threading.Barrier = claimed) -> tuple[str, bool, bool]:
            scope = "complete" if i % 2 else "cancel"
            claim = lc.claim_finalization(key, "job-1", scope=scope)
            claimed.wait(timeout=30)
            applied = False
            if claim.claimed:
                applied = lc.transition(key, from_=["LOADING", "CANCELLING"],
                                        to=TARGET[scope], owner_job_id="job-1").applied
                lc.release_claim(key, "job-1", scope=scope)
            return scope, claim.claimed, applied

        with ThreadPoolExecutor(THREADS) as pool:
            outcomes = list(pool.map(handler, range(THREADS)))

        winners = {scope for scope, got, _ in outcomes if got}
        assert len(winners) == 1, outcomes
        assert sum(applied for _, _, applied in outcomes) == 1, outcomes
        [scope] = winners
        assert sum(got for _, got, _ in outcomes) == THREADS // 2  # its redeliveries re-claim
        row = env.row(key)
        assert row is not None
        assert row["dataloadingStatus"] == TARGET[scope]
        assert (row["finalizingJobId"], row["__DR"]) == (None, {"isJobRunning": False})


def test_free_running_handlers_never_overlap_their_destructive_work(env: Env) -> None:
    """No barrier: claims, work and transitions interleave freely. Two different scopes are
    never inside their destructive work at once, and exactly one terminal move lands."""
    lc = env.make(reservation_field="__DR.isJobRunning")
    for round_ in range(ROUNDS):
        key = ident(100 + round_)
        env.seed(key, dataloadingStatus="LOADING", jobId="job-1", __DR={"isJobRunning": True})
        start = threading.Barrier(THREADS)
        lock = threading.Lock()
        working: dict[str, int] = {"complete": 0, "cancel": 0}
        overlaps: list[tuple[str, dict[str, int]]] = []

        def handler(i: int, key: dict[str, str] = key, start: threading.Barrier = start,
                    working: dict[str, int] = working, lock: threading.Lock = lock,
                    overlaps: list[Any] = overlaps) -> bool:
            scope = "complete" if i % 2 else "cancel"
            start.wait(timeout=30)
            if not lc.claim_finalization(key, "job-1", scope=scope).claimed:
                return False
            try:
                if not lc.can_transition_to(key, TARGET[scope], owner_job_id="job-1"):
                    return False  # the load is already finalized: no destructive work
                with lock:
                    working[scope] += 1
                    other = "cancel" if scope == "complete" else "complete"
                    if working[other]:
                        overlaps.append((scope, dict(working)))
                # ... destructive finalization ...
                with lock:
                    working[scope] -= 1
                return bool(lc.transition(key, from_=["LOADING", "CANCELLING"],
                                          to=TARGET[scope], owner_job_id="job-1").applied)
            finally:
                lc.release_claim(key, "job-1", scope=scope)

        with ThreadPoolExecutor(THREADS) as pool:
            applied = list(pool.map(handler, range(THREADS)))

        assert overlaps == []
        assert sum(applied) == 1
        row = env.row(key)
        assert row is not None and row["dataloadingStatus"] in ("SUCCEEDED", "CANCELED")
        assert row["finalizingJobId"] is None


@pytest.mark.postgres
async def test_asyncio_handlers_race_on_postgres(ds_pg_database: str) -> None:
    schema = new_pg_schema(ds_pg_database)
    helper = Env("postgres", "sync", ds_pg_database, schema)
    lc = AsyncDatasetLifecycleClient()
    lc.init(dsn=ds_pg_database, schema=schema, reservation_field="__DR.isJobRunning")
    try:
        helper.seed({"userId": "u1", "datasetId": "a"}, dataloadingStatus="CANCELLING",
                    jobId="job-1", __DR={"isJobRunning": True})
        key = {"userId": "u1", "datasetId": "a"}

        claimed_all = asyncio.Barrier(THREADS)

        async def handler(i: int) -> tuple[str, bool, bool]:
            scope = "complete" if i % 2 else "cancel"
            claim = await lc.claim_finalization(key, "job-1", scope=scope)
            # every claim lands before any transition: a claim arriving after the winner
            # released would be free again (claims do not check the status, as in the seed)
            await claimed_all.wait()
            applied = False
            if claim.claimed:
                res = await lc.transition(key, to=TARGET[scope], owner_job_id="job-1",
                                          from_=["LOADING", "CANCELLING"])
                applied = res.applied
                await lc.release_claim(key, "job-1", scope=scope)
            return scope, claim.claimed, applied

        outcomes: list[Any] = await asyncio.gather(*(handler(i) for i in range(THREADS)))
        assert len({scope for scope, got, _ in outcomes if got}) == 1
        assert sum(applied for _, _, applied in outcomes) == 1
    finally:
        await lc.reset()
        helper.close()
        drop_pg_schema(ds_pg_database, schema)
