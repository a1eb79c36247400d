"""``rowstate stuck URL MODULE:BINDING``: the real command on a SQLite file and a real
PostgreSQL database (the ``url`` fixture), against rows made stale through the engine with a
clock an hour in the past (support/stuck_rows.py lists them). Exit 3 when it lists
anything; what operations lean on (the events rule, Django) is test_cli_stuck_ops.py."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from rowstate.cli import main
from support.stuck_rows import app_module, rowstate, seed, tables, write_app


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def app(tmp_path: Path) -> Any:
    return app_module(tmp_path)


def keys(group: dict[str, Any]) -> list[Any]:
    return [row["key"] for row in group["rows"]]


def test_each_kind_of_stuck_is_listed_with_its_age(url: str, app: Any) -> None:
    seed(url, app)
    before = tables(url, app)
    code, out, err = run("stuck", url, "cliapp:JOBS", "--json")
    assert (code, err) == (3, "")  # something is stuck
    doc = json.loads(out)
    groups = doc["groups"]
    assert list(groups) == ["expired_leases", "overdue_timers", "expired_claims",
                            "unrelayed_events"]
    # row 2's lease is an hour old (ttl 60 s); row 1's is live and is not listed
    assert keys(groups["expired_leases"]) == [[2]]
    lease = groups["expired_leases"]["rows"][0]
    assert lease["kind"] == "start" and lease["holder"] == "worker-dead"
    assert 3500 < lease["age_seconds"] < 3700 and lease["ttl"] == 60
    # row 3's timer is an hour overdue; row 1's is too, but its live lease holds it back:
    # fire_due would not fire it, so it is not stuck
    assert keys(groups["overdue_timers"]) == [[3]]
    assert groups["overdue_timers"]["rows"][0]["edge"] == "expire"
    assert 3500 < groups["overdue_timers"]["rows"][0]["age_seconds"] < 3700
    assert keys(groups["expired_claims"]) == [[4]]
    assert groups["expired_claims"]["rows"][0]["holder"] == "finalizer"
    # the events of rows 1-4 (made an hour ago), oldest first; row 5's is new
    events = groups["unrelayed_events"]
    assert events["count"] == 7 and {tuple(k) for k in keys(events)} == {(1,), (2,), (3,), (4,)}
    ids = [row["id"] for row in events["rows"]]
    assert ids == sorted(ids)
    assert doc["total"] == 1 + 1 + 1 + 7
    assert doc["machine"] == "cli_job" and doc["older_seconds"] == 60
    assert doc["undelivered_counted"] is True  # JOBS is relayed
    assert doc["now"].endswith("+00:00")
    assert tables(url, app) == before  # read-only: nothing written


def test_limit_lists_fewer_and_counts_all_older_moves_the_bar(url: str, app: Any) -> None:
    seed(url, app)
    code, out, _ = run("stuck", url, "cliapp:JOBS", "--json", "--limit", "2")
    events = json.loads(out)["groups"]["unrelayed_events"]
    assert code == 3 and events["count"] == 7 and len(events["rows"]) == 2
    code, out, _ = run("stuck", url, "cliapp:JOBS", "--json", "--older", "7200")
    assert json.loads(out)["groups"]["unrelayed_events"] == {"count": 0, "rows": []}
    code, out, _ = run("stuck", url, "cliapp:JOBS", "--json", "--older", "0")
    assert json.loads(out)["groups"]["unrelayed_events"]["count"] == 8  # row 5's too


def test_what_fire_due_fires_is_no_longer_stuck(url: str, app: Any) -> None:
    from rowstate import Lifecycle, connect

    seed(url, app)
    store = connect(url)
    try:
        fired = Lifecycle(store, app.JOBS).fire_due()
    finally:
        store.close()
    assert [f.key for f in fired.fired if f.applied] == [(3,)]
    _, out, _ = run("stuck", url, "cliapp:JOBS", "--json")
    assert json.loads(out)["groups"]["overdue_timers"] == {"count": 0, "rows": []}


def test_the_text_is_for_a_person(tmp_path: Path, app: Any) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    seed(url, app)
    code, out, _ = run("stuck", url, "cliapp:JOBS", "--limit", "3")
    assert code == 3
    assert out.startswith("cli_job in cli_jobs: 10 stuck\n  read at ")
    assert "\nExpired leases: 1\n" in out and "\nOverdue timers: 1\n" in out
    assert "\nExpired finalization claims: 1\n" in out and "\nUndelivered events: 7\n" in out
    assert "  ... and 4 more (--limit)\n" in out
    lease = next(line for line in out.splitlines() if line.startswith("  2 "))
    assert lease.split()[:4] == ["2", "start", "worker-dead", "1"]  # held for 1 h
    assert all(len(line) <= 80 for line in out.splitlines()), out


def test_nothing_stuck_says_so(tmp_path: Path, app: Any) -> None:
    from rowstate import Lifecycle, connect

    url = f"sqlite:///{tmp_path}/fresh.db"
    store = connect(url)
    Lifecycle(store, app.JOBS).create_schema()
    Lifecycle(store, app.JOBS).create(1)
    store.close()
    code, out, _ = run("stuck", url, "cliapp:JOBS")
    assert code == 0 and "cli_job in cli_jobs: nothing is stuck\n" in out
    assert "Expired leases: none" in out and "Undelivered events: none" in out


def test_a_binding_with_nothing_that_can_stick(url: str, app: Any) -> None:
    seed(url, app)
    code, out, _ = run("stuck", url, "cliapp:SEATS", "--json")
    assert code == 0 and json.loads(out)["groups"] == {} and json.loads(out)["total"] == 0
    code, out, _ = run("stuck", url, "cliapp:SEATS")
    assert out.startswith("cli_seat in cli_seats: nothing is stuck\n")


def test_the_console_script_and_python_m(url: str, tmp_path: Path, app: Any) -> None:
    seed(url, app)
    write_app(tmp_path)
    for module in (False, True):
        ran = rowstate("stuck", url, "cliapp:JOBS", "--json", cwd=tmp_path, module=module)
        assert ran.returncode == 3, ran.stderr
        assert json.loads(ran.stdout)["groups"]["expired_leases"]["count"] == 1


@pytest.mark.parametrize(("args", "says"), [
    (("mysql://x/y", "cliapp:JOBS"), "unsupported database URL 'mysql://x/y'"),
    (("postgresql+asyncpg://x/y", "cliapp:JOBS"), "'+asyncpg'"),
    (("sqlite:///{tmp}/absent.db", "cliapp:JOBS"), "no SQLite database at"),
    (("sqlite:///{tmp}/app.db", "cliapp"), "expected MODULE:ATTR, got 'cliapp'"),
    (("sqlite:///{tmp}/app.db", "no_such_module:JOBS"),
     "cannot import 'no_such_module': ModuleNotFoundError"),
    (("sqlite:///{tmp}/app.db", "cliapp:NOPE"), "cliapp has no 'NOPE'"),
    (("sqlite:///{tmp}/app.db", "cliapp:JOB"), "is a Machine; inspect and stuck need"),
    (("sqlite:///{tmp}/app.db", "cliapp:HOUR"), "cliapp:HOUR is a"),
])
def test_bad_input_is_exit_2_in_one_line(tmp_path: Path, app: Any, args: tuple[str, ...],
                                         says: str) -> None:
    (tmp_path / "cliapp.py").write_text((tmp_path / "cliapp.py").read_text()
                                        + "\nHOUR = 3600\n")
    url = f"sqlite:///{tmp_path}/app.db"
    seed(url, app)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    ran = rowstate("stuck", *argv, cwd=tmp_path)
    assert ran.returncode == 2, ran
    assert says in ran.stderr and ran.stdout == ""
    assert ran.stderr.startswith("rowstate stuck: ") and ran.stderr.count("\n") == 1
    assert not (tmp_path / "absent.db").exists()


def test_bad_options_are_argparse_usage(app: Any, tmp_path: Path) -> None:
    for bad in (["--limit", "0"], ["--limit", "x"], ["--older", "-1"]):
        ran = rowstate("stuck", "sqlite:///x.db", "cliapp:JOBS", *bad, cwd=tmp_path)
        assert ran.returncode == 2 and "usage: rowstate stuck" in ran.stderr


@pytest.mark.postgres
def test_a_database_that_fails_is_exit_1_in_one_line(tmp_path: Path, app: Any,
                                                     pg_dsn: str) -> None:
    write_app(tmp_path)
    # the database is there, the table is not
    ran = rowstate("stuck", pg_dsn, "cliapp:JOBS", cwd=tmp_path)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.startswith("rowstate stuck: database error (")
    assert "cli_jobs" in ran.stderr and ran.stderr.count("\n") == 1
    # no server at all
    ran = rowstate("stuck", "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2",
                   "cliapp:JOBS", cwd=tmp_path)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.startswith("rowstate stuck: database error (")


def test_a_sqlite_file_without_the_table_is_exit_1(tmp_path: Path, app: Any) -> None:
    write_app(tmp_path)
    (tmp_path / "empty.db").write_bytes(b"")
    ran = rowstate("stuck", f"sqlite:///{tmp_path}/empty.db", "cliapp:JOBS", cwd=tmp_path)
    assert ran.returncode == 1 and "no such table: cli_jobs" in ran.stderr
    assert "Traceback" not in ran.stderr and ran.stderr.count("\n") == 1
    # a binding with nothing that can stick reads its table too: a wrong database is never
    # "nothing is stuck"
    ran = rowstate("stuck", f"sqlite:///{tmp_path}/empty.db", "cliapp:SEATS", cwd=tmp_path)
    assert ran.returncode == 1 and "no such table: cli_seats" in ran.stderr
    assert ran.stdout == ""


SQLITE_ONLY = """
import io, sys
from rowstate.cli import main
code = main(["stuck", {url!r}, "cliapp:JOBS", "--json"], stdout=io.StringIO())
assert code == 3, code
print(",".join(sorted(m for m in ("psycopg", "psycopg_pool") if m in sys.modules)))
"""


def test_on_sqlite_the_command_loads_no_postgres_driver(tmp_path: Path, app: Any) -> None:
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path}/app.db"
    seed(url, app)
    ran = subprocess.run([sys.executable, "-c", SQLITE_ONLY.format(url=url)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout.strip() == ""


def test_it_reads_while_a_writer_holds_the_rows(url: str, tmp_path: Path, app: Any) -> None:
    """A stuck system is often a locked one: the read-only unit waits for no writer (SQLite
    WAL: a snapshot without the write lock; PostgreSQL: a plain read of locked rows)."""
    import sqlite3
    import time

    seed(url, app)
    write_app(tmp_path)
    if url.startswith("sqlite:"):
        holder: Any = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
    else:
        import psycopg

        holder = psycopg.connect(url)  # a transaction left open, as a hung worker's
    try:
        holder.execute("UPDATE cli_jobs SET label = 'mid-write' WHERE id = 2")
        started = time.monotonic()
        ran = rowstate("stuck", url, "cliapp:JOBS", "--json", cwd=tmp_path)
        assert ran.returncode == 3, ran.stderr
        assert time.monotonic() - started < 10  # not the 30 s busy timeout
        assert json.loads(ran.stdout)["groups"]["expired_leases"]["count"] == 1
        ran = rowstate("inspect", url, "cliapp:JOBS", "2", "--json", cwd=tmp_path)
        assert json.loads(ran.stdout)["row"]["label"] is None  # the committed row
    finally:
        holder.rollback()
        holder.close()
