"""The application door: rows created through the door, units of work, held and fenced
writes, enabled edges, set-based moves, queries by state and business time, on every
backend ({SQLite, PostgreSQL} x {sync, async}).

The contrib stores run these by default (``@conformance``), because the store takes part:

* units of work, on the store's own transactions:
  test_a_unit_commits_app_sql_and_moves_together_or_not_at_all (the app's SQL and the
  moves commit or roll back together),
  test_nesting_is_a_savepoint_and_an_invariant_refusal_does_not_poison_the_unit
  (savepoints; a UNIQUE violation inside a unit, translated, leaves the unit usable),
  test_units_on_the_async_twin, test_several_bindings_share_a_unit_opened_on_the_store
  (``store.atomic()`` itself), test_a_read_only_unit_reads_and_refuses_to_write and
  test_a_read_only_unit_does_not_wait_for_a_writer (the store's read-only transaction,
  and a race with a writer);
* holds and fences: test_a_refused_hold_makes_the_unit_unable_to_commit,
  test_a_fenced_write_lands_only_while_the_lease_is_held and
  test_the_lease_run_hands_an_act_opens_a_fenced_unit (a unit opened from inside an act);
* error translation: test_app_sql_bad_input_is_a_typed_error (the unit's own SQL and
  values, through the store's placeholders) and
  test_transition_many_falls_back_to_one_by_one_on_an_invariant (a set-based write's
  UNIQUE violation, translated, sends it one row at a time);
* the store's batches and its ``statements`` counter:
  test_transition_many_moves_matching_rows_in_one_write.

The rest is the core's SQL: ``-m contrib`` runs it on them too. The bad calls are
``@refused_before_io``: one backend, no statement sent.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rowstate import (
    ActFailed,
    AsyncLifecycle,
    Lifecycle,
    UnitRefusedError,
    ValidationError,
)
from support.engine import (
    JOBS,
    RUNS,
    Backend,
    Clock,
    as_dict,
    conformance,
    on,
    refused_before_io,
)

APP_TABLE = "CREATE TABLE IF NOT EXISTS submissions (week_of TEXT, who TEXT, at {time})"


def lifecycle(backend: Backend, binding: Any = RUNS, **kw: Any) -> Any:
    """The raw twin (not the test's blocking wrapper): units need ``with``/``async with``."""
    made = backend.make(binding, **kw)
    return backend.raw(made)


def app_table(backend: Backend) -> None:
    time = "TIMESTAMPTZ" if backend.is_pg else "TEXT"
    backend.execute(APP_TABLE.format(time=time))


def submissions(backend: Backend) -> list[tuple[Any, ...]]:
    return backend.execute("SELECT week_of, who FROM submissions ORDER BY who")


# -- rows through the door ---------------------------------------------------------------


def test_create_writes_the_row_and_its_birth_event(backend: Backend) -> None:
    runs = backend.make(RUNS)
    got = runs.create("2026-01-05", autopilot=1)
    assert (got.applied, got.previous, got.state) == (True, None, "DRAFT")
    assert got.row is not None and got.row["autopilot"] == 1 and got.row["version"] == 0
    assert got.event is not None and (got.event.from_state, got.event.edge) == (None, None)
    history = runs.history("2026-01-05")
    assert [(e.from_state, e.to_state, e.edge) for e in history] == [(None, "DRAFT", None)]
    assert history[0].id == got.event.id
    assert runs.transition("2026-01-05", "COLLECTING").applied  # born through the door

    again = runs.create("2026-01-05")
    assert (again.applied, again.reason, again.state) == (False, "RECORD_EXISTS", "COLLECTING")
    assert len(runs.history("2026-01-05")) == 2  # no second birth event


@refused_before_io
def test_create_refuses_bad_columns_and_states_before_any_write(backend: Backend) -> None:
    runs = backend.make(RUNS)
    with backend.no_io():
        with pytest.raises(ValidationError, match="acting_token"):
            runs.create("2026-01-05", acting_token=5)  # the engine's own column
        with pytest.raises(ValidationError, match="nope"):
            runs.create("2026-01-05", nope=1)
        with pytest.raises(ValidationError, match="start"):
            runs.create("2026-01-05", state="SENT")
        with pytest.raises(ValidationError):
            runs.create("2026-01-05", autopilot=object())
    assert runs.get("2026-01-05") is None


def test_ensure_is_idempotent_and_a_unique_invariant_is_reported(backend: Backend) -> None:
    runs = backend.make(RUNS)
    first = runs.ensure("2026-01-05")
    assert first["v2_state"] == "DRAFT"
    assert runs.transition("2026-01-05", "COLLECTING").applied
    assert runs.ensure("2026-01-05")["v2_state"] == "COLLECTING"  # found, not re-created
    assert len(runs.history("2026-01-05")) == 2


# -- units of work -----------------------------------------------------------------------


@conformance
@on("sync")
def test_a_unit_commits_app_sql_and_moves_together_or_not_at_all(backend: Backend) -> None:
    runs = lifecycle(backend)
    app_table(backend)
    runs.create("2026-01-05")
    at = datetime(2026, 1, 2, 18, 30, tzinfo=UTC)
    with runs.atomic() as tx:
        tx.execute("INSERT INTO submissions VALUES (%s, %s, %s)", ["2026-01-05", "ann", at])
        tx.execute("INSERT INTO submissions VALUES (%(w)s, %(who)s, %(at)s)",
                   {"w": "2026-01-05", "who": "bob", "at": at})
        assert runs.transition("2026-01-05", "COLLECTING").applied
        refused = runs.transition("2026-01-05", "APPROVED", from_="ASSIGNED")
        assert refused.reason == "STATE_MISMATCH"  # a result; the unit goes on
        rows = tx.execute("SELECT who, at FROM submissions WHERE who LIKE %s ORDER BY who",
                          ["%n%"])
        assert rows == [{"who": "ann", "at": at}]  # dicts; times as aware UTC datetimes
    assert [r[1] for r in submissions(backend)] == ["ann", "bob"]
    assert runs.state("2026-01-05") == "COLLECTING"

    with pytest.raises(RuntimeError), runs.atomic() as tx:
        tx.execute("INSERT INTO submissions VALUES (%s, %s, %s)", ["2026-01-05", "cy", at])
        assert runs.transition("2026-01-05", "COLLECTING", from_="COLLECTING").applied
        raise RuntimeError("boom")
    assert [r[1] for r in submissions(backend)] == ["ann", "bob"]  # rolled back, both
    assert len(runs.history("2026-01-05")) == 2  # the extend's event too


@conformance
@on("sync")
def test_nesting_is_a_savepoint_and_an_invariant_refusal_does_not_poison_the_unit(
        backend: Backend) -> None:
    runs = lifecycle(backend)
    app_table(backend)
    runs.create("2026-01-05")
    runs.create("2026-01-12")
    with runs.atomic() as tx:
        assert runs.transition("2026-01-05", "COLLECTING").applied
        second = runs.transition("2026-01-12", "COLLECTING")  # H3: one COLLECTING run
        assert second.reason == "INVARIANT"
        with pytest.raises(KeyError), runs.atomic() as inner:
            inner.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["x", "dan"])
            raise KeyError("inner only")
        tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["x", "eve"])
    assert [r[1] for r in submissions(backend)] == ["eve"]
    assert runs.state("2026-01-05") == "COLLECTING"


