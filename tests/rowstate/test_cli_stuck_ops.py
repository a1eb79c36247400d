"""``rowstate stuck`` as operations run it (issue 27): from cron or a monitor, by its exit
code; on a binding whose events no relay reads; on a Django project. The real command
(``python -m rowstate``, a process of its own, the environment passed along) on a SQLite
file and a real PostgreSQL database (the ``url`` fixture)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from rowstate import Lifecycle, Relay, connect
from support import django_project
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


def test_times_are_local_with_their_zone(tmp_path: Path, app: Any) -> None:
    """A person reads the text: local time to the second, the zone named (TZ here); a
    script reads the JSON: ISO 8601 UTC whatever the zone."""
    url = f"sqlite:///{tmp_path}/app.db"
    past = seed(url, app)
    env = dict(os.environ, TZ="Europe/Amsterdam")
    text = stuck(url, "cliapp:JOBS", cwd=tmp_path, env=env).stdout
    assert re.search(r"^  read at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d CES?T \(the "
                     r"database's clock\)$", text, flags=re.M), text
    local = past.astimezone(ZoneInfo("Europe/Amsterdam"))
    lease = next(line for line in text.splitlines() if line.startswith("  2 "))
    assert lease.endswith(f"  {local:%Y-%m-%d %H:%M:%S} {local.tzname()}"), lease
    doc = json.loads(stuck(url, "cliapp:JOBS", "--json", cwd=tmp_path, env=env).stdout)
    assert doc["now"].endswith("+00:00")
    assert doc["groups"]["expired_leases"]["rows"][0]["at"] == past.isoformat()
    utc = stuck(url, "cliapp:JOBS", cwd=tmp_path, env=dict(os.environ, TZ="UTC")).stdout
    assert f"  {past:%Y-%m-%d %H:%M:%S} UTC\n" in utc


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


# -- a Django project --------------------------------------------------------------------


def rowstate_in(project: Path, *args: str, settings: str | None = "shopsite.settings",
                ) -> subprocess.CompletedProcess[str]:
    """``python -m rowstate ARGS`` in the project's folder, ``DJANGO_SETTINGS_MODULE`` set
    to ``settings`` (None: not set)."""
    return subprocess.run([sys.executable, "-m", "rowstate", *args], cwd=project,
                          capture_output=True, text=True, timeout=60, check=False,
                          env=django_project.environment(settings))


@pytest.fixture
def shop(url: str, tmp_path: Path) -> tuple[Path, str]:
    """A Django project on the ``url`` database, seeded (support/django_project.py):
    its folder and the URL."""
    project = tmp_path / "site"
    project.mkdir()
    if url.startswith("sqlite:"):
        django_project.write_project(project, "sqlite", url[len("sqlite:///"):])
    else:
        django_project.write_project(project, "postgres", url)
    django_project.seed(project)
    return project, url


def test_a_django_binding_loads_with_django_settings_module(shop: tuple[Path, str]) -> None:
    """DJANGO_SETTINGS_MODULE set, as in the project's own shell: Django is set up before
    the binding's module (which imports the model) is imported."""
    project, url = shop
    ran = rowstate_in(project, "stuck", url, "orders.flows:ORDERS", "--json")
    assert ran.returncode == 3, ran.stderr
    doc = json.loads(ran.stdout)
    assert doc["machine"] == "order" and doc["table"] == "orders_order"
    lease = doc["groups"]["expired_leases"]
    assert [r["key"] for r in lease["rows"]] == [[1]] and lease["count"] == doc["total"] == 1
    assert lease["rows"][0]["holder"] == "packer-7" and lease["rows"][0]["kind"] == "pack"
    assert doc["undelivered_counted"] is False  # history only: no relay in this project

    ran = rowstate_in(project, "inspect", url, "orders.flows:ORDERS", "2", "--json")
    assert ran.returncode == 0, ran.stderr
    row = json.loads(ran.stdout)
    assert row["key"] == [2] and row["state"] == "NEW" and row["lease"]["held"] is False

    ran = rowstate_in(project, "inspect", url, "orders.flows:ORDERS", "1")
    assert ran.returncode == 0 and ran.stderr == ""
    assert ran.stdout.startswith("order 1 in orders_order: NEW\n")
    assert "packer-7" in ran.stdout and "Traceback" not in ran.stdout
    # the project's TIME_ZONE (Django sets TZ from it): its local time, the zone named
    assert re.search(r"\n  read at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d CES?T ", ran.stdout)


def test_django_settings_option_without_the_environment(tmp_path: Path) -> None:
    project = tmp_path / "site"
    project.mkdir()
    django_project.write_project(project, "sqlite", f"{tmp_path}/shop.db")
    django_project.seed(project)
    url = f"sqlite:///{tmp_path}/shop.db"
    for command in (["stuck", url, "orders.flows:ORDERS"],
                    ["inspect", url, "orders.flows:ORDERS", "2"],
                    ["diagram", "orders.flows:ORDERS"]):
        ran = rowstate_in(project, *command, "--django-settings", "shopsite.settings",
                          settings=None)
        assert ran.returncode in (0, 3) and ran.stderr == "", (command, ran.stderr)
    # the option wins over the environment, as manage.py --settings does
    ran = rowstate_in(project, "stuck", url, "orders.flows:ORDERS", "--django-settings",
                      "shopsite.settings", settings="no_such.settings")
    assert ran.returncode == 3 and ran.stdout.startswith("order in orders_order: 1 stuck\n")


def test_a_django_module_without_settings_says_what_to_do(tmp_path: Path) -> None:
    project = tmp_path / "site"
    project.mkdir()
    django_project.write_project(project, "sqlite", f"{tmp_path}/shop.db")
    url = f"sqlite:///{tmp_path}/shop.db"
    ran = rowstate_in(project, "stuck", url, "orders.flows:ORDERS", settings=None)
    assert ran.returncode == 2 and ran.stdout == "" and ran.stderr.count("\n") == 1
    assert ran.stderr.startswith("rowstate stuck: cannot import 'orders.flows': ")
    assert ran.stderr.endswith("(a Django project's module: set DJANGO_SETTINGS_MODULE or "
                               "pass --django-settings MODULE)\n")

    for settings, option in (("no_such.settings", []),
                             (None, ["--django-settings", "no_such.settings"])):
        ran = rowstate_in(project, "stuck", url, "orders.flows:ORDERS", *option,
                          settings=settings)
        assert ran.returncode == 2 and ran.stdout == "" and "Traceback" not in ran.stderr
        assert ran.stderr == ("rowstate stuck: cannot set Django up with the settings "
                              "'no_such.settings': ModuleNotFoundError: No module named "
                              "'no_such'\n")
