"""``pubsched serve``'s parts: the ticker's schedule, the refusal to expose the development
secret, and the real thing in a subprocess (uvicorn answering /healthz, stopped by SIGTERM)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pubsched.db import open_store
from pubsched.pub import Config, Pub
from pubsched.web import serve
from pubsched.web.settings import WebSettings


def test_the_tick_runs_every_minute_coalesced_with_a_grace_time(tmp_path: Path) -> None:
    pub = Pub(open_store(f"sqlite:///{tmp_path}/s.db", migrate=True), Config())
    try:
        scheduler = serve.scheduler_for(pub)
        (job,) = scheduler.get_jobs()
        assert job.trigger.interval.total_seconds() == 60
        assert job.coalesce is True and job.max_instances == 1
        assert job.misfire_grace_time == serve.MISFIRE_GRACE_SECONDS > 1
        serve.tick_job(pub)  # one tick on an empty pub: nothing due, nothing raised
    finally:
        pub.close()


def test_the_development_secret_stays_on_loopback() -> None:
    web = WebSettings.from_env({})
    serve.check_exposure("127.0.0.1", Config(), web)
    serve.check_exposure("localhost", Config(), web)
    with pytest.raises(SystemExit, match="development secret"):
        serve.check_exposure("0.0.0.0", Config(), web)
    insecure = WebSettings.from_env({"PUBSCHED_INSECURE_COOKIES": "1"})
    with pytest.raises(SystemExit, match="INSECURE_COOKIES"):
        serve.check_exposure("0.0.0.0", Config(secret="a-long-random-value"), insecure)
    serve.check_exposure("0.0.0.0", Config(secret="a-long-random-value"), web)


def test_serve_refuses_a_database_not_migrated(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="pubsched init"):
        serve.open_pub(Config(db_url=f"sqlite:///{tmp_path}/empty.db"))
    memory = serve.open_pub(Config(db_url="sqlite://"))  # migrated in its one connection
    try:
        assert memory.query("SELECT COUNT(*) AS n FROM pub_tenders") == [{"n": 0}]
    finally:
        memory.close()


def test_serve_answers_healthz_and_stops_on_sigterm(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/serve.db"
    open_store(url, migrate=True).close()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PUBSCHED_DB": url, "PUBSCHED_ADMIN_PASSWORD": "pw",
           "PUBSCHED_INSECURE_COOKIES": "1"}
    code = ("import sys; from pubsched.pub import Config; from pubsched.web.serve import main;"
            f" main('127.0.0.1', {port}, Config.from_env())")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        body = b""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    body = r.read()
                break
            except OSError:
                time.sleep(0.1)
        assert body == b'{"ok":true,"database":"ok"}'
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/", timeout=2) as r:
            assert "/admin/login" in r.url  # the admin is behind its login
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    # uvicorn re-raises the signal once it has shut down (so SIGTERM's exit status)
    assert proc.returncode in (0, -signal.SIGTERM), out
    assert "serving http://127.0.0.1" in out
    assert "pubsched: stopped (ticker and database closed)" in out