@conformance
@on("sync")
def test_a_refused_hold_makes_the_unit_unable_to_commit(backend: Backend) -> None:
    runs = lifecycle(backend)
    app_table(backend)
    runs.create("2026-01-05")
    with runs.atomic() as tx:
        held = tx.hold("2026-01-05", ["COLLECTING"])
        assert (held.held, held.reason, held.state) == (False, "STATE_MISMATCH", "DRAFT")
        with pytest.raises(UnitRefusedError) as caught:
            tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["x", "late"])
        assert caught.value.reason == "STATE_MISMATCH"
        with pytest.raises(UnitRefusedError):
            runs.transition("2026-01-05", "COLLECTING")
    assert submissions(backend) == [] and runs.state("2026-01-05") == "DRAFT"
    with runs.atomic() as tx:
        assert tx.hold("2026-01-06", "COLLECTING").reason == "RECORD_NOT_FOUND"
    assert runs.transition("2026-01-05", "COLLECTING").applied
    with runs.atomic() as tx:
        held = tx.hold("2026-01-05", "COLLECTING")
        assert held.held and held.row is not None
        tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["2026-01-05", "ok"])
    assert [r[1] for r in submissions(backend)] == ["ok"]


@on("sync")
def test_a_hold_is_refused_while_a_lease_is_live(backend: Backend) -> None:
    runs = lifecycle(backend)
    runs.create("2026-01-05")
    runs.transition("2026-01-05", "COLLECTING")
    claim = runs.claim("2026-01-05", "close")
    assert claim.claimed
    with runs.atomic() as tx:
        assert tx.hold("2026-01-05", "COLLECTING").reason == "LEASE_HELD"


