"""``/healthz`` and ``/metrics`` when the database does not answer (issue 29, item 9): both
answer within 2 s, ``/healthz`` with 503 and ``/metrics`` with ``pubsched_database_up 0``
and the process's own figures, again and again while it stays silent, and find it again
when it answers.

The database is the real PostgreSQL behind :class:`support.frozen_link.FrozenLink`, which
freezes the way a stopped server does (connections accepted, bytes read, nothing answered):
the app's pooled connections and any new one both hang, which is what held both routes
for 30 s (or for ever: a read on a pooled connection has no client-side limit). A read
that would hang runs in a thread here, so that the old code fails the test rather than
hanging it. On SQLite (a file, no server to stop), that the probes do not open a
connection each."""

from __future__ import annotations

import os
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from pubsched.db.urls import sqlite_path
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.web.within import Deadline
from support.frozen_link import FrozenLink
from support.pub_web import web_settings
from support.pubs import NOW, make_pub
from support.services import free_port, timed

IN_TIME = 2.0


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def served(linked: Pub, link: FrozenLink) -> Iterator[tuple[TestClient, int]]:
    """The app in-process, and its ``serve --metrics-port`` listener's port."""
    app = create_app(linked, web_settings(), clock=lambda: NOW)
    port = free_port()
    listener = app.state.metrics.serve_on(port)
    try:
        with TestClient(app) as client:
            try:
                yield client, port
            finally:
                link.thaw()  # a request still held (a failure) ends before the client
    finally:
        listener.shutdown()
        listener.server_close()


def test_a_read_that_never_returns_is_one_thread_whoever_asks() -> None:
    """Ten callers at once, then ten more, on a read stuck until released: each gives up
    at the deadline, one read ran (no thread per probe), and once it returns the next
    caller starts a fresh one and has its answer."""
    release, started = threading.Event(), []

    def stuck() -> str:
        started.append(1)
        release.wait(30)
        return "answered"

    probe = Deadline(stuck, 0.3)
    for _ in range(2):
        with ThreadPoolExecutor(10) as pool:
            outcomes = list(pool.map(lambda _: _outcome(probe), range(10)))
        assert outcomes == ["timeout"] * 10 and len(started) == 1
    release.set()
    deadline = time.monotonic() + 5
    while _outcome(probe) != "answered":  # the stuck one answered; or a fresh one does
        assert time.monotonic() < deadline
    assert len(started) in (1, 2)


def _outcome(probe: Deadline[str]) -> str:
    try:
        return probe()
    except TimeoutError:
        return "timeout"


@pytest.mark.postgres
def test_a_silent_database_is_down_within_two_seconds(
        served: tuple[TestClient, int], link: FrozenLink) -> None:
    client, port = served
    assert client.get("/healthz").status_code == 200
    assert scrape(port)[("pubsched_database_up", ())] == 1
    link.freeze()
    for _ in range(3):  # each time: the first read is still stuck, no pile-up, no wait
        health, took = timed(lambda: client.get("/healthz"), IN_TIME, grace=3.0)
        assert health.status_code == 503 and took < IN_TIME, took
        assert health.json() == {"ok": False, "database": "unreachable"}
        found, took = timed(lambda: scrape(port), IN_TIME, grace=3.0)
        assert took < IN_TIME, took
        assert found[("pubsched_database_up", ())] == 0
        # what the process knows without the database is still said
        assert found[("pubsched_http_requests_total", (("method", "GET"),
                      ("route", "/healthz"), ("status", "503")))] >= 1
        assert ("pubsched_week_runs", (("state", "SENT"),)) not in found
    link.thaw()
    deadline = time.monotonic() + 30
    while client.get("/healthz").status_code != 200:
        assert time.monotonic() < deadline, "the database answers again; healthz does not"
        time.sleep(0.2)
    assert scrape(port)[("pubsched_database_up", ())] == 1


@pytest.mark.postgres
def test_a_read_kept_waiting_on_a_lock_is_one_group_left_out(
        served: tuple[TestClient, int], pg_db_url: str) -> None:
    """A server that answers but keeps one read waiting (a migration's lock on a table):
    the read gives up on the server's side (``statement_timeout``), that group is named
    in the read errors, the rest is there, all in time."""
    _, port = served
    with psycopg.connect(pg_db_url) as holder:
        holder.execute("LOCK TABLE pub_covers IN ACCESS EXCLUSIVE MODE")
        found, took = timed(lambda: scrape(port), IN_TIME, grace=3.0)
        holder.rollback()
    assert took < IN_TIME, took
    assert found[("pubsched_database_up", ())] == 1
    assert found[("pubsched_metrics_read_errors", (("group", "covers"),))] == 1
    assert found[("pubsched_week_runs", (("state", "SENT"),))] == 0


def test_probes_read_on_one_thread_so_sqlite_opens_one_connection(db_url: str) -> None:
    """Each read runs on its Deadline's own worker, the same thread every time: a store
    that keeps a connection per thread (SQLite) opens one for the health checks and one
    for the scrapes, not one more per probe (a health check every 30 s for a month)."""
    path = sqlite_path(db_url)
    assert path is not None
    pub = make_pub(db_url, web=True)
    try:
        app = create_app(pub, web_settings(), clock=lambda: NOW)
        with TestClient(app) as client:
            assert client.get("/healthz").status_code == 200
            app.state.metrics.text()
            before = open_files(path)
            for _ in range(25):
                assert client.get("/healthz").status_code == 200
                assert b"pubsched_database_up 1.0" in app.state.metrics.text()
            assert open_files(path) == before
    finally:
        pub.close()


def open_files(path: str) -> int:
    """How many of this process's file descriptors are open on ``path``."""
    target = os.path.realpath(path)
    return sum(1 for fd in os.listdir("/proc/self/fd")
               if os.path.realpath(f"/proc/self/fd/{fd}") == target)
