"""Issue 17, the engine's set-based moves and their inputs, on every backend
({SQLite, PostgreSQL} x {sync, async}): one identity per row whichever path moved it
(#17.30), a business instant outside what both databases store refused alike (#17.32)."""

from __future__ import annotations

from typing import Any

import pytest

from support.engine import JOBS, Backend

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