@conformance
@on("sync")
def test_a_fenced_write_lands_only_while_the_lease_is_held(backend: Backend) -> None:
    clock = Clock()
    runs = lifecycle(backend, clock=clock)
    app_table(backend)
    runs.create("2026-01-05")
    runs.transition("2026-01-05", "COLLECTING")
    first = runs.claim("2026-01-05", "close", holder="first")
    with runs.atomic(fence=first) as tx:
        tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["w", "first-1"])
    clock.advance(301)  # the first holder is paused past its TTL...
    second = runs.claim("2026-01-05", "close", holder="second")  # ...and taken over
    assert second.claimed and second.token == first.token + 1
    with runs.atomic() as tx:
        fenced = tx.fence(first)
        assert (fenced.held, fenced.reason) == (False, "LEASE_LOST")
        with pytest.raises(UnitRefusedError):
            tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["w", "zombie"])
    with runs.atomic(fence=second) as tx:
        tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["w", "second"])
    assert [r[1] for r in submissions(backend)] == ["first-1", "second"]
    assert not runs.finalize("2026-01-05", first).applied
    assert runs.finalize("2026-01-05", second).applied


@conformance
@on("sync")
def test_the_lease_run_hands_an_act_opens_a_fenced_unit(backend: Backend) -> None:
    runs = lifecycle(backend)
    app_table(backend)
    runs.create("2026-01-05")
    runs.transition("2026-01-05", "COLLECTING")

    def act(lease: Any) -> int:
        with lease.atomic() as tx:
            tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["w", "by-act"])
        return 0  # a falsy result is a success

    res = runs.run("2026-01-05", "close", act)
    assert res.applied and res.state == "CLOSED"
    assert [r[1] for r in submissions(backend)] == ["by-act"]
    failed = runs.run("2026-01-05", "generate", lambda lease: ActFailed("picker down"))
    assert (failed.reason, failed.error) == ("ACT_FAILED", "picker down")
    assert as_dict(runs.get("2026-01-05"))["last_error"] == "picker down"


