"""``rowstate stuck`` as operations run it (issue 27): from cron or a monitor, by its exit
code; on a binding whose events no relay reads; on a Django project. The real command
(``python -m rowstate``, a process of its own, the environment passed along) on a SQLite
file and a real PostgreSQL database (the ``url`` fixture)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rowstate import Lifecycle, Relay, connect
from support.stuck_rows import app_module, seed


def stuck(*args: str, cwd: Path, env: dict[str, str] | None = None,
          ) -> subprocess.CompletedProcess[str]:
    """``python -m rowstate stuck ARGS`` in ``cwd``."""
    return subprocess.run([sys.executable, "-m", "rowstate", "stuck", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False,
                          env=env)


@pytest.fixture
def app(tmp_path: Path) -> Any:
    return app_module(tmp_path)


def only_old_events(url: str, app: Any) -> None:
    """Rows 1 and 2 moved an hour ago through the engine, nothing else: no lease, no
    timer due, no claim. Their three events were never delivered."""
    past = datetime.now(UTC) - timedelta(hours=1)
    store = connect(url)
    try:
        then = Lifecycle(store, app.JOBS, clock=lambda: past)
        then.create_schema()
        Lifecycle(store, app.SEATS).create_schema()
        then.create(1)
        then.create(2)
        then.transition(2, "READY", by="ann")
    finally:
        store.close()


# -- the exit code -------------------------------------------------------------------


def test_the_exit_code_tells_a_monitor_what_it_found(url: str, tmp_path: Path,
                                                     app: Any) -> None:
    """0 nothing stuck, 3 something listed (the report printed alike), 2 bad usage, 1 the
    database failed: four codes a cron job or a check can tell apart."""
    only_old_events(url, app)
    calm = stuck(url, "cliapp:JOBS_UNRELAYED", cwd=tmp_path)
    assert (calm.returncode, calm.stderr) == (0, "")
    assert calm.stdout.startswith("cli_job in cli_jobs: nothing is stuck\n")

    seed_url = f"sqlite:///{tmp_path}/seeded.db"
    seed(seed_url, app)
    found = stuck(seed_url, "cliapp:JOBS_UNRELAYED", cwd=tmp_path)
    assert (found.returncode, found.stderr) == (3, "")
    assert found.stdout.startswith("cli_job in cli_jobs: 3 stuck\n")
    as_json = stuck(seed_url, "cliapp:JOBS_UNRELAYED", "--json", cwd=tmp_path)
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["total"] == 3

    usage = stuck(url, "cliapp:JOBS", "--limit", "0", cwd=tmp_path)
    assert usage.returncode == 2 and usage.stdout == ""
    bad_input = stuck(url, "cliapp:NOPE", cwd=tmp_path)
    assert bad_input.returncode == 2 and bad_input.stdout == ""

    (tmp_path / "empty.db").write_bytes(b"")
    failed = stuck(f"sqlite:///{tmp_path}/empty.db", "cliapp:JOBS", cwd=tmp_path)
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.startswith("rowstate stuck: database error (")


# -- undelivered events --------------------------------------------------------------


def test_events_no_relay_reads_are_history_not_stuck(url: str, tmp_path: Path,
                                                     app: Any) -> None:
    """The adopter's case: no relay runs, every event stays undelivered; the default
    binding (relayed=False) reports nothing stuck and says why the events are not
    counted."""
    only_old_events(url, app)
    ran = stuck(url, "cliapp:JOBS_UNRELAYED", "--json", cwd=tmp_path)
    doc = json.loads(ran.stdout)
    assert ran.returncode == 0 and doc["total"] == 0
    assert doc["undelivered_counted"] is False and "unrelayed_events" not in doc["groups"]
    assert list(doc["groups"]) == ["expired_leases", "overdue_timers", "expired_claims"]

    text = stuck(url, "cliapp:JOBS_UNRELAYED", cwd=tmp_path).stdout
    assert "\nUndelivered events: not counted\n" in text
    words = " ".join(text.split())
    assert "(Binding(relayed=True)): they are its history, not stuck. --undelivered " \
        "counts them." in words
    assert all(len(line) <= 80 for line in text.splitlines()), text


def test_undelivered_asks_for_them(url: str, tmp_path: Path, app: Any) -> None:
    only_old_events(url, app)
    ran = stuck(url, "cliapp:JOBS_UNRELAYED", "--undelivered", "--json", cwd=tmp_path)
    doc = json.loads(ran.stdout)
    assert ran.returncode == 3 and doc["undelivered_counted"] is True
    events = doc["groups"]["unrelayed_events"]
    assert events["count"] == 3 and [r["key"] for r in events["rows"]] == [[1], [2], [2]]
    assert [r["to_state"] for r in events["rows"]] == ["NEW", "NEW", "READY"]
    text = stuck(url, "cliapp:JOBS_UNRELAYED", "--undelivered", cwd=tmp_path).stdout
    assert text.startswith("cli_job in cli_jobs: 3 stuck\n")
    assert "\nUndelivered events: 3\n" in text and "not counted" not in text


def test_a_relayed_binding_counts_them_until_the_relay_delivers(url: str, tmp_path: Path,
                                                                app: Any) -> None:
    """``Binding(relayed=True)``: undelivered events are stuck unasked; ``--no-undelivered``
    leaves them out; once a relay has delivered them, nothing is stuck."""
    only_old_events(url, app)
    ran = stuck(url, "cliapp:JOBS", "--json", cwd=tmp_path)
    assert ran.returncode == 3
    assert json.loads(ran.stdout)["groups"]["unrelayed_events"]["count"] == 3

    left_out = stuck(url, "cliapp:JOBS", "--no-undelivered", cwd=tmp_path)
    assert left_out.returncode == 0
    assert "Undelivered events: not counted\n  left out of this report (--no-undelivered)." \
        in left_out.stdout

    delivered: list[Any] = []
    store = connect(url)
    try:
        assert Relay(store, [delivered.append]).drain() == 3
    finally:
        store.close()
    ran = stuck(url, "cliapp:JOBS", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout
    assert json.loads(ran.stdout)["groups"]["unrelayed_events"] == {"count": 0, "rows": []}


def test_undelivered_on_a_binding_without_events_is_bad_usage(url: str, tmp_path: Path,
                                                              app: Any) -> None:
    only_old_events(url, app)
    ran = stuck(url, "cliapp:SEATS", "--undelivered", cwd=tmp_path)
    assert ran.returncode == 2 and ran.stdout == ""
    assert ran.stderr == ("rowstate stuck: cliapp:SEATS has no events table (events=None), "
                          "so no event of it is ever undelivered: leave out --undelivered\n")
    # without the option: its report, with no word about events
    ran = stuck(url, "cliapp:SEATS", cwd=tmp_path)
    assert ran.returncode == 0 and "events" not in ran.stdout.lower()


def test_a_relayed_binding_needs_an_events_table() -> None:
    from rowstate import Binding, DefinitionError, Machine

    machine = Machine("m", states=["A"], initial="A", edges=[])
    with pytest.raises(DefinitionError, match="relayed=True needs an events table"):
        Binding(machine, table="t", key=("id",), events=None, relayed=True)
    with pytest.raises(DefinitionError, match="relayed is True or False"):
        Binding(machine, table="t", key=("id",), relayed="yes")  # type: ignore[arg-type]
