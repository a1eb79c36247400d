"""``pubsched serve``'s parts: the ticker's schedule, the refusal to expose the development
secret, and the real thing in a subprocess (uvicorn answering /healthz, stopped by SIGTERM)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pubsched.cli.dispatch import run as cli_run
from pubsched.config import Config
from pubsched.db import open_store
from pubsched.people import links, tenders
from pubsched.pub import Pub
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


def test_the_admin_password_follows_the_operators_rule() -> None:
    """12 characters or more, as every operator's (issue 29: 10 were let in); refused at
    start-up, naming the variable, before anything is served."""
    assert WebSettings.from_env({"PUBSCHED_ADMIN_PASSWORD": "x" * 12}).password.configured
    assert not WebSettings.from_env({"PUBSCHED_ADMIN_PASSWORD": ""}).password.configured
    with pytest.raises(SystemExit, match="PUBSCHED_ADMIN_PASSWORD: a password needs at "
                                         "least 12 characters"):
        WebSettings.from_env({"PUBSCHED_ADMIN_PASSWORD": "choose-one"})  # the old docs'


def test_pubsched_serve_refuses_a_short_admin_password(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PUBSCHED_ADMIN_PASSWORD", "ten chars!")
    with pytest.raises(SystemExit, match="at least 12 characters"):
        cli_run(["--db", f"sqlite:///{tmp_path}/pub.db", "serve", "--port", "8999"])


def test_the_development_secret_stays_on_loopback() -> None:
    web = WebSettings.from_env({})
    serve.check_exposure("127.0.0.1", Config(), web)
    serve.check_exposure("localhost", Config(), web)
    with pytest.raises(SystemExit, match="development secret"):
        serve.check_exposure("0.0.0.0", Config(), web)
    insecure = WebSettings.from_env({"PUBSCHED_INSECURE_COOKIES": "1"})
    with pytest.raises(SystemExit, match="INSECURE_COOKIES"):
        serve.check_exposure("0.0.0.0", Config(secret=LONG_SECRET), insecure)
    serve.check_exposure("0.0.0.0", Config(secret=LONG_SECRET), web)


LONG_SECRET = "k5Jq0vVd3oZl8sYw2nQx7RtA1bCe9fHg4uMi6pLz0aE"  # 43 bytes, as token_urlsafe(32)


@pytest.mark.parametrize("secret", [None, "pubsched-dev-secret", "short-but-not-default"])
def test_a_public_base_url_needs_a_real_secret_even_on_loopback(secret: str | None) -> None:
    """Behind a proxy serve listens on 127.0.0.1, but the links go out to the world: the
    development secret (or a short one) would let anyone sign any tender's link."""
    env = {"PUBSCHED_BASE_URL": "https://schedule.pub.example"}
    if secret is not None:
        env["PUBSCHED_SECRET"] = secret
    config = Config.from_env(env)
    with pytest.raises(SystemExit) as refused:
        serve.check_exposure("127.0.0.1", config, WebSettings.from_env(env))
    message = str(refused.value)
    assert "\n" not in message and "PUBSCHED_SECRET" in message, message
    assert "https://schedule.pub.example" in message and "token_urlsafe(32)" in message
    # a long random secret is served; so is the default one while links stay on loopback
    serve.check_exposure("127.0.0.1", Config.from_env({**env, "PUBSCHED_SECRET": LONG_SECRET}),
                         WebSettings.from_env(env))
    for local in ("http://127.0.0.1:8000", "http://localhost:8000/", "http://[::1]:8000"):
        serve.check_exposure("127.0.0.1", Config.from_env({"PUBSCHED_BASE_URL": local}),
                             WebSettings.from_env({}))
    with pytest.raises(SystemExit, match="32 bytes"):  # beyond loopback: the same rule
        serve.check_exposure("0.0.0.0", Config(secret="a-long-random-value"),
                             WebSettings.from_env({}))


def test_serving_a_public_address_on_loopback_without_a_trusted_proxy_is_warned() -> None:
    public = Config(secret=LONG_SECRET, base_url="https://schedule.pub.example")
    warning = serve.proxy_warning("127.0.0.1", public, WebSettings.from_env({}))
    assert warning is not None and "PUBSCHED_TRUSTED_PROXIES" in warning
    trusted = WebSettings.from_env({"PUBSCHED_TRUSTED_PROXIES": "127.0.0.1"})
    assert serve.proxy_warning("127.0.0.1", public, trusted) is None
    assert serve.proxy_warning("127.0.0.1", Config(), WebSettings.from_env({})) is None
    assert serve.proxy_warning("0.0.0.0", public, WebSettings.from_env({})) is None


def test_pubsched_serve_refuses_the_development_secret_behind_a_proxy(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/serve.db"
    open_store(url, migrate=True).close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")}
    env.update(PUBSCHED_DB=url, PUBSCHED_ADMIN_PASSWORD="a long password",
               PUBSCHED_BASE_URL="https://schedule.pub.example")
    done = subprocess.run([sys.executable, "-m", "pubsched", "serve", "--host", "127.0.0.1",
                           "--port", "0"], env=env, capture_output=True, text=True, timeout=20)
    assert done.returncode != 0 and "serving" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "refusing to serve https://schedule.pub.example" in lines[0]
    assert "set PUBSCHED_SECRET" in lines[0] and "secrets.token_urlsafe(32)" in lines[0]


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
    env = {**os.environ, "PUBSCHED_DB": url, "PUBSCHED_ADMIN_PASSWORD": "a long password",
           "PUBSCHED_INSECURE_COOKIES": "1"}
    code = ("import sys; from pubsched.config import Config; from pubsched.web.serve import main;"
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fetch(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def test_the_access_log_names_the_tender_never_the_link(tmp_path: Path) -> None:
    """A tender's link is a secret in a URL: uvicorn's access line (and ours) show which
    tender it named, never the token, which would open their form to whoever reads logs."""
    url = f"sqlite:///{tmp_path}/serve.db"
    config = Config(db_url=url, secret=LONG_SECRET)
    pub = Pub(open_store(url, migrate=True), config)
    try:
        assert tenders.add(pub, "Alice", "alice@example.com").applied
        (alice,) = tenders.all_tenders(pub)
    finally:
        pub.close()
    form = links.tender_token(config, alice.id)
    calendar = links.tender_token(config, alice.id, purpose="calendar")
    forged = links.tender_token(Config(secret="another" * 6), alice.id)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")}
    env.update(PUBSCHED_DB=url, PUBSCHED_SECRET=LONG_SECRET,
               PUBSCHED_ADMIN_PASSWORD="a long password")
    proc = subprocess.Popen([sys.executable, "-m", "pubsched", "serve", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while fetch_or_none(base + "/healthz") != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert fetch(f"{base}/t/{form}") == 200
        assert fetch(f"{base}/t/{form}?saved=1") == 200
        assert fetch(f"{base}/cal/{calendar}.ics") == 200
        assert fetch(f"{base}/t/{forged}") == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    for token in (form, calendar, forged):
        assert token not in out and token.split(".")[-1] not in out, out
    assert f'"GET /t/<tender {alice.id}> HTTP/1.1" 200' in out, out
    assert f'"GET /t/<tender {alice.id}>?saved=1 HTTP/1.1" 200' in out, out
    assert f'"GET /cal/<tender {alice.id}>.ics HTTP/1.1" 200' in out, out
    assert '"GET /t/<bad link> HTTP/1.1" 404' in out, out


def fetch_or_none(url: str) -> int | None:
    try:
        return fetch(url)
    except OSError:
        return None
