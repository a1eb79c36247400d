"""Round trips, counted: on PostgreSQL an applied transition is ONE statement (the
conditional UPDATE and its event row in one CTE, as hand-written), a leased edge is TWO
(claim; finalize or release) plus the act, and a refusal costs ONE more (the read that
explains it). The SQL shape is asserted once."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from rowstate import ActFailed, ActiveLease, Lifecycle
from rowstate.ext import Batch
from rowstate.stores import PostgresStore, SQLiteStore
from support.engine import JOBS, RUNS, Backend, on


@on("postgres")
def test_a_pure_transition_is_one_statement(backend: Backend) -> None:
    runs = backend.make(RUNS)
    backend.seed(RUNS, week_of="w1")
    backend.seed(RUNS, week_of="w2")

    before = backend.statements
    assert runs.transition("w1", "COLLECTING", data={"by": "op"}).applied
    assert backend.statements == before + 1

    for refused, reason, state in (
            (lambda: runs.transition("w1", "APPROVED"), "STATE_MISMATCH", "COLLECTING"),
            (lambda: runs.transition("w2", "COLLECTING"), "INVARIANT", "DRAFT"),
            (lambda: runs.transition("nobody", "COLLECTING"), "RECORD_NOT_FOUND", None)):
        before = backend.statements
        result = refused()
        assert (result.applied, result.reason, result.state) == (False, reason, state)
        assert backend.statements == before + 2  # the refused write; the read explaining it


@on("postgres")
def test_a_leased_edge_is_two_statements_plus_the_act(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    for key in ("ok", "falsy", "refused"):
        backend.seed(JOBS, id=key, state="READY" if key != "refused" else "NEW")
    counts: list[int] = []

    def act(lease: ActiveLease) -> object:
        counts.append(backend.statements)  # the claim has been sent, nothing else
        return True if lease.key[0] == "ok" else ActFailed("no")

    before = backend.statements
    assert jobs.run("ok", "start", act).applied
    assert counts == [before + 1]
    assert backend.statements == before + 2  # claim; finalize

    before = backend.statements
    assert jobs.run("falsy", "start", act).reason == "ACT_FAILED"
    assert backend.statements == before + 2  # claim; release

    before = backend.statements
    assert jobs.run("refused", "start", act).reason == "STATE_MISMATCH"
    assert backend.statements == before + 2  # the refused claim and its explaining read
    assert len(counts) == 2


@on("postgres")
def test_claims_and_releases_are_one_statement_each(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="RUNNING")
    for call, statements in (
            (lambda: jobs.claim_finalization("j1", "job-7", "publish"), 1),
            (lambda: jobs.claim_finalization("j1", "job-8", "publish"), 2),  # refused + read
            (lambda: jobs.release_finalization("j1", "job-7", "publish"), 1),
            (lambda: jobs.transition("j1", "DONE"), 1)):
        before = backend.statements
        call()
        assert backend.statements == before + statements


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
    # the hand-written shape: the conditional UPDATE and the event INSERT reading from it
    assert sql.startswith('WITH upd AS (UPDATE "pub_schedule_runs" AS t SET ')
    assert "FOR UPDATE" not in sql  # nothing locks the row before the UPDATE does
    assert len(re.findall(r"\bUPDATE\b", sql)) == 1
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


@on("postgres")
def test_a_move_from_several_states_guesses_the_state_and_learns(backend: Backend) -> None:
    """FAILED is entered from READY (cancel) or RUNNING (crash): the write is the one-state
    UPDATE from the likeliest state; a wrong guess costs the read and one retry."""
    jobs = backend.make(JOBS)
    for key, state in (("r1", "RUNNING"), ("r2", "RUNNING"), ("q1", "READY"), ("d1", "DONE")):
        backend.seed(JOBS, id=key, state=state)

    def move(key: str, statements: int) -> Any:
        before = backend.statements
        result = jobs.transition(key, "FAILED")
        assert backend.statements == before + statements
        return result

    first = move("r1", 3)  # guessed READY (listed first): refused, read, retried
    assert (first.applied, first.previous, first.event.edge) == (True, "RUNNING", "crash")
    second = move("r2", 1)  # the state this move last left: right at once
    assert (second.previous, second.event.edge) == ("RUNNING", "crash")
    third = move("q1", 3)
    assert (third.previous, third.event.edge) == ("READY", "cancel")
    refused = move("d1", 2)  # DONE is no from-state: the read explains, nothing retried
    assert (refused.applied, refused.reason, refused.state) == (False, "STATE_MISMATCH", "DONE")
    assert [e.from_state for e in jobs.history("r1")] == ["RUNNING"]


class Interleaved(PostgresStore):
    """A real store that runs ``hook`` (another writer, on its own connection) right after
    its ``after``-th batch: a deterministic interleaving of two real writers."""

    def __init__(self, dsn: str, after: int, hook: Callable[[], None]) -> None:
        super().__init__(dsn, min_size=1, max_size=2)
        self.after, self.hook, self.calls = after, hook, 0

    def run(self, batch: Batch) -> Any:
        out = super().run(batch)
        self.calls += 1
        if self.calls == self.after:
            self.hook()
        return out


@on("postgres-sync")
def test_a_row_that_keeps_moving_falls_back_to_the_locking_statement(
        backend: Backend) -> None:
    other = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="RUNNING")

    def move_on() -> None:  # after the read saw RUNNING: RUNNING -> FAILED -> READY
        assert other.transition("j1", "FAILED", from_="RUNNING").applied
        assert other.transition("j1", "READY", from_="FAILED").applied

    # the first batch is the guessed write and the read explaining its miss (one batch)
    store = Interleaved(backend.where, after=1, hook=move_on)
    try:
        jobs = Lifecycle(store, JOBS)
        result = jobs.transition("j1", "FAILED")  # guess READY: miss; read: RUNNING
        # retried from RUNNING: miss again (moved on); read: READY; the locking statement
        assert store.statements == 5
        assert (result.applied, result.previous, result.event.edge) == (True, "READY", "cancel")
        assert [e.edge for e in jobs.history("j1")] == ["crash", "retry", "cancel"]
    finally:
        store.close()