@conformance
@on("async")
def test_units_on_the_async_twin(backend: Backend) -> None:
    runs: AsyncLifecycle = lifecycle(backend)
    app_table(backend)

    async def scenario() -> None:
        await runs.create("2026-01-05")
        async with runs.atomic() as tx:
            assert (await tx.hold("2026-01-05", "DRAFT")).held
            await tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["w", "a"])
            assert (await runs.transition("2026-01-05", "COLLECTING")).applied
            async with tx.savepoint():
                await tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["w", "b"])
        with pytest.raises(ZeroDivisionError):
            async with runs.atomic() as tx:
                await tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["w", "c"])
                raise ZeroDivisionError
        async with runs.atomic() as tx:
            assert (await tx.hold("2026-01-05", "CLOSED")).reason == "STATE_MISMATCH"
            with pytest.raises(UnitRefusedError):
                await tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["w", "d"])

        async def act(lease: Any) -> None:
            async with lease.atomic() as tx:
                await tx.execute("INSERT INTO submissions VALUES (%s, %s, NULL)", ["w", "e"])

        assert (await runs.run("2026-01-05", "close", act)).applied
        edges = {e.edge: e for e in await runs.enabled_edges("2026-01-05")}
        assert edges["generate"].allowed and not edges["close"].allowed
        moved = await runs.transition_many("COLLECTING", keys=["2026-01-05", "nope"])
        assert moved.applied == (("2026-01-05",),)
        assert await runs.count(state="COLLECTING") == 1
        assert [r["week_of"] for r in await runs.find(state="COLLECTING")] == ["2026-01-05"]

    backend.wait(scenario())
    assert [r[1] for r in submissions(backend)] == ["a", "b", "e"]


@conformance
@on("sync")
def test_app_sql_bad_input_is_a_typed_error(backend: Backend) -> None:
    runs = lifecycle(backend)
    with runs.atomic() as tx:
        with pytest.raises(ValidationError, match="aware"):
            tx.execute("SELECT %s", [datetime(2026, 1, 1)])
        with pytest.raises(ValidationError, match="placeholder"):
            tx.execute("SELECT %d", [1])
        assert tx.execute("SELECT '50%%' AS pct, %s AS n", [1]) == [{"pct": "50%", "n": 1}]


# -- enabled edges -----------------------------------------------------------------------


def test_enabled_edges_lists_every_edge_with_its_reasons(backend: Backend) -> None:
    runs = backend.make(RUNS)
    runs.create("2026-01-05")
    runs.create("2026-01-12")
    runs.transition("2026-01-12", "COLLECTING")
    edges = {e.edge: e for e in runs.enabled_edges("2026-01-05")}
    assert set(edges) == {e.name for e in RUNS.machine.edges}
    assert edges["open"].reasons == ("INVARIANT",)  # H3: 2026-01-12 is collecting
    assert edges["approve"].reasons == ("STATE_MISMATCH",)
    ready = {e.edge: e for e in runs.enabled_edges("2026-01-12")}
    assert ready["close"].allowed and ready["extend"].allowed and ready["close"].lease
    assert not ready["open"].allowed
    assert runs.claim("2026-01-12", "close").claimed
    held = {e.edge: e for e in runs.enabled_edges("2026-01-12")}
    assert held["extend"].reasons == ("LEASE_HELD",) and held["close"].reasons == ("LEASE_HELD",)
    assert runs.can_transition("2026-01-12", "CLOSED").reasons == ("LEASE_HELD",)
    assert runs.can_transition("2026-01-05", "CLOSED").reasons[0] == "STATE_MISMATCH"
    missing = runs.enabled_edges("1999-01-04")
    assert {e.reasons for e in missing} == {("RECORD_NOT_FOUND",)}


