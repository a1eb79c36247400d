"""Issue 17, the engine's set-based moves and their inputs, on every backend
({SQLite, PostgreSQL} x {sync, async}): one identity per row whichever path moved it
(#17.30), a business instant outside what both databases store refused alike (#17.32)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from rowstate import ValidationError
from support.engine import JOBS, RUNS, Backend

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
def test_fire_due_refuses_an_instant_outside_years_1_to_9999_in_utc(
        backend: Backend, now: datetime) -> None:
    """SQLite's canonical time overflowed (a bare OverflowError) where PostgreSQL took it:
    a ValidationError on both, before any statement."""
    runs = backend.make(RUNS)
    runs.create("2026-01-05", autopilot=1, deadline_at=datetime(2026, 1, 7, tzinfo=UTC))
    statements = backend.statements
    with pytest.raises(ValidationError, match="years 1-9999 in UTC"):
        runs.fire_due(now=now)
    assert backend.statements == statements
    assert runs.state("2026-01-05") == "DRAFT"
