"""Round trips, counted: on PostgreSQL a pure transition is ONE statement (the conditional
UPDATE and its event row in one CTE), a leased edge is TWO (claim; finalize or release) plus
the act, and a refusal costs no extra statement to explain. The SQL shape is asserted once."""

from __future__ import annotations

import re
from typing import Any

from engine_fixtures import JOBS, RUNS, Backend, on
from rowstate import ActiveLease, Lifecycle, SQLiteStore
from rowstate.compiler import Batch


@on("postgres")
def test_a_pure_transition_is_one_statement(backend: Backend) -> None:
    runs = backend.make(RUNS)
    backend.seed(RUNS, week_of="w1")
    backend.seed(RUNS, week_of="w2")

    before = backend.statements
    assert runs.transition("w1", "COLLECTING", data={"by": "op"}).applied
    assert backend.statements == before + 1

    for refused in (lambda: runs.transition("w1", "APPROVED"),  # STATE_MISMATCH
                    lambda: runs.transition("w2", "COLLECTING"),  # INVARIANT
                    lambda: runs.transition("nobody", "COLLECTING")):  # RECORD_NOT_FOUND
        before = backend.statements
        assert not refused().applied
        assert backend.statements == before + 1  # the reason comes from the same statement


@on("postgres")
def test_a_leased_edge_is_two_statements_plus_the_act(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    for key in ("ok", "falsy", "refused"):
        backend.seed(JOBS, id=key, state="READY" if key != "refused" else "NEW")
    counts: list[int] = []

    def act(lease: ActiveLease) -> bool:
        counts.append(backend.statements)  # the claim has been sent, nothing else
        return lease.key[0] == "ok"

    before = backend.statements
    assert jobs.run("ok", "start", act).applied
    assert counts == [before + 1]
    assert backend.statements == before + 2  # claim; finalize

    before = backend.statements
    assert jobs.run("falsy", "start", act).reason == "ACT_FAILED"
    assert backend.statements == before + 2  # claim; release

    before = backend.statements
    assert jobs.run("refused", "start", act).reason == "STATE_MISMATCH"
    assert backend.statements == before + 1  # the refused claim only; no act
    assert len(counts) == 2


@on("postgres")
def test_claims_and_releases_are_one_statement_each(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="RUNNING")
    for call in (lambda: jobs.claim_finalization("j1", "job-7", "publish"),
                 lambda: jobs.claim_finalization("j1", "job-8", "publish"),  # refused
                 lambda: jobs.release_finalization("j1", "job-7", "publish"),
                 lambda: jobs.transition("j1", "DONE")):
        before = backend.statements
        call()
        assert backend.statements == before + 1


def _first_batch(lc: Any, method: str, *args: Any, **kwargs: Any) -> Batch:
    """The statements an operation sends first, without running them (the core is sans-IO)."""
    op = getattr(lc.core, method)(*args, **kwargs)
    try:
        batch = next(op)
    finally:
        op.close()
    assert isinstance(batch, Batch)
    return batch


@on("postgres-sync")
def test_the_sql_shape_of_a_postgresql_transition(backend: Backend) -> None:
    runs = backend.make(RUNS)
    batch = _first_batch(runs, "transition", "w1", "COLLECTING", data={"secret": "s3cr3t"})

    assert len(batch.statements) == 1 and not batch.transaction
    sql, params = batch.statements[0]
    assert sql.startswith("WITH cur AS (SELECT ")
    assert "FOR UPDATE" in sql
    assert len(re.findall(r"\bUPDATE\b", sql)) == 2  # "FOR UPDATE" and the one UPDATE
    assert len(re.findall(r"\bUPDATE \"pub_schedule_runs\" AS t SET\b", sql)) == 1
    assert sql.count("RETURNING") == 2  # the UPDATE's and the event INSERT's
    assert len(re.findall(r"INSERT INTO \"rowstate_events\"", sql)) == 1
    assert ";" not in sql
    # values are parameters, never SQL text
    assert "w1" not in sql and "s3cr3t" not in sql and "COLLECTING" not in sql
    assert "w1" in params and "COLLECTING" in params
    # one shape, one text: psycopg can prepare it server-side
    again, _ = _first_batch(runs, "transition", "w9", "COLLECTING", data={"x": 1}).statements[0]
    assert again == sql


def test_the_sql_shape_of_an_sqlite_transition(tmp_path: Any) -> None:
    store = SQLiteStore(str(tmp_path / "shape.db"))
    try:
        runs = Lifecycle(store, RUNS)
        batch = _first_batch(runs, "transition", "w1", "COLLECTING")
        # one transaction: read the row, write the event under the same conditions, update
        assert batch.transaction
        kinds = [sql.split()[0] for sql, _ in batch.statements]
        assert kinds == ["SELECT", "INSERT", "UPDATE"]
        update = batch.statements[-1][0]
        assert "RETURNING" in update and "w1" not in update
        # a claim (no event row) is a single UPDATE ... RETURNING, outside a transaction
        jobs = Lifecycle(store, JOBS)
        claim = _first_batch(jobs, "claim", "j1", "start")
        assert not claim.transaction and len(claim.statements) == 1
        assert claim.statements[0][0].startswith('UPDATE "jobs" SET')
        assert store.statements == 0  # built, never sent
    finally:
        store.close()
