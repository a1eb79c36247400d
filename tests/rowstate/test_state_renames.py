"""State renames with live rows (rowstate.migrations, Machine(aliases=), stale states).

The story of every test: release 1 of a document machine has a state REVIEW (and GONE);
release 2 calls it IN_REVIEW, keeps REVIEW as an alias for one release, and drops GONE.
Both releases run against one table, as they do during a rolling deployment.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rowstate
import rowstate.ext
from rowstate import (
    Binding,
    DefinitionError,
    Edge,
    Lease,
    Lifecycle,
    Machine,
    Unique,
    ValidationError,
)
from rowstate.migrations import KEY_NOT_ASCII, check_rows, rename_state, retire_state
from rowstate.stores import PostgresStore
from support.engine import Backend, Clock, events_of, on, refused_before_io

V1 = Machine("doc", states=["DRAFT", "REVIEW", "DONE", "GONE"], initial="DRAFT",
             edges=[Edge("submit", "DRAFT", "REVIEW"),
                    Edge("check", "REVIEW", "REVIEW", lease="check"),
                    Edge("ok", "REVIEW", "DONE"), Edge("drop", "DRAFT", "GONE")])
V2 = Machine("doc", states=["DRAFT", "IN_REVIEW", "DONE"], initial="DRAFT",
             edges=[Edge("submit", "DRAFT", "IN_REVIEW"),
                    Edge("check", "IN_REVIEW", "IN_REVIEW", lease="check"),
                    Edge("ok", "IN_REVIEW", "DONE")],
             aliases={"REVIEW": "IN_REVIEW"})
# release 3: the alias dropped
V3 = Machine("doc", states=["DRAFT", "IN_REVIEW", "DONE"], initial="DRAFT",
             edges=[Edge("submit", "DRAFT", "IN_REVIEW"),
                    Edge("check", "IN_REVIEW", "IN_REVIEW", lease="check"),
                    Edge("ok", "IN_REVIEW", "DONE")])


def docs(machine: Machine, **kw: Any) -> Binding:
    return Binding(machine, table="docs", key=("id",), version="version",
                   lease=Lease(at="lease_at", kind="lease_kind", token="lease_token",
                               ttl=60), **kw)


def seeded(backend: Backend, clock: Clock | None = None) -> tuple[Any, Any]:
    """Release 1 wrote rows 0..9: 0-5 in REVIEW, 6-7 in GONE, 8-9 in DRAFT; release 2's
    lifecycle on the same table."""
    v1 = backend.make(docs(V1), clock=clock)
    for i in range(10):
        v1.create(f"d{i}")
    for i in range(6):
        assert v1.transition(f"d{i}", "REVIEW").applied
    for i in (6, 7):
        assert v1.transition(f"d{i}", "GONE").applied
    return v1, backend.make(docs(V2), clock=clock)


def per_state(backend: Backend) -> dict[str, int]:
    return {s: int(n) for s, n in backend.execute(
        "SELECT state, COUNT(*) FROM docs GROUP BY state")}


def test_rename_moves_every_row_with_an_event_each_read_back_by_history(
        backend: Backend) -> None:
    _, v2 = seeded(backend)
    before = len(events_of(backend, "doc"))
    got = rename_state(v2, "REVIEW", "IN_REVIEW", by="ops@example.org")
    assert got.applied and got.moved == 6 and got.refused == ()
    assert per_state(backend) == {"IN_REVIEW": 6, "GONE": 2, "DRAFT": 2}
    events = events_of(backend, "doc")[before:]
    assert len(events) == 6
    assert {(e[2], e[3], e[4]) for e in events} == {("rename", "REVIEW", "IN_REVIEW")}
    last = v2.history("d3")[-1]
    assert (last.edge, last.from_state, last.to_state) == ("rename", "REVIEW", "IN_REVIEW")
    assert last.version == 2 == v2.get("d3")["version"]  # created 0, submitted 1, renamed 2
    assert (last.by, last.note) == ("ops@example.org", "renamed from REVIEW to IN_REVIEW")
    assert last.data is None and last.owner is None
    assert v2.history("d8")[-1].edge is None  # untouched rows: no event
    # once more: nothing left to move, and nothing written
    again = rename_state(v2, "REVIEW", "IN_REVIEW", note="second pass")
    assert again.applied and again.moved == 0
    assert len(events_of(backend, "doc")) == before + 6


def test_a_live_lease_on_one_row_refuses_the_whole_rename_and_writes_nothing(
        backend: Backend) -> None:
    clock = Clock()
    v1, v2 = seeded(backend, clock)
    claim = v1.claim("d4", "check")  # release 1 still at work on one row
    assert claim.claimed
    rows, before = backend.rows(docs(V1)), len(events_of(backend, "doc"))
    got = rename_state(v2, "REVIEW", "IN_REVIEW")
    assert not got and got.reason == "LEASE_HELD"
    assert got.refused == ((("d4",), "LEASE_HELD"),) and got.blocked == 1 and got.moved == 0
    assert backend.rows(docs(V1)) == rows and len(events_of(backend, "doc")) == before
    # the act in flight finishes, under release 1's names, as if no rename had been tried
    assert v1.finalize("d4", claim).applied
    assert rename_state(v2, "REVIEW", "IN_REVIEW").moved == 6


def test_an_expired_lease_does_not_refuse_and_is_left_as_it_was(backend: Backend) -> None:
    clock = Clock()
    v1, v2 = seeded(backend, clock)
    assert v1.claim("d2", "check").claimed
    clock.advance(61)  # the lease's ttl is 60 s: its holder is presumed dead
    got = rename_state(v2, "REVIEW", "IN_REVIEW")
    assert got.applied and got.moved == 6
    row = v2.get("d2")
    assert row["state"] == "IN_REVIEW" and row["lease_kind"] == "check"  # not cleared
    # and release 2 can take the stale lease over, on the renamed row
    assert v2.claim("d2", "check").claimed


def test_retire_state_moves_a_dropped_states_rows_into_another(backend: Backend) -> None:
    _, v2 = seeded(backend)
    got = retire_state(v2, "GONE", into="DRAFT", note="GONE is no more")
    assert got.applied and got.moved == 2
    assert per_state(backend) == {"REVIEW": 6, "DRAFT": 4}
    last = v2.history("d6")[-1]
    assert (last.edge, last.from_state, last.to_state) == ("retire", "GONE", "DRAFT")
    assert (last.by, last.note) == (None, "GONE is no more")
    assert retire_state(v2, "GONE", into="DONE").moved == 0


@refused_before_io
def test_bad_names_and_values_are_refused_before_any_io(backend: Backend) -> None:
    _, v2 = seeded(backend)
    bad: list[tuple[Any, dict[str, Any]]] = [
        (("REVIEW", "NOWHERE"), {}),  # new is not a state
        (("DRAFT", "IN_REVIEW"), {}),  # old is still a state
        (("REVIEW", "DONE"), {}),  # REVIEW is an alias of IN_REVIEW, not of DONE
        (("", "DONE"), {}),
        ((None, "DONE"), {}),
        (("REVIEW", "IN_REVIEW"), {"by": 7}),
        (("REVIEW", "IN_REVIEW"), {"note": "nul\x00inside"}),
        (("REVIEW", "IN_REVIEW"), {"note": "x" * 100_000}),
        (("REVIEW", "IN_REVIEW"), {"by": ""}),
        (("REVIEW", "IN_REVIEW"), {"by": "two\nlines"}),
    ]
    with backend.no_io():
        for args, kw in bad:
            with pytest.raises(ValidationError):
                rename_state(v2, *args, **kw)
        with pytest.raises(ValidationError):
            retire_state(v2, "GONE", into="GONE")


def test_machine_aliases_are_checked_when_the_machine_is_built() -> None:
    edges = [Edge("go", "A", "B")]
    with pytest.raises(DefinitionError, match="is a state"):
        Machine("m", states=["A", "B"], initial="A", edges=edges, aliases={"A": "B"})
    with pytest.raises(DefinitionError, match="is not a state"):
        Machine("m", states=["A", "B"], initial="A", edges=edges, aliases={"OLD": "C"})
    assert Machine("m", states=["A", "B"], initial="A", edges=edges,
                   aliases={"OLD": "B"}).check_state("OLD") == "B"


def test_aliases_read_old_names_in_calls_and_in_rows(backend: Backend) -> None:
    """Release 2 runs before the rename: code naming REVIEW, and rows holding it, read as
    IN_REVIEW everywhere (the SQL and the Python readers alike)."""
    clock = Clock()
    _, v2 = seeded(backend, clock)
    assert v2.state("d0") == "IN_REVIEW" and v2.state_of({"state": "REVIEW"}) == "IN_REVIEW"
    assert v2.count(state="REVIEW") == 6 == v2.count(state="IN_REVIEW")
    assert [r["id"] for r in v2.find(state="REVIEW", limit=3)] == ["d0", "d1", "d2"]
    assert v2.count(where={"state": "REVIEW"}) == 6
    moved = v2.transition("d0", "DONE", from_="REVIEW")  # a row still holding REVIEW
    assert moved.applied and moved.previous == "IN_REVIEW"
    assert moved.event.from_state == "IN_REVIEW"
    assert v2.transition("d8", "REVIEW").state == "IN_REVIEW"  # written under the new name
    assert v2.get("d8")["state"] == "IN_REVIEW"
    assert v2.can_transition("d1", "DONE", from_="REVIEW").allowed
    assert v2.transition("d1", "DONE", guards={"state": "REVIEW"}).applied
    bulk = v2.transition_many("DONE", keys=["d2", "d3"], from_="REVIEW")
    assert len(bulk.applied) == 2 and {e.from_state for e in bulk.events} == {"IN_REVIEW"}
    assert v2.do(v2.core.hold("d4", "REVIEW")).held
    assert v2.claim("d5", "check").claimed  # a leased edge of the new name, an old row
    assert v2.create("d10", state="DRAFT").applied


def test_check_rows_counts_the_states_the_machine_no_longer_has(backend: Backend) -> None:
    _, v2 = seeded(backend)
    stale = check_rows(v2)
    assert stale.counts == {"GONE": 2, "REVIEW": 6} and stale.total == 8
    assert stale.aliased == {"REVIEW": "IN_REVIEW"} and not stale.clean
    backend.execute("UPDATE docs SET state = NULL WHERE id = 'd9'")
    assert check_rows(v2).counts == {"GONE": 2, "REVIEW": 6, None: 1}
    backend.execute("UPDATE docs SET state = 'DRAFT' WHERE id = 'd9'")
    rename_state(v2, "REVIEW", "IN_REVIEW")
    retire_state(v2, "GONE", into="DRAFT")
    assert check_rows(v2).clean
    assert check_rows(backend.make(docs(V3))).clean  # so release 3 may drop the alias


def test_check_rows_reads_a_derived_state_while_the_state_column_is_null(
        backend: Backend) -> None:
    binding = docs(V2, derived=rowstate.Derived("legacy", {"new": "DRAFT"}))
    v2 = backend.make(binding)
    backend.seed(binding, id="a", legacy="new")  # derived: DRAFT, a state
    backend.seed(binding, id="b", legacy="archived")  # derived: nothing
    backend.seed(binding, id="c", state="REVIEW", legacy="new")
    assert check_rows(v2).counts == {"REVIEW": 1, None: 1}


def test_check_schema_returns_and_logs_the_stale_states(
        backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    _, v2 = seeded(backend)
    with caplog.at_level(logging.WARNING, logger="rowstate"):
        stale = v2.check_schema()
    assert stale.counts == {"GONE": 2, "REVIEW": 6}
    assert "6 row(s) in 'REVIEW' (an alias: read as 'IN_REVIEW'" in caplog.text
    assert "2 row(s) in 'GONE'" in caplog.text
    rename_state(v2, "REVIEW", "IN_REVIEW")
    retire_state(v2, "GONE", into="DONE")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rowstate"):
        assert v2.check_schema().clean
    assert caplog.text == ""


def test_a_unique_target_broken_by_the_rename_refuses_it_whole(backend: Backend) -> None:
    seeded(backend)
    unique = backend.make(docs(V2, invariants=(Unique("DONE"),)))
    assert unique.schema_sql().count("UNIQUE INDEX") == 1  # make() created it
    got = retire_state(unique, "GONE", into="DONE")  # two rows into a one-row state
    assert not got and got.reason == "INVARIANT"
    assert per_state(backend)["GONE"] == 2


def test_a_key_sql_cannot_spell_like_history_refuses_the_rename(backend: Backend) -> None:
    _, v2 = seeded(backend)
    backend.execute("UPDATE docs SET id = 'd\u00e9' WHERE id = 'd5'")
    got = rename_state(v2, "REVIEW", "IN_REVIEW")
    assert not got and got.reason == KEY_NOT_ASCII
    assert got.refused == ((("d\u00e9",), KEY_NOT_ASCII),)
    assert per_state(backend)["REVIEW"] == 6


@on("sqlite-sync")
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(states=st.lists(st.sampled_from(["DRAFT", "REVIEW", "DONE", "GONE"]), max_size=40))
def test_a_rename_keeps_every_count_but_the_old_names(backend: Backend,
                                                     states: list[str]) -> None:
    """Random rows in random states: the rename moves exactly the old name's rows, one
    event each, and every other state keeps its count."""
    store = rowstate.connect("sqlite://")
    try:
        v1, v2 = Lifecycle(store, docs(V1)), Lifecycle(store, docs(V2))
        v1.create_schema()
        path = {"REVIEW": ["REVIEW"], "DONE": ["REVIEW", "DONE"], "GONE": ["GONE"],
                "DRAFT": []}
        for i, state in enumerate(states):
            v1.create(str(i))
            for step in path[state]:
                assert v1.transition(i, step).applied
        want = {s: states.count(s) for s in set(states)}
        got = rename_state(v2, "REVIEW", "IN_REVIEW")
        assert got.moved == want.pop("REVIEW", 0)
        if got.moved:
            want["IN_REVIEW"] = got.moved
        have = {s: v2.do(v2.core.count(state=s)) for s in ("DRAFT", "IN_REVIEW", "DONE")}
        assert {s: n for s, n in have.items() if n} == {s: n for s, n in want.items()
                                                        if s != "GONE"}
        assert check_rows(v2).counts == ({"GONE": want["GONE"]} if "GONE" in want else {})
        renamed = [e for i in range(len(states)) for e in v2.history(i)
                   if e.edge == "rename"]
        assert len(renamed) == got.moved
    finally:
        store.close()


@pytest.mark.postgres
def test_leases_claimed_while_renaming_are_never_overrun(engine_pg_schema: str) -> None:
    """Threads of release 1 claim, hold and finalize leases on REVIEW rows while release 2
    renames REVIEW: every rename is all or nothing, and every lease a claimer got is
    finalized under release 1's names (a rename that overran a live lease would have moved
    its row out of REVIEW, and its finalize would be refused)."""
    store = PostgresStore(engine_pg_schema, min_size=1, max_size=8)
    try:
        v1, v2 = Lifecycle(store, docs(V1)), Lifecycle(store, docs(V2))
        v1.create_schema()
        n = 40
        for i in range(n):
            v1.create(str(i))
            v1.transition(i, "REVIEW")
        stop, failures, finalized = threading.Event(), [], []

        def claimer(offset: int) -> None:
            i = offset
            while not stop.is_set():
                key = i % n
                i += 3
                claim = v1.claim(key, "check")
                if not claim.claimed:
                    if claim.reason == "STATE_MISMATCH":
                        time.sleep(0.01)  # renamed: release 1 has no more work here
                    continue
                time.sleep(random.uniform(0.001, 0.006))
                done = v1.finalize(key, claim)
                (finalized if done.applied else failures).append((key, done.reason))
                time.sleep(random.uniform(0, 0.004))

        held = v1.claim(n - 1, "check")  # one refusal for certain, then the race
        assert not rename_state(v2, "REVIEW", "IN_REVIEW")
        assert v1.finalize(n - 1, held).applied
        threads = [threading.Thread(target=claimer, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        attempts, refused = 0, 0
        try:
            while not finalized:
                time.sleep(0.005)
            while attempts < 500:
                attempts += 1
                got = rename_state(v2, "REVIEW", "IN_REVIEW")
                left = v2.do(v2.core.count(state="DRAFT"))  # a read in between: no rows
                assert left == 0
                in_old = int(store.run(rowstate.ext.Batch((
                    ("SELECT COUNT(*) FROM docs WHERE state = 'REVIEW'", ()),)))[0][0][0])
                if got.applied:
                    assert got.moved == n and in_old == 0
                    break
                refused += 1
                assert got.reason == "LEASE_HELD" and got.refused and in_old == n
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
        assert got.applied, "the rename never found a moment without a live lease"
        assert finalized and failures == []
        assert len(v2.history(0)) >= 3
    finally:
        store.close()


def test_the_renames_statement_shape_once_per_dialect() -> None:
    """PostgreSQL: one statement, the old name's rows locked before they are judged;
    SQLite: one transaction whose writes are each conditioned on no refusing row."""
    from rowstate.dialects import Postgres, SQLite
    from rowstate.migrations.renames import Renames

    (pg,) = Renames(docs(V2), Postgres())._statements()
    assert pg.sql.count("FOR UPDATE") == 1 and pg.sql.startswith("WITH cur AS (SELECT")
    assert "NOT EXISTS (SELECT 1 FROM blocked)" in pg.sql
    assert 'INSERT INTO "rowstate_events"' in pg.sql and "FROM upd" in pg.sql
    lite = Renames(docs(V2), SQLite())._statements()
    assert [s.sql.split()[0] for s in lite] == ["SELECT", "INSERT", "UPDATE", "SELECT"]
    assert all("NOT EXISTS" in s.sql for s in lite[1:3])


def test_a_machine_without_aliases_renders_its_state_checks_as_before() -> None:
    from rowstate.conditions import Const, In, SqlOut, render
    from rowstate.dialects import Postgres

    plain, aliased = docs(V3), docs(V2)
    assert plain.state_ref.aliases == ()
    check = In(plain.state_ref, (Const("IN_REVIEW"),))
    assert render(check, Postgres(), None, SqlOut()) == '"state" = %s'
    check = In(aliased.state_ref, (Const("IN_REVIEW"),))
    out = SqlOut()
    assert render(check, Postgres(), None, out) == '"state" IN (%s, %s)'
    assert [p.value for p in out.params] == ["IN_REVIEW", "REVIEW"]  # type: ignore[union-attr]


@pytest.mark.postgres
def test_a_rename_and_a_set_based_move_over_the_same_rows_never_deadlock(
        engine_pg_schema: str) -> None:
    """Both lock the rows in key order (the rename's ``cur``, transition_many's), so one
    waits for the other; PostgreSQL would otherwise cancel one of them as a deadlock (a
    store error instead of a verdict). Release 1 moves pages of REVIEW rows to DONE, in
    descending pages, while release 2 renames REVIEW."""
    store = PostgresStore(engine_pg_schema, min_size=1, max_size=8)
    try:
        v1, v2 = Lifecycle(store, docs(V1)), Lifecycle(store, docs(V2))
        v1.create_schema()
        for attempt in range(6):
            keys = [f"r{attempt}-{i:03d}" for i in range(150)]
            # created out of key order: a scan meets them in another order than the keys
            v1.do(_seed_in_review(v1, random.Random(attempt).sample(keys, len(keys))))
            errors: list[BaseException] = []
            barrier = threading.Barrier(3)

            def mover(part: list[str], barrier: threading.Barrier,
                      errors: list[BaseException]) -> None:
                try:
                    barrier.wait(timeout=10)
                    v1.transition_many("DONE", keys=part, from_="REVIEW")
                except BaseException as exc:  # a deadlock would surface here or below
                    errors.append(exc)

            threads = [threading.Thread(target=mover, args=(part, barrier, errors))
                       for part in (keys[::-1][:100], keys[50:])]
            for t in threads:
                t.start()
            barrier.wait(timeout=10)
            got = rename_state(v2, "REVIEW", "IN_REVIEW")
            for t in threads:
                t.join(timeout=30)
            assert errors == [] and got.applied
            left = {r[0] for r in store.run(rowstate.ext.Batch((
                ("SELECT state FROM docs WHERE id LIKE %s", (f"r{attempt}-%",)),)))[0]}
            assert left <= {"DONE", "IN_REVIEW"}
    finally:
        store.close()


def _seed_in_review(lc: Any, keys: list[str]) -> Any:
    """Rows created and moved to REVIEW, as release 1 would (one operation)."""
    for key in keys:
        yield from lc.core.create(key)
        yield from lc.core.transition(key, "REVIEW")
