"""``rowstate inspect URL MODULE:BINDING KEY``: the real command on a SQLite file and a real
PostgreSQL database (the ``url`` fixture), against rows made through the engine with a clock
an hour in the past (support/stuck_rows.py lists them)."""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from rowstate.cli import main
from support.stuck_rows import app_module, rowstate, seed, tables, write_app


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def inspect(url: str, key: str, *more: str) -> dict[str, Any]:
    code, out, err = run("inspect", url, "cliapp:JOBS", key, "--json", *more)
    assert (code, err) == (0, "")
    doc: dict[str, Any] = json.loads(out)
    return doc


@pytest.fixture
def app(tmp_path: Path) -> Any:
    return app_module(tmp_path)


def edges(doc: dict[str, Any]) -> dict[str, tuple[bool, list[str]]]:
    return {e["edge"]: (e["allowed"], e["reasons"]) for e in doc["edges"]}


def test_a_live_lease_blocks_every_other_edge_and_holds_its_timer(url: str, app: Any) -> None:
    past = seed(url, app)
    before = tables(url, app)
    doc = inspect(url, "1")
    assert doc["key"] == [1] and doc["state"] == "READY" and doc["machine"] == "cli_job"
    lease = doc["lease"]
    assert lease["held"] and not lease["expired"] and lease["kind"] == "start"
    assert lease["holder"] == "worker-live" and lease["token"] == 1
    assert 0 <= lease["age_seconds"] < 60 and lease["ttl_seconds"] == 60
    # every reason an edge is blocked, as enabled_edges reports them
    assert edges(doc) == {"prepare": (False, ["STATE_MISMATCH", "LEASE_HELD"]),
                          "start": (False, ["LEASE_HELD"]),
                          "finish": (False, ["STATE_MISMATCH", "LEASE_HELD"]),
                          "expire": (False, ["LEASE_HELD"])}
    assert doc["edges"][1]["why"] == [
        "a live lease of a side-effecting edge blocks every other edge"]
    # the timer is an hour overdue, but fire_due's query skips a row under a live lease
    (timer,) = doc["timers"]
    assert timer["edge"] == "expire" and timer["overdue"] and not timer["fires_now"]
    assert timer["blocked"] == ["LEASE_HELD"]
    assert datetime.fromisoformat(timer["due"]) == past
    assert doc["row"]["expires_at"] == timer["due"]  # times read alike on both databases
    assert doc["finalization"] == {"held": False, "holder": None, "scope": None,
                                   "token": None, "at": None, "age_seconds": None,
                                   "ttl_seconds": 120.0, "expired": False}
    assert [(e["edge"], e["from"], e["to"]) for e in doc["events"]] == [
        (None, None, "NEW"), ("prepare", "NEW", "READY")]
    assert doc["events_total"] == 2
    assert [(e["by"], e["note"]) for e in doc["events"]] == [(None, None),
                                                              ("ann", "ready to run")]
    assert tables(url, app) == before  # read-only: nothing written


def test_an_expired_lease_lets_every_edge_through(url: str, app: Any) -> None:
    seed(url, app)
    doc = inspect(url, "2")
    lease = doc["lease"]
    assert lease["held"] and lease["expired"] and lease["holder"] == "worker-dead"
    assert 3500 < lease["age_seconds"] < 3700
    # the stale lease blocks nothing: its own kind may reclaim it, any edge may move
    assert edges(doc)["start"] == (True, []) and edges(doc)["expire"] == (True, [])
    (timer,) = doc["timers"]
    assert not timer["overdue"] and timer["blocked"] == ["NOT_DUE"]  # no due time


def test_an_overdue_timer_and_a_stale_claim(url: str, app: Any) -> None:
    seed(url, app)
    (timer,) = inspect(url, "3")["timers"]
    assert timer["overdue"] and timer["fires_now"] and timer["blocked"] == []
    claim = inspect(url, "4")["finalization"]
    assert claim["held"] and claim["expired"] and claim["holder"] == "finalizer"
    assert claim["scope"] == "purge" and 3500 < claim["age_seconds"] < 3700
    fresh = inspect(url, "5")
    assert fresh["lease"]["held"] is False and fresh["row"]["label"] == "fresh"