def test_can_transition_dry_runs_a_leased_edge(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    jobs.create("j1", state=None)
    jobs.transition("j1", "READY")
    assert jobs.can_transition("j1", "RUNNING").allowed  # the start lease's claim
    assert jobs.can_transition("j1", "RUNNING", owner="x").reasons == ("NOT_OWNER",)


# -- set-based moves and queries ---------------------------------------------------------


@conformance
def test_transition_many_moves_matching_rows_in_one_write(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    for i in range(6):
        jobs.create(f"j{i}", priority=i)
        jobs.transition(f"j{i}", "READY")
        if i % 2:
            jobs.transition(f"j{i}", "FAILED")
    assert jobs.claim("j2", "start").claimed  # a live lease blocks j2's cancel
    statements = backend.statements
    got = jobs.transition_many("FAILED", keys=["j0", "j2", "j4", "j1", "missing"])
    # one write (SQLite: one transaction: BEGIN, events, UPDATE, COMMIT), and one read
    # that explains the refused keys
    assert backend.statements - statements == (1 if backend.is_pg else 4) + 1
    assert sorted(got.applied) == [("j0",), ("j4",)]
    assert dict(got.refused) == {("j2",): "LEASE_HELD", ("j1",): "STATE_MISMATCH",
                                 ("missing",): "RECORD_NOT_FOUND"}
    assert sorted(e.key for e in got.events) == [("j0",), ("j4",)]
    assert [(e.edge, e.from_state) for e in jobs.history("j0")][-1] == ("cancel", "READY")
    assert as_dict(jobs.get("j0"))["status"] == "failed"  # entry writes, as one by one

    statements = backend.statements
    reset = jobs.transition_many("READY", where={"priority": [1, 3, 4]}, from_="FAILED")
    assert sorted(reset.applied) == [("j1",), ("j3",), ("j4",)] and reset.refused == ()
    # the read of the matching keys, then the write alone: nothing to explain
    assert backend.statements - statements == 1 + (1 if backend.is_pg else 4)
    assert jobs.count(state="READY") == 4
    assert [r["id"] for r in jobs.find(state="READY", order_by="-priority", limit=2)] == [
        "j4", "j3"]
    assert jobs.count(state=["FAILED", "READY"], where={"priority": 0}) == 1
    with pytest.raises(ValidationError):
        jobs.transition_many("READY", keys=["j1"], where={"priority": 1})
    with pytest.raises(ValidationError):
        jobs.find(where={"no_such": 1})


@conformance
def test_transition_many_falls_back_to_one_by_one_on_an_invariant(backend: Backend) -> None:
    runs = backend.make(RUNS)
    for week in ("2026-01-05", "2026-01-12", "2026-01-19"):
        runs.create(week)
    got = runs.transition_many("COLLECTING", keys=["2026-01-05", "2026-01-12", "2026-01-19"])
    assert len(got.applied) == 1 and len(got.refused) == 2
    assert {r for _, r in got.refused} == {"INVARIANT"}
    assert runs.count(state="COLLECTING") == 1


# -- business time -----------------------------------------------------------------------


def test_fire_due_judges_deadlines_by_the_given_instant(backend: Backend) -> None:
    runs = backend.make(RUNS)
    deadline = datetime(2026, 1, 7, 17, 0, tzinfo=UTC)
    runs.create("2026-01-05", autopilot=1, deadline_at=deadline)
    runs.transition("2026-01-05", "COLLECTING")
    calls: list[Any] = []
    before = runs.fire_due(acts={"close": calls.append}, now=deadline - timedelta(minutes=1))
    assert before.fired == () and calls == []
    report = runs.fire_due(acts={"close": calls.append},
                           notify={"collecting_alert": calls.append}, now=deadline)
    assert [(f.name, f.applied) for f in report.fired] == [("close", True)]
    assert runs.state("2026-01-05") == "CLOSED"
    with pytest.raises(ValidationError):
        runs.fire_due(now=datetime(2026, 1, 7))  # naive


@conformance
@on("sync")
def test_several_bindings_share_a_unit_opened_on_the_store(backend: Backend) -> None:
    runs = lifecycle(backend)
    jobs: Lifecycle = lifecycle(backend, JOBS)
    with backend.store.atomic() as tx:
        runs.create("2026-01-05")
        jobs.create("j1")
        assert tx.hold("j1", "NEW", lifecycle=jobs).held
        assert tx.hold("2026-01-05", "DRAFT", lifecycle=runs).held
        with pytest.raises(ValidationError):
            tx.hold("j1", "NEW")  # a store's unit names the binding
    assert runs.state("2026-01-05") == "DRAFT" and jobs.state("j1") == "NEW"


def test_transition_many_on_a_derived_state_writes_the_entry_columns(backend: Backend) -> None:
    runs = backend.make(RUNS)
    for week in ("2026-01-05", "2026-01-12"):
        runs.create(week)
    backend.execute("UPDATE pub_schedule_runs SET v2_state = NULL")  # legacy rows: derived
    got = runs.transition_many("COLLECTING", keys=["2026-01-05"], from_="DRAFT")
    assert got.applied == (("2026-01-05",),) and got.events[0].from_state == "DRAFT"
    assert runs.run("2026-01-05", "close", lambda lease: None).applied
    assert runs.run("2026-01-05", "generate", lambda lease: None).applied
    approved = runs.transition_many("APPROVED", where={"autopilot": 0}, from_="ASSIGNED")
    assert approved.applied == (("2026-01-05",),)
    assert as_dict(runs.get("2026-01-05"))["status"] == "approved"
    assert [e.edge for e in runs.history("2026-01-05")][-1] == "approve"


def test_transition_many_names_odd_keys_as_history_does(backend: Backend) -> None:
    """The event's row_key is built in SQL for ASCII keys: it must be exactly the text the
    one-row door writes (quotes, backslashes, control characters); other keys one by one."""
    jobs = backend.make(JOBS)
    keys = ['we"ird', "back\\slash", "tab\there", "ünï"]
    for k in keys:
        jobs.create(k)
    moved = jobs.transition_many("READY", keys=keys, from_="NEW")
    assert sorted(moved.applied) == sorted((k,) for k in keys)
    for k in keys:
        assert [(e.edge, e.to_state) for e in jobs.history(k)][-1] == ("prepare", "READY")


# -- read-only units ------------------------------------------------------------------------


@conformance
def test_a_read_only_unit_reads_and_refuses_to_write(backend: Backend) -> None:
    """``store.atomic(read_only=True)``: a snapshot for reads; a write in it fails (SQLite's
    query_only, PostgreSQL's read-only transaction) and leaves nothing behind."""
    runs = backend.make(RUNS)
    runs.create("2026-01-05")
    read = "SELECT week_of FROM pub_schedule_runs"
    write = "UPDATE pub_schedule_runs SET autopilot = 1"

    async def in_async() -> tuple[Any, bool]:
        async with backend.store.atomic(read_only=True) as tx:
            rows = await tx.execute(read)
        try:
            async with backend.store.atomic(read_only=True) as tx:
                await tx.execute(write)
        except Exception:
            return rows, True
        return rows, False

    if backend.is_async:
        rows, refused = backend.wait(in_async())
    else:
        with backend.store.atomic(read_only=True) as tx:
            rows = tx.execute(read)
        refused = False
        try:
            with backend.store.atomic(read_only=True) as tx:
                tx.execute(write)
        except Exception:
            refused = True
    assert [r["week_of"] for r in rows] == ["2026-01-05"]
    assert refused
    assert as_dict(runs.get("2026-01-05"))["autopilot"] == 0
    runs.transition("2026-01-05", "COLLECTING")  # the connection writes again afterwards
    assert runs.state("2026-01-05") == "COLLECTING"


@conformance
@on("sync")
def test_a_read_only_unit_does_not_wait_for_a_writer(backend: Backend) -> None:
    """On SQLite a unit that writes holds the write lock until it ends; a read-only one
    reads the last committed state meanwhile instead of queueing behind it (PostgreSQL's
    readers never queue)."""
    import threading

    runs = backend.make(RUNS)
    runs.create("2026-01-05")
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with backend.store.atomic() as tx:
            tx.execute("UPDATE pub_schedule_runs SET autopilot = 1")
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(10)
        started = datetime.now(UTC)
        with backend.store.atomic(read_only=True) as tx:
            rows = tx.execute("SELECT autopilot FROM pub_schedule_runs")
        waited = datetime.now(UTC) - started
        assert [r["autopilot"] for r in rows] == [0]  # the writer has not committed
        assert not release.is_set() and waited < timedelta(seconds=5)
    finally:
        release.set()
        thread.join()
    assert as_dict(runs.get("2026-01-05"))["autopilot"] == 1
