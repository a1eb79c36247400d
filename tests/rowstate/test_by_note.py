"""Who moved a row and why: ``by=`` and ``note=`` on every operation that writes an event,
stored in the event row (columns ``actor`` and ``note``), returned on the result's event, by
``history()`` and by the relay; checked like every other value before any I/O; and an
events table made at the first layout migrated to carry them."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rowstate import (
    AsyncLifecycle,
    Binding,
    Edge,
    Lifecycle,
    Machine,
    SchemaMismatch,
    ValidationError,
)
from rowstate.outbox import EVENT_LAYOUT, EVENTS_LAYOUT_VERSION
from rowstate.stores import SQLiteStore
from rowstate.values import MAX_BY, MAX_NOTE
from support.engine import JOBS, TICKETS, Backend, Clock, on, refused_before_io


def said(events: list[Any]) -> list[tuple[str | None, str | None]]:
    return [(e.by, e.note) for e in events]


def stored(backend: Backend, machine: str) -> list[tuple[Any, ...]]:
    """The raw ``actor, note`` of a machine's event rows, in id order."""
    return backend.execute("SELECT actor, note FROM rowstate_events WHERE machine = ? "
                           "ORDER BY id", machine)


def test_a_transition_says_who_and_why_in_its_event_and_history(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    moved = jobs.transition("j1", "READY", by="ann", note="customer asked\nby phone")
    assert moved.applied
    assert (moved.event.by, moved.event.note) == ("ann", "customer asked\nby phone")
    plain = jobs.transition("j1", "FAILED")  # the lane: nobody said
    assert plain.applied and (plain.event.by, plain.event.note) == (None, None)
    again = jobs.transition("j1", "READY", by="bob")
    assert said(jobs.history("j1")) == [("ann", "customer asked\nby phone"), (None, None),
                                        ("bob", None)]
    assert stored(backend, "job") == [("ann", "customer asked\nby phone"), (None, None),
                                      ("bob", None)]
    assert again.event.id == jobs.history("j1")[-1].id


def test_a_refused_move_with_by_writes_nothing(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    refused = jobs.transition("j1", "DONE", from_="RUNNING", by="ann", note="too soon")
    assert not refused.applied and refused.reason == "STATE_MISMATCH"
    assert jobs.history("j1") == [] and stored(backend, "job") == []


def test_create_and_ensure_say_who_made_the_row(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    born = jobs.create("j1", by="importer", note="from the March file", priority=3)
    assert born.applied and (born.event.by, born.event.note) == ("importer",
                                                                 "from the March file")
    jobs.ensure("j2", by="importer")
    jobs.ensure("j2", by="someone else")  # exists: no second birth
    assert said(jobs.history("j1")) == [("importer", "from the March file")]
    assert said(jobs.history("j2")) == [("importer", None)]


def test_a_run_and_a_claim_carry_who_to_the_finalize(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    for key in ("j1", "j2", "j3"):
        backend.seed(JOBS, id=key, state="READY")
    ran = jobs.run("j1", "start", lambda lease: "ok", by="worker-7", note="nightly batch")
    assert ran.applied and (ran.event.by, ran.event.note) == ("worker-7", "nightly batch")

    claim = jobs.claim("j2", "start", by="cron", note="scheduled")
    assert claim.claimed and (claim.by, claim.note) == ("cron", "scheduled")
    done = jobs.finalize("j2", claim)
    assert (done.event.by, done.event.note) == ("cron", "scheduled")

    handed = jobs.claim("j3", "start", by="cron")
    taken = jobs.finalize("j3", handed, by="ops:kim", note="finished by hand")
    assert (taken.event.by, taken.event.note) == ("ops:kim", "finished by hand")
    assert said(jobs.history("j1")) == [("worker-7", "nightly batch")]
    assert said(jobs.history("j2")) == [("cron", "scheduled")]
    assert said(jobs.history("j3")) == [("ops:kim", "finished by hand")]


def test_transition_many_says_who_on_every_row(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    for key in ("a", "b", "c"):
        backend.seed(JOBS, id=key, state="NEW")
    got = jobs.transition_many("READY", keys=["a", "b", "c"], by="admin", note="bulk open")
    assert len(got.applied) == 3
    assert said(list(got.events)) == [("admin", "bulk open")] * 3
    for key in ("a", "b", "c"):
        assert said(jobs.history(key)) == [("admin", "bulk open")]
    matched = jobs.transition_many("FAILED", where={"state": "READY"}, by="admin")
    assert len(matched.applied) == 3 and said(list(matched.events)) == [("admin", None)] * 3


def test_fire_due_says_who_fired_the_timers(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    past = clock.now - timedelta(minutes=1)
    backend.seed(TICKETS, id="t1", state="OPEN", expires_at=backend.adapt(past))
    backend.seed(TICKETS, id="t2", state="OPEN", escalate_at=backend.adapt(past))
    report = tickets.fire_due(acts={"escalate": lambda lease: None}, by="tick",
                              note="deadline passed")
    assert report.applied == 2
    assert said(tickets.history("t1")) == [("tick", "deadline passed")]
    assert said(tickets.history("t2")) == [("tick", "deadline passed")]


def test_the_relay_delivers_who_and_why(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    jobs.transition("j1", "READY", by="ann", note="go")
    delivered: list[Any] = []
    backend.relay([delivered.append]).drain()
    assert said(delivered) == [("ann", "go")]


BAD_BY: list[Any] = [3, b"ann", "", "   ", "a\nb", "tab\there", "nul\x00", "x" * (MAX_BY + 1),
                     "\ud800"]
BAD_NOTE: list[Any] = [3, ["why"], "bell\x07", "nul\x00", "x" * (MAX_NOTE + 1), "line\u2028sep",
                       "\ud800"]


@refused_before_io
@pytest.mark.parametrize("bad", BAD_BY, ids=repr)
def test_a_bad_by_is_refused_before_any_io(backend: Backend, bad: Any) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    rows = backend.rows(JOBS)
    with backend.no_io():
        for call in (lambda: jobs.transition("j1", "READY", by=bad),
                     lambda: jobs.create("j9", by=bad),
                     lambda: jobs.claim("j1", "start", by=bad),
                     lambda: jobs.run("j1", "start", lambda lease: None, by=bad),
                     lambda: jobs.transition_many("READY", keys=["j1"], by=bad)):
            with pytest.raises(ValidationError, match="by"):
                call()
    assert backend.rows(JOBS) == rows and stored(backend, "job") == []


@refused_before_io
@pytest.mark.parametrize("bad", BAD_NOTE, ids=repr)
def test_a_bad_note_is_refused_before_any_io(backend: Backend, bad: Any) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    with backend.no_io():
        with pytest.raises(ValidationError, match="note"):
            jobs.transition("j1", "READY", note=bad)
        with pytest.raises(ValidationError, match="note"):
            jobs.fire_due(note=bad)
    assert stored(backend, "job") == []


@on("sqlite-sync")
def test_a_blank_note_is_no_note(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    assert jobs.transition("j1", "READY", by="ann", note="  \n").event.note is None
    assert stored(backend, "job") == [("ann", None)]


# one line of printable text for by; a note may break lines and indent
_printable = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))
BYS = st.text(_printable, min_size=1, max_size=MAX_BY).filter(lambda s: s.strip() != "")
NOTES = st.text(st.one_of(_printable, st.sampled_from("\n\t")), min_size=1,
                max_size=300).filter(lambda s: s.strip() != "")


@on("sqlite-sync", "postgres-sync")
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(by=BYS, note=NOTES)
def test_any_valid_by_and_note_read_back_exactly(backend: Backend, by: str, note: str) -> None:
    """Both databases give back exactly the text the caller said (PostgreSQL and SQLite
    store it alike: the same value rules, docs/values.md)."""
    jobs = backend.make(JOBS)
    key = f"h{backend.count('jobs')}"
    backend.seed(JOBS, id=key, state="NEW")
    assert jobs.transition(key, "READY", by=by, note=note).applied
    assert said(jobs.history(key)) == [(by, note)]


# -- an events table made at the first layout ---------------------------------------------

LAYOUT_1 = [(name, kind) for name, kind in EVENT_LAYOUT if name not in ("actor", "note")]
TINY = Machine("tiny", states=["A", "B"], initial="A", edges=[Edge("go", "A", "B")])
TINIES = Binding(TINY, table="tinies", key=("id",), version="version")


def _layout_1_table(backend: Backend) -> None:
    d = backend.dialect
    cols = ", ".join(f"{n} {k.format(serial=d.serial_pk, json=d.json_type, time=d.time_type)}"
                     for n, k in LAYOUT_1)
    backend.execute(f"CREATE TABLE rowstate_events ({cols})")
    for stmt in TINIES.schema_sql(d).split(";\n"):
        table_of_events = "rowstate_events" in stmt and "INDEX" not in stmt
        if stmt.strip() and not table_of_events:  # its indexes are the first layout's too
            backend.execute(stmt)


def test_an_events_table_of_the_first_layout_is_named_and_then_migrated(
        backend: Backend) -> None:
    assert EVENTS_LAYOUT_VERSION == 2
    _layout_1_table(backend)
    backend.execute("INSERT INTO tinies (id, state, version) VALUES ('t1', 'A', 0)")
    lc = backend.blocking((AsyncLifecycle if backend.is_async else Lifecycle)(backend.store,
                                                                              TINIES))
    with pytest.raises(SchemaMismatch) as missing:
        lc.check_schema()
    assert {p.split(":")[0] for p in missing.value.problems} == {
        "rowstate_events.actor", "rowstate_events.note"}
    existing = ("id", "state", "version", "rowstate_events")
    for stmt in TINIES.migration_sql(backend.dialect, existing=existing):
        if "rowstate_events" in stmt:  # the app's table is already whole
            backend.execute(stmt)
    lc.check_schema()
    assert lc.transition("t1", "B", by="migrated", note="after the upgrade").applied
    assert said(lc.history("t1")) == [("migrated", "after the upgrade")]


@on("postgres-sync")
def test_postgres_quick_start_script_upgrades_an_old_events_table(backend: Backend) -> None:
    """On PostgreSQL the one script serves a new and an old table alike."""
    _layout_1_table(backend)
    lc = backend.make(TINIES)  # runs schema_sql: CREATE ... IF NOT EXISTS, ADD COLUMN IF ...
    lc.check_schema()
    backend.execute("INSERT INTO tinies (id, state, version) VALUES ('t1', 'A', 0)")
    assert lc.transition("t1", "B", by="ann").event.by == "ann"


def test_sqlite_migration_without_naming_the_events_table_creates_it_whole(
        tmp_path: Any) -> None:
    stmts = TINIES.migration_sql("sqlite", existing=("id", "state", "version"))
    conn = sqlite3.connect(tmp_path / "new.db")
    conn.execute("CREATE TABLE tinies (id TEXT PRIMARY KEY, state TEXT, version BIGINT)")
    for stmt in stmts:
        conn.execute(stmt)
    conn.commit()
    conn.close()
    store = SQLiteStore(str(tmp_path / "new.db"))
    try:
        Lifecycle(store, TINIES).check_schema()
    finally:
        store.close()


def test_no_event_table_no_columns_asked(tmp_path: Any) -> None:
    quiet = dataclasses.replace(TINIES, events=None)
    store = SQLiteStore(str(tmp_path / "q.db"))
    try:
        lc = Lifecycle(store, quiet)
        lc.create_schema()
        lc.create("t1")
        got = lc.transition("t1", "B", by="ann", note="in process")
        assert (got.event.by, got.event.note) == ("ann", "in process")
    finally:
        store.close()


@on("postgres-sync", "sqlite-sync")
def test_racing_movers_the_history_names_the_one_that_won(backend: Backend) -> None:
    """Eight threads move one row, each naming itself: one applies, and the one event says
    that one, never another racer's name (the by is written by the winning statement)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    barrier = threading.Barrier(8)

    def move(i: int) -> Any:
        barrier.wait(timeout=30)
        return jobs.transition("j1", "READY", by=f"worker-{i}", note=f"try {i}")

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(move, range(8)))
    won = [i for i, r in enumerate(results) if r.applied]
    assert len(won) == 1
    assert said(jobs.history("j1")) == [(f"worker-{won[0]}", f"try {won[0]}")]
    assert {r.reason for r in results if not r.applied} == {"STATE_MISMATCH"}


NOTED = Binding(TINY, table="noted", key=("id",), columns=("note", "by"),
                events="rowstate_events")


@on("sqlite-sync", "postgres-async")
def test_a_column_named_note_is_never_mistaken_for_the_events_note(backend: Backend) -> None:
    """A binding with columns ``note`` and ``by``: the keywords would be read as the birth
    event's while the caller meant the columns, so they are refused (nothing written)
    unless the columns come as ``columns=``, where each means one thing."""
    from rowstate import UsageError

    lc = backend.make(NOTED)
    for call in (lambda: lc.create("n1", note="the column?"),
                 lambda: lc.ensure("n1", by="the column?")):
        with pytest.raises(UsageError, match="columns="):
            call()
    assert lc.get("n1") is None
    made = lc.create("n1", columns={"note": "a row's own note", "by": "a row's own by"},
                     by="ann", note="why it was made")
    assert made.applied
    row = lc.get("n1")
    assert (row["note"], row["by"]) == ("a row's own note", "a row's own by")
    assert said(lc.history("n1")) == [("ann", "why it was made")]
    with pytest.raises(UsageError, match="twice"):
        lc.create("n2", columns={"flag": 1}, flag=2)
    assert lc.get("n2") is None
