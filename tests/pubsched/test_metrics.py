"""``/metrics`` (issue 20), parsed with prometheus-client's own parser: behind the operator
login in-process (weeks by state, deliveries and notices by status, the
mail log's failures, the tick's record, request latency by route template, never a
tender's token), and ``serve --metrics-port`` as a real process with
``PUBSCHED_LOG_FORMAT=json`` (every line it writes is a JSON record)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from pubsched.cli.dispatch import run as cli_run
from pubsched.deliveries import outbox as notices
from pubsched.engines import actions
from pubsched.machine import COVER_STATES
from pubsched.pub import Pub
from pubsched.tick.run import STEP_FAILED
from pubsched.tick.status import run_tick
from pubsched.web.app import create_app
from pubsched.week.submissions import submit
from support.promtool import promtool_says
from support.pub_web import login, people, web_settings
from support.pubs import NOW, WEEK
from support.services import free_port, http_answers, wait_for_process

pytestmark = pytest.mark.pub_setup("web")
PUBSCHED = Path(sys.executable).parent / "pubsched"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, sorted labels)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def client(pub: Pub) -> Iterator[TestClient]:
    with TestClient(create_app(pub, web_settings(), clock=lambda: NOW),
                    base_url="https://testserver") as c:
        yield c


def test_metrics_need_the_operator(client: TestClient) -> None:
    reply = client.get("/admin/metrics", follow_redirects=False)
    assert reply.status_code == 303 and "/admin/login" in reply.headers["location"]


@pytest.mark.both_databases("the metrics' counting queries")
def test_the_database_figures_and_the_requests(pub: Pub, client: TestClient) -> None:
    assert actions.perform(pub, "open", WEEK, now=NOW)
    alice = people(pub)["Alice"]
    submit(pub, WEEK, alice.email, [], now=NOW)
    with pub.atomic() as tx:
        notices.owe(pub, "remind_shift", "shift:1", notices.to_tender(alice.id),
                        week_of=WEEK, now=NOW)
        tx.execute("INSERT INTO pub_mail_log (week_of, kind, recipient, subject, at) VALUES "
                   "(%s, 'nudge:ready_to_close:refused', 'ops@pub.example', 's', %s)",
                   [WEEK, NOW])
    run_tick(pub, NOW)
    assert login(client).status_code == 303
    assert client.get(f"/admin/weeks/{WEEK}").status_code == 200
    client.get(alice.form(pub))  # a tender's page: counted without its token

    reply = client.get("/admin/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    found = samples(reply.text)
    assert found[("pubsched_database_up", ())] == 1
    assert found[("pubsched_week_runs", (("state", "COLLECTING"),))] == 1
    assert found[("pubsched_week_runs", (("state", "SENT"),))] == 0
    assert found[("pubsched_deliveries", (("status", "sent"),))] == 0
    # the tick's reminders (pubsched.tick.reminders) dropped it: shift 1 has no tender on it
    assert found[("pubsched_notices", (("kind", "remind_shift"), ("status", "dropped")))] == 1
    assert found[("pubsched_mail_messages_total", (("outcome", "refused"),))] == 1
    assert found[("pubsched_tick_last_success_timestamp_seconds", ())] == NOW.timestamp()
    assert found[("pubsched_tick_last_duration_seconds", ())] >= 0
    week_page = (("method", "GET"), ("route", "/admin/weeks/{week}"))
    assert found[("pubsched_http_request_duration_seconds_count", week_page)] == 1
    assert found[("pubsched_http_requests_total", (*week_page[:1], ("route",
                  "/admin/weeks/{week}"), ("status", "200")))] == 1
    assert ("pubsched_http_requests_total",
            (("method", "GET"), ("route", "/t/{token}"), ("status", "200"))) in found
    token = alice.form(pub).rsplit("/", 1)[1]
    assert token not in reply.text


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # SQLite stores any text
def test_a_failed_tick_is_recorded_as_a_failure(pub: Pub, client: TestClient) -> None:
    """A week whose deadline is no time at all (hand-edited, say) makes the tick's step of
    the weeks raise: the tick reports it, runs its other steps and is recorded as failed."""
    assert actions.perform(pub, "open", WEEK, now=NOW)
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_schedule_runs SET opens_at = 'soon', autopilot = 1, "
                   "v2_state = 'DRAFT' WHERE week_of = %s", [WEEK])
    said = run_tick(pub, NOW)
    assert any(v.reason == STEP_FAILED and "soon" in str(v.failed) for v in said)
    assert login(client).status_code == 303
    found = samples(client.get("/admin/metrics").text)
    assert found[("pubsched_tick_last_failure_timestamp_seconds", ())] == NOW.timestamp()
    assert found[("pubsched_tick_last_success_timestamp_seconds", ())] == 0  # never
    # the unreadable week hides the weeks' figures, and only those, and says so
    assert found[("pubsched_database_up", ())] == 1
    assert found[("pubsched_metrics_read_errors", (("group", "weeks"),))] == 1
    assert ("pubsched_deliveries", (("status", "sent"),)) in found


def test_every_known_label_is_a_series_from_the_start_and_promtool_agrees(
        pub: Pub, client: TestClient) -> None:
    """Before any cover, email or tick: each cover state and each kind and status of email
    is a 0 (a series that appears only when non-zero cannot be rated or alerted on), and
    both tick times are 0 ("never"), so the stale-tick alert has a series to read."""
    assert login(client).status_code == 303
    text = client.get("/admin/metrics").text
    found = samples(text)
    for state in COVER_STATES:
        assert found[("pubsched_cover_requests", (("state", state),))] == 0
    for kind in ("schedule", "cover_offer", "cover_taken", "remind_shift", "invite"):
        for status in ("pending", "sent", "failed", "in_flight", "dropped"):
            assert found[("pubsched_notices", (("kind", kind), ("status", status)))] == 0
    assert found[("pubsched_tick_last_failure_timestamp_seconds", ())] == 0
    assert found[("pubsched_tick_last_success_timestamp_seconds", ())] == 0
    assert ("pubsched_tick_last_duration_seconds", ()) not in found  # no tick has run
    linted = promtool_says("check", "metrics", stdin=text)
    assert linted.returncode == 0 and not (linted.stdout + linted.stderr).strip(), \
        linted.stdout + linted.stderr


def test_serve_metrics_port_and_json_logs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/pub.db"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")},
           "PUBSCHED_DB": url, "PUBSCHED_ADMIN_PASSWORD": "a long password",
           "PUBSCHED_LOG_FORMAT": "json"}
    assert subprocess.run([str(PUBSCHED), "init"], env=env, capture_output=True,
                          timeout=120).returncode == 0
    port, scrape = free_port(), free_port()
    server = subprocess.Popen([str(PUBSCHED), "serve", "--port", str(port), "--metrics-port",
                               str(scrape)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        metrics = f"http://127.0.0.1:{scrape}/metrics"
        health = f"http://127.0.0.1:{port}/healthz"  # its own listener, up a moment apart
        wait_for_process(server, lambda: http_answers(metrics) and http_answers(health),
                         "pubsched serve")
        with urllib.request.urlopen(metrics, timeout=5) as r:
            text = r.read().decode()
        with urllib.request.urlopen(health, timeout=5):
            pass
        found = samples(text)
        assert found[("pubsched_database_up", ())] == 1
        linted = promtool_says("check", "metrics", stdin=text)  # the real scrape
        assert linted.returncode == 0, linted.stdout + linted.stderr
        assert found[("pubsched_week_runs", (("state", "DRAFT"),))] == 0
    finally:
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=30)
    lines = [line for line in out.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is a JSON record
    assert {"time", "level", "logger", "message"} <= set(records[0])
    for record in records:  # the time with its zone; no colour codes, no colour copy
        assert datetime.fromisoformat(record["time"]).utcoffset() is not None, record
        assert "color_message" not in record, record
    assert "\x1b" not in out and "\\u001b" not in out
    said = " ".join(r["message"] for r in records)
    assert "serving http://127.0.0.1" in said and f"127.0.0.1:{scrape}/metrics" in said
    assert any(r["logger"] == "uvicorn.access" and "/healthz" in r["message"]
               for r in records)
    assert "stopped" in said


def test_a_bad_log_format_is_refused_at_start(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process: the check comes first, before logging is configured or anything served
    (the test above runs ``pubsched serve`` itself)."""
    monkeypatch.setenv("PUBSCHED_LOG_FORMAT", "xml")
    with pytest.raises(SystemExit, match="PUBSCHED_LOG_FORMAT is text or json"):
        cli_run(["--db", f"sqlite:///{tmp_path}/pub.db", "serve", "--port", str(free_port())])

