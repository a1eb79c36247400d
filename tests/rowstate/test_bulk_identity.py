"""Issue 17, the engine's set-based moves and their inputs, on every backend
({SQLite, PostgreSQL} x {sync, async}): one identity per row whichever path moved it
(#17.30), a business instant outside what both databases store refused alike (#17.32), guard
and where= values checked against the column's declared type (#17.31), where= moving every
matching row in batches (#17.28)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from rowstate import ValidationError
from support.engine import JOBS, RUNS, Backend, refused_before_io

# keys whose JSON text differs between encoders: DEL (json.dumps escapes it, SQLite's
# json_array and PostgreSQL's json_build_array do not), other control characters, quotes,
# backslashes, non-ASCII (BMP and astral), and mixtures of them
ASCII_KEYS = ["del\x7f", "\x7f", "a\x7fb\x01c", "ctl\x01\x1f", "nl\nr\r", 'q"b\\', "plain"]
WIDE_KEYS = ["é\x7f", "ünï", "emoji\U0001f600"]


def _trail(jobs: Any, key: str) -> list[tuple[Any, ...]]:
    return [(e.key, e.edge, e.from_state, e.to_state) for e in jobs.history(key)]


@pytest.mark.parametrize("odd", [ASCII_KEYS, ASCII_KEYS + WIDE_KEYS], ids=["ascii", "mixed"])
def test_bulk_and_one_row_moves_file_their_events_under_one_row_key(
        backend: Backend, odd: list[str]) -> None:
    """history(key) sees every event of the row, whether transition or transition_many
    (keys= or where=) moved it; the stored row_key is one text per row."""
    jobs = backend.make(JOBS)
    for k in odd:
        jobs.create(k, priority=7)
    moved = jobs.transition_many("READY", keys=odd, from_="NEW")
    assert sorted(moved.applied) == sorted((k,) for k in odd) and moved.refused == ()
    assert sorted(e.key for e in moved.events) == sorted((k,) for k in odd)
    for k in odd:
        assert jobs.transition(k, "FAILED").applied  # one row: the lane
    back = jobs.transition_many("READY", where={"priority": 7}, from_=["FAILED", "NEW"])
    assert sorted(back.applied) == sorted((k,) for k in odd) and back.refused == ()
    for k in odd:
        assert _trail(jobs, k) == [((k,), None, None, "NEW"),
                                   ((k,), "prepare", "NEW", "READY"),
                                   ((k,), "cancel", "READY", "FAILED"),
                                   ((k,), "retry", "FAILED", "READY")], repr(k)
    per_key = backend.execute("SELECT row_key, COUNT(*) FROM rowstate_events "
                              "WHERE machine = 'job' GROUP BY row_key")
    assert sorted(n for _, n in per_key) == [4] * len(odd)  # one row_key per row


@pytest.mark.parametrize("now", [
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),  # year 0 in UTC
    datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14))),  # year 10000
], ids=["before-year-1", "after-year-9999"])
@refused_before_io
def test_fire_due_refuses_an_instant_outside_years_1_to_9999_in_utc(
        backend: Backend, now: datetime) -> None:
    """SQLite's canonical time overflowed (a bare OverflowError) where PostgreSQL took it:
    a ValidationError on both, before any statement (so one backend proves it)."""
    runs = backend.make(RUNS)
    runs.create("2026-01-05", autopilot=1, deadline_at=datetime(2026, 1, 7, tzinfo=UTC))
    with backend.no_io(), pytest.raises(ValidationError, match="years 1-9999 in UTC"):
        runs.fire_due(now=now)
    assert runs.state("2026-01-05") == "DRAFT"


# -- guard and where= values against the column's declared type (#17.31) -----------------

BAD_COMPARISONS = [
    ("transition", {"guards": {"autopilot": True}}, "autopilot", "INTEGER"),
    ("transition", {"guards": {"autopilot": "yes"}}, "autopilot", "INTEGER"),
    ("transition", {"guards": {"status": 1}}, "status", "TEXT"),
    ("transition_many", {"guards": {"autopilot": [0, True]}}, "autopilot", "INTEGER"),
    ("transition_many", {"where": {"status": 1}}, "status", "TEXT"),
    ("transition_many", {"where": {"autopilot": False}}, "autopilot", "INTEGER"),
    ("find", {"where": {"status": 1.5}}, "status", "TEXT"),
    ("count", {"where": {"autopilot": True}}, "autopilot", "INTEGER"),
    ("can_transition", {"guards": {"status": 0}}, "status", "TEXT"),
]


@refused_before_io
@pytest.mark.parametrize(("method", "kw", "field", "declared"), BAD_COMPARISONS,
                         ids=[f"{m}-{next(iter(k))}-{f}" for m, k, f, _ in BAD_COMPARISONS])
def test_a_guard_or_where_value_of_another_type_than_the_column_is_refused_before_any_io(
        backend: Backend, method: str, kw: dict[str, Any], field: str, declared: str) -> None:
    """SQLite's affinity matched True to 1 and 1 to '1' where PostgreSQL refused the
    comparison: a ValidationError naming the field and its type, on both, before any I/O
    (so one backend proves it)."""
    runs = backend.make(RUNS)
    runs.create("2026-01-05")
    call = {"transition": lambda: runs.transition("2026-01-05", "COLLECTING", **kw),
            "can_transition": lambda: runs.can_transition("2026-01-05", "COLLECTING", **kw),
            "transition_many": lambda: runs.transition_many(
                "COLLECTING", **({"keys": ["2026-01-05"]} if "where" not in kw else {}),
                from_="DRAFT", **kw),
            "find": lambda: runs.find(**kw), "count": lambda: runs.count(**kw)}[method]
    with backend.no_io(), pytest.raises(ValidationError, match=f"{field}.*{declared}"):
        call()
    assert runs.state("2026-01-05") == "DRAFT"


def test_guard_and_where_values_of_the_column_type_apply_alike(backend: Backend) -> None:
    runs = backend.make(RUNS)
    runs.create("2026-01-05", autopilot=1)
    runs.create("2026-01-12")
    assert runs.count(where={"status": "pending", "autopilot": [1, None]}) == 1
    assert runs.count(where={"autopilot": 1.0}) == 1  # a float compares alike
    assert not runs.transition("2026-01-12", "COLLECTING", guards={"autopilot": 1}).applied
    got = runs.transition_many("COLLECTING", where={"autopilot": 1}, from_="DRAFT")
    assert got.applied == (("2026-01-05",),)


# -- where= moves every matching row (#17.28) --------------------------------------------


def _seed_jobs(backend: Backend, n: int, state: str = "NEW") -> None:
    backend.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                    "WHERE i < ?) INSERT INTO jobs (id, state, priority, version) "
                    "SELECT 'k' || i, ?, 1, 0 FROM n", n, state)


@pytest.mark.parametrize(("rows", "limit"), [(10_050, 10_000), (257, 100)],
                         ids=["default-batch", "small-batch"])
def test_transition_many_where_moves_every_matching_row_in_batches(
        backend: Backend, rows: int, limit: int) -> None:
    """More matching rows than one write takes: each batch its own write, every row moved
    once with its one event; a row held by a lease is a refusal, not a silent leftover."""
    jobs = backend.make(JOBS)
    _seed_jobs(backend, rows, "READY")
    assert jobs.claim("k7", "start").claimed  # a live lease: k7 stays READY, held
    got = jobs.transition_many("FAILED", where={"priority": 1}, from_=["READY", "RUNNING"],
                               limit=limit)
    assert dict(got.refused) == {("k7",): "LEASE_HELD"}
    assert len(got.applied) == len(set(got.applied)) == rows - 1
    assert len(got.events) == rows - 1
    assert jobs.count(state="FAILED") == rows - 1
    moved = backend.execute("SELECT COUNT(*), COUNT(DISTINCT row_key) FROM rowstate_events "
                            "WHERE machine = 'job' AND edge = 'cancel'")
    assert moved == [(rows - 1, rows - 1)]  # one event per row moved
    with pytest.raises(ValidationError):
        jobs.transition_many("READY", where={"priority": 1}, limit=0)