def test_events_shows_the_last_n(url: str, app: Any) -> None:
    seed(url, app)
    doc = inspect(url, "1", "--events", "1")
    assert [e["to"] for e in doc["events"]] == ["READY"] and doc["events_total"] == 2
    assert inspect(url, "1", "--events", "0")["events"] == []
    # asking for more than there are shows every one (not the last len - n)
    assert [e["to"] for e in inspect(url, "1", "--events", "3")["events"]] == ["NEW", "READY"]


def test_a_composite_key_is_a_json_array(url: str, app: Any) -> None:
    seed(url, app)
    code, out, err = run("inspect", url, "cliapp:SEATS", '["v1", 3]', "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["key"] == ["v1", 3] and doc["state"] == "HELD"
    assert doc["lease"] is None and doc["finalization"] is None and doc["timers"] == []
    assert doc["events"] is None and doc["events_total"] is None  # no events table
    code, out, _ = run("inspect", url, "cliapp:SEATS", '["v1", 3]')
    assert code == 0 and "\nEvents: the binding has no events table\n" in out
    # "3" for the INTEGER column is read by its type, as a one-column key is
    code, out, _ = run("inspect", url, "cliapp:SEATS", '["v1", "3"]', "--json")
    assert code == 0 and json.loads(out)["key"] == ["v1", 3]


@pytest.mark.parametrize(("target", "key", "says"), [
    ("cliapp:JOBS", "abc", "key column 'id' holds 64-bit integers, got 'abc'"),
    ("cliapp:JOBS", "99", "no row with key 99 in cli_jobs (machine cli_job)"),
    ("cliapp:SEATS", "v1", "cli_seats has a key of 2 columns (venue, seat): give it as a "
                           "JSON array, e.g. '[\"text\", 1]', got 'v1'"),
    ("cliapp:SEATS", '["v1"]', "a key of 2 columns"),
    ("cliapp:SEATS", '["v1", 3.5]', "key values are strings or integers"),
    ("cliapp:SEATS", '["v2", 3]', 'no row with key ["v2", 3] in cli_seats'),
])
def test_a_bad_or_missing_key_is_exit_2_in_one_line(tmp_path: Path, app: Any, target: str,
                                                    key: str, says: str) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    seed(url, app)
    code, out, err = run("inspect", url, target, key)
    assert (code, out) == (2, "")
    assert err.startswith("rowstate inspect: ") and says in err and err.count("\n") == 1


def test_the_text_is_for_a_person(tmp_path: Path, app: Any) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    seed(url, app)
    code, out, _ = run("inspect", url, "cliapp:JOBS", "2")
    assert code == 0
    assert out.startswith("cli_job 2 in cli_jobs: READY\n  read at ")
    assert "(the database's clock)" in out
    for section in ("\nRow\n", "\nLease\n", "\nFinalization claim\n",
                    "\nEdges (allowed now?)\n", "\nTimers\n", "\nEvents (2, oldest first)\n"):
        assert section in out
    assert "  status  EXPIRED \u2014 held 1 h, past its ttl of 1 min" in out
    assert "  holder  worker-dead\n" in out
    assert "  lease_at      " in out and " (1 h ago)\n" in out
    assert "no: STATE_MISMATCH" in out
    assert "  STATE_MISMATCH \u2014 the row is not in a from-state of this edge\n" in out
    assert "not due: NOT_DUE" in out
    assert "  prepare    NEW -> READY  ann  ready to run\n" in out  # who and why
    assert all(len(line) <= 80 for line in out.splitlines()), out
    code, out, _ = run("inspect", url, "cliapp:JOBS", "1")
    assert "  status  live \u2014 held " in out and "no: LEASE_HELD" in out
    assert "overdue, held back: LEASE_HELD" in out


def test_the_console_script_and_python_m(url: str, tmp_path: Path, app: Any) -> None:
    seed(url, app)
    write_app(tmp_path)
    for module in (False, True):
        ran = rowstate("inspect", url, "cliapp:JOBS", "2", "--json", cwd=tmp_path,
                       module=module)
        assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout)["lease"]["expired"] is True
    ran = rowstate("inspect", url, "cliapp:JOBS", "77", cwd=tmp_path)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert ran.stderr == "rowstate inspect: no row with key 77 in cli_jobs (machine cli_job)\n"
    ran = rowstate("inspect", "sqlite:///nowhere/x.db", "cliapp:JOBS", "1", cwd=tmp_path)
    assert ran.returncode == 2 and "no SQLite database at 'nowhere/x.db'" in ran.stderr
