"""Behind a real reverse proxy (issue 20): docs/web.md's nginx and Caddy snippets, run as
written (only what a test machine must change: the listening address and port, the
certificate, where the proxy keeps its files, and the app's port), in front of a real
``pubsched serve`` with ``PUBSCHED_TRUSTED_PROXIES=127.0.0.1``.

Visitors come from different loopback addresses (127.0.0.2 is a stranger, 127.0.0.3 the
operator: all of 127/8 is this machine), over TLS with the test's self-signed certificate.
The stranger's wrong passwords throttle the stranger, not the operator, even when the
stranger forges ``X-Forwarded-For`` (the proxy replaces it); without the trusted proxy the
same guesses slow the operator down too, which is the finding this guards against. Both
proxies are Debian's packages (nginx-light, caddy): ``.ci/run`` installs them when missing
and a missing one fails there (``ROWSTATE_REQUIRE_SERVICES=1``); elsewhere it skips."""

from __future__ import annotations

import http.client
import os
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest

from support.doc_blocks import fenced_blocks
from support.services import (
    free_port,
    services_required,
    stop_process,
    tcp_answers,
    wait_for_process,
)
from support.tls import Certificate, self_signed

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "web.md"
PUBSCHED = Path(sys.executable).parent / "pubsched"
PASSWORD = "the operator's long password"
STRANGER, OPERATOR = "127.0.0.2", "127.0.0.3"
SECRET = "proxy-tests-Kq0vVd3oZl8sYw2nQx7RtA1bCe9fHg4u"


def need(proxy: str) -> None:
    if shutil.which(proxy) is None and not Path(f"/usr/sbin/{proxy}").exists():
        why = f"{proxy} is not installed (apt-get install {proxy}{'-light' * (proxy == 'nginx')})"
        if services_required():
            pytest.fail(why)
        pytest.skip(why)


def snippet(lang: str) -> str:
    (found,) = [b.text for b in fenced_blocks(PAGE) if b.lang == lang]
    return found


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    return self_signed(tmp_path_factory.mktemp("proxy-tls"))


@contextmanager
def running(argv: list[str], what: str, port: int, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_process(proc, lambda: tcp_answers("127.0.0.1", port), what)
        yield proc
    finally:
        stop_process(proc, timeout=20)


@contextmanager
def app(tmp_path: Path, proxy_port: int, *, trusted: bool) -> Iterator[int]:
    port = free_port()
    url = f"sqlite:///{tmp_path}/pub.db"
    base = {k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")}
    env = {**base, "PUBSCHED_DB": url, "PUBSCHED_ADMIN_PASSWORD": PASSWORD,
           "PUBSCHED_SECRET": SECRET, "PUBSCHED_BASE_URL": f"https://127.0.0.1:{proxy_port}"}
    if trusted:
        env["PUBSCHED_TRUSTED_PROXIES"] = "127.0.0.1,::1"
    assert subprocess.run([str(PUBSCHED), "init"], env=env, capture_output=True,
                          timeout=120).returncode == 0
    with running([str(PUBSCHED), "serve", "--host", "127.0.0.1", "--port", str(port),
                  "--no-tick"], "pubsched serve", port, env=env, cwd=tmp_path):
        yield port


@contextmanager
def nginx(tmp_path: Path, certificate: Certificate, app_port: int, port: int
          ) -> Iterator[int]:
    server = (snippet("nginx")
              .replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
              .replace("proxy_pass http://127.0.0.1:8000;",
                       f"proxy_pass http://127.0.0.1:{app_port};"))
    assert f"127.0.0.1:{port} ssl" in server and str(app_port) in server
    conf = nginx_conf(tmp_path, certificate, server)
    with running([nginx_bin(), "-p", str(conf.parent), "-c", str(conf), "-g", "daemon off;"],
                 "nginx", port):
        yield port


def nginx_bin() -> str:
    return shutil.which("nginx") or "/usr/sbin/nginx"


def nginx_conf(tmp_path: Path, certificate: Certificate, server: str) -> Path:
    """An nginx.conf of a prefix of its own around the ``server`` block, its certificate
    paths (the documented Let's Encrypt ones) pointed at the test's; nothing else changed."""
    documented = "/etc/letsencrypt/live/schedule.pub.example/"
    assert f"{documented}fullchain.pem" in server and f"{documented}privkey.pem" in server
    server = (server.replace(f"{documented}fullchain.pem", str(certificate.cert))
              .replace(f"{documented}privkey.pem", str(certificate.key)))
    prefix = tmp_path / "nginx"
    (prefix / "logs").mkdir(parents=True)
    conf = prefix / "nginx.conf"
    conf.write_text(f"""
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log;
events {{ worker_connections 64; }}
http {{
    access_log {prefix}/logs/access.log;
    client_body_temp_path {prefix}/body;
    # bodies in memory: the workers (nobody, when the tests run as root) cannot write
    # under pytest's private temporary folder
    client_body_buffer_size 64k;
    proxy_temp_path {prefix}/proxy;
    {server}
}}
""", encoding="utf-8")
    return conf


@contextmanager
def caddy(tmp_path: Path, certificate: Certificate, app_port: int, port: int
          ) -> Iterator[int]:
    site = (snippet("caddy")
            .replace("schedule.pub.example {", f"https://127.0.0.1:{port} {{\n"
                     f"    tls {certificate.cert} {certificate.key}")
            .replace("reverse_proxy 127.0.0.1:8000", f"reverse_proxy 127.0.0.1:{app_port}"))
    assert f"https://127.0.0.1:{port}" in site and str(app_port) in site
    home = tmp_path / "caddy"
    home.mkdir()
    caddyfile = home / "Caddyfile"
    caddyfile.write_text("{\n    admin off\n    auto_https disable_redirects\n}\n" + site,
                         encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home),
           "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config")}
    caddy_bin = shutil.which("caddy") or "/usr/bin/caddy"
    with running([caddy_bin, "run", "--config", str(caddyfile), "--adapter", "caddyfile"],
                 "caddy", port, env=env):
        yield port


PROXIES = {"nginx": nginx, "caddy": caddy}


def login(port: int, certificate: Certificate, source: str, password: str,
          forged: str | None = None) -> int:
    """One login over TLS through the proxy, from ``source``; the answer's status."""
    context = ssl.create_default_context(cafile=str(certificate.cert))
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=context,
                                             source_address=(source, 0))
    headers = {"Content-Type": "application/x-www-form-urlencoded",
               "Sec-Fetch-Site": "same-origin"}
    if forged is not None:
        headers["X-Forwarded-For"] = forged
    try:
        connection.request("POST", "/admin/login", headers=headers, body=urlencode(
            {"email": "admin", "password": password, "next": "/admin/"}))
        reply = connection.getresponse()
        reply.read()
        return reply.status
    finally:
        connection.close()


def burst(port: int, certificate: Certificate, attempts: list[tuple[str, str | None]]
          ) -> list[int]:
    """Wrong passwords sent at once (one thread each, released together), ``(source,
    forged X-Forwarded-For)`` each: at once, because a login check costs ~0.4 s of argon2
    on a busy machine, longer than the throttle's first wait, so one after the other
    would let the wait lapse between them. Their statuses, in order."""
    gate = threading.Barrier(len(attempts))

    def one(attempt: tuple[str, str | None]) -> int:
        gate.wait()
        return login(port, certificate, attempt[0], "wrong", forged=attempt[1])

    with ThreadPoolExecutor(len(attempts)) as pool:
        return list(pool.map(one, attempts))


@pytest.mark.parametrize("proxy", sorted(PROXIES))
def test_a_strangers_guesses_through_the_proxy_never_slow_the_operator(
        proxy: str, tmp_path: Path, certificate: Certificate) -> None:
    need(proxy)
    proxy_port = free_port()
    with app(tmp_path, proxy_port, trusted=True) as app_port, \
            PROXIES[proxy](tmp_path, certificate, app_port, proxy_port) as port:
        # the stranger, claiming to be the operator's address: three are checked, the rest
        # wait, all counted against the stranger's own address
        statuses = burst(port, certificate, [(STRANGER, OPERATOR)] * 6)
        assert sorted(statuses) == [401] * 3 + [429] * 3, statuses
        assert login(port, certificate, OPERATOR, PASSWORD) == 303  # not slowed at all


def test_the_nginx_snippet_passes_nginx_t_as_written(tmp_path: Path,
                                                     certificate: Certificate) -> None:
    """``nginx -t`` on the documented server block, listen address and all: only its
    certificate files are the test's (the issue: without them ``nginx -t`` fails)."""
    need("nginx")
    conf = nginx_conf(tmp_path, certificate, snippet("nginx"))
    done = subprocess.run([nginx_bin(), "-t", "-p", str(conf.parent), "-c", str(conf)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test is successful" in done.stderr


@pytest.mark.parametrize("proxy", sorted(PROXIES))
def test_a_body_too_big_is_413_at_the_proxy(proxy: str, tmp_path: Path,
                                            certificate: Certificate) -> None:
    """Over the proxy's 64 KB: the proxy's own 413 (Caddy 2.6 answered 502); under it but
    over the login's 8 KB: pubsched's 413, passed on."""
    need(proxy)
    proxy_port = free_port()
    with app(tmp_path, proxy_port, trusted=True) as app_port, \
            PROXIES[proxy](tmp_path, certificate, app_port, proxy_port) as port:
        for size in (200 * 1024, 20 * 1024):
            assert post_size(port, certificate, size) == 413, size


def post_size(port: int, certificate: Certificate, size: int) -> int:
    """A login form of ``size`` bytes through the proxy; the answer's status."""
    context = ssl.create_default_context(cafile=str(certificate.cert))
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=context)
    body = urlencode({"email": "admin", "password": "x" * size, "next": "/admin/"})
    try:
        connection.request("POST", "/admin/login", body=body, headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Sec-Fetch-Site": "same-origin"})
        reply = connection.getresponse()
        reply.read()
        return reply.status
    except (BrokenPipeError, ConnectionResetError):  # refused before the body was read
        return -1
    finally:
        connection.close()


def test_without_the_trusted_proxy_every_visitor_is_the_proxy(
        tmp_path: Path, certificate: Certificate) -> None:
    """The finding, as the control: everyone then counts as 127.0.0.1, so three guesses
    from two addresses together fill one allowance (with the proxy trusted, each address
    has its own: six would be checked)."""
    need("nginx")
    proxy_port = free_port()
    with app(tmp_path, proxy_port, trusted=False) as app_port, \
            nginx(tmp_path, certificate, app_port, proxy_port) as port:
        statuses = burst(port, certificate, [(STRANGER, None), (OPERATOR, None)] * 3)
        assert sorted(statuses) == [401] * 3 + [429] * 3, statuses
