"""The web's guards against a hostile client, through the real ASGI app: parallel guesses
are throttled as much as serial ones, the throttle keys on the real client behind a trusted
proxy (and on the peer otherwise), and a body too big is refused without being read."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import pytest
from argon2 import PasswordHasher
from starlette.testclient import TestClient

from pubsched.pub import Pub
from pubsched.verdicts import BadInput
from pubsched.web.app import create_app
from pubsched.web.auth import AdminPassword, LoginThrottle
from pubsched.web.limits import DRAIN_AT_MOST
from pubsched.web.logs import loggable_path
from pubsched.web.proxy import ForwardedClient, parse_proxies, real_client
from pubsched.web.settings import WebSettings
from support.pub_web import PASSWORD, people
from support.pubs import NOW

pytestmark = pytest.mark.pub_setup("web")


class CountingHasher(PasswordHasher):
    """A cheap argon2 that counts its verifications: how many guesses were really checked."""

    def __init__(self) -> None:
        super().__init__(time_cost=1, memory_cost=8, parallelism=1)
        self.checked = 0
        self._lock = threading.Lock()

    def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
        with self._lock:
            self.checked += 1
        return super().verify(hash, password)


def settings(hasher: PasswordHasher, throttle: LoginThrottle, **extra: Any) -> WebSettings:
    return WebSettings(AdminPassword(PASSWORD, hasher), throttle=throttle, **extra)


def guess(client: TestClient, password: str = "guess",
          headers: dict[str, str] | None = None) -> int:
    reply = client.post("/admin/login", data={"password": password, "next": "/admin/"},
                        headers=headers or {}, follow_redirects=False)
    return reply.status_code


# -- 23: parallel guesses ----------------------------------------------------------------


def test_parallel_wrong_passwords_are_throttled_like_serial_ones(pub: Pub) -> None:
    hasher = CountingHasher()
    throttle = LoginThrottle(free=3, base=1.0, cap=60.0, clock=lambda: 1000.0)  # no time passes
    app = create_app(pub, settings(hasher, throttle), clock=lambda: NOW)
    start = threading.Barrier(40)
    with TestClient(app, base_url="https://testserver") as client:
        def one(_: int) -> int:
            start.wait()
            return guess(client)

        with ThreadPoolExecutor(max_workers=40) as pool:
            answers = Counter(pool.map(one, range(40)))
    assert hasher.checked == 3, f"{hasher.checked} of 40 parallel guesses were checked"
    assert answers == {401: 3, 429: 37}


# -- 24: behind a proxy ------------------------------------------------------------------

STRANGER, OPERATOR = "203.0.113.9", "198.51.100.7"


def proxied(pub: Pub, trusted: str, peer: str = "127.0.0.1"
            ) -> tuple[TestClient, LoginThrottle]:
    throttle = LoginThrottle(free=3, base=60.0, cap=60.0, clock=lambda: 1000.0)
    web = WebSettings.from_env({"PUBSCHED_ADMIN_PASSWORD": PASSWORD,
                                "PUBSCHED_TRUSTED_PROXIES": trusted})
    web = settings(CountingHasher(), throttle, trusted_proxies=web.trusted_proxies)
    app = create_app(pub, web, clock=lambda: NOW)
    return TestClient(app, base_url="https://testserver", client=(peer, 40000)), throttle


def test_a_stranger_behind_the_trusted_proxy_cannot_lock_the_operator_out(pub: Pub) -> None:
    client, throttle = proxied(pub, "127.0.0.1, ::1")
    with client:
        for _ in range(3):
            assert guess(client, headers={"x-forwarded-for": STRANGER}) == 401
        assert guess(client, headers={"x-forwarded-for": STRANGER}) == 429
        # what the stranger writes left of the proxy's own entry proves nothing
        spoofed = {"x-forwarded-for": f"{OPERATOR}, {STRANGER}"}
        assert guess(client, headers=spoofed) == 429
        # the operator, through the same proxy, is not slowed by the stranger
        assert guess(client, PASSWORD, headers={"x-forwarded-for": OPERATOR}) == 303
        assert throttle.wait(STRANGER) > 0 and throttle.wait(OPERATOR) == 0.0
        assert throttle.wait("127.0.0.1") == 0.0  # the proxy itself was never counted


def test_forwarded_headers_from_an_untrusted_peer_are_ignored(pub: Pub) -> None:
    for trusted in ("", "10.0.0.0/8"):  # none, or another proxy than this peer
        client, throttle = proxied(pub, trusted)
        with client:
            for n in range(3):  # a new made-up address each time: all counted on the peer
                assert guess(client, headers={"x-forwarded-for": f"192.0.2.{n}"}) == 401
            assert guess(client, headers={"x-forwarded-for": "192.0.2.99"}) == 429
            assert throttle.wait("127.0.0.1") > 0 and throttle.wait("192.0.2.0") == 0.0


def test_the_forwarded_scheme_and_client_reach_the_app_only_from_a_trusted_proxy() -> None:
    seen: dict[str, Any] = {}

    async def echo(scope: Any, receive: Any, send: Any) -> None:
        seen.update(client=scope["client"][0], scheme=scope["scheme"])

    async def call(peer: str, proxies: str) -> dict[str, Any]:
        scope = {"type": "http", "scheme": "http", "client": (peer, 1), "headers": [
            (b"x-forwarded-for", f"{STRANGER}".encode()), (b"x-forwarded-proto", b"https")]}
        await ForwardedClient(echo, parse_proxies(proxies))(scope, None, None)  # type: ignore[arg-type]
        return dict(seen)

    assert asyncio.run(call("127.0.0.1", "127.0.0.0/8")) == {"client": STRANGER,
                                                             "scheme": "https"}
    assert asyncio.run(call("127.0.0.1", "")) == {"client": "127.0.0.1", "scheme": "http"}
    assert asyncio.run(call("192.0.2.5", "127.0.0.1")) == {"client": "192.0.2.5",
                                                           "scheme": "http"}
    nets = parse_proxies("10.0.0.1, 10.1.0.0/16")
    assert real_client("10.0.0.1", "1.2.3.4, 5.6.7.8, 10.1.2.3", nets) == "5.6.7.8"
    assert real_client("10.0.0.1", "10.1.2.3", nets) == "10.1.2.3"
    with pytest.raises(BadInput, match="PUBSCHED_TRUSTED_PROXIES: 'nginx'"):
        parse_proxies("127.0.0.1, nginx")


# -- 26: our own log lines -----------------------------------------------------------------


def test_a_refused_post_to_a_tender_link_logs_the_tender_not_the_token(
        pub: Pub, caplog: pytest.LogCaptureFixture) -> None:
    alice = people(pub)["Alice"]
    token = alice.form(pub).removeprefix("/t/")
    app = create_app(pub, settings(CountingHasher(), LoginThrottle()), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client, \
            caplog.at_level(logging.WARNING, logger="pubsched.web"):
        reply = client.post(f"/t/{token}", data={"week": "2026-12-07"},
                            headers={"origin": "https://evil.example"})
    assert reply.status_code == 403
    assert token not in caplog.text and f"POST /t/<tender {alice.id}>" in caplog.text
    assert loggable_path(f"/cal/{token}.ics", pub.config) == "/cal/<bad link>.ics"  # a form
    # token is no calendar token
    assert loggable_path("/t/", pub.config) == "/t/"  # no token: nothing to hide


# -- 27: bodies too big ------------------------------------------------------------------

MB = 1024 * 1024


class Sender:
    """The client side of one ASGI request: ``size`` bytes in 1 kB chunks, counting what
    the app pulled; ``length`` is the Content-Length header sent (None: chunked)."""

    def __init__(self, size: int, length: int | None) -> None:
        self.size, self.length, self.pulled = size, length, 0
        self.status = 0
        self.body = b""
        self.pulled_at_answer = -1

    async def receive(self) -> dict[str, Any]:
        chunk = b"password=" if self.pulled == 0 else b"x" * 1024
        self.pulled += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": self.pulled < self.size}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.pulled_at_answer = self.pulled
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")

    def scope(self, path: str) -> dict[str, Any]:
        headers = [(b"host", b"testserver"),
                   (b"content-type", b"application/x-www-form-urlencoded")]
        if self.length is not None:
            headers.append((b"content-length", str(self.length).encode()))
        else:
            headers.append((b"transfer-encoding", b"chunked"))
        return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                "method": "POST", "scheme": "https", "path": path, "raw_path": path.encode(),
                "root_path": "", "query_string": b"", "headers": headers,
                "client": ("127.0.0.1", 1), "server": ("testserver", 443), "state": {}}


@pytest.mark.parametrize("length", [150 * MB, None], ids=["content-length", "chunked"])
def test_a_huge_login_body_is_refused_without_being_read(pub: Pub, length: int | None) -> None:
    hasher = CountingHasher()
    app = create_app(pub, settings(hasher, LoginThrottle()), clock=lambda: NOW)
    token = people(pub)["Alice"].form(pub)
    for path in ("/admin/login", token):
        sender = Sender(150 * MB, length)
        asyncio.run(app(sender.scope(path), sender.receive, sender.send))
        assert sender.status == 413, (path, sender.status, sender.body[:300])
        assert b"too large" in sender.body.lower()
        # announced too big: not a byte read; chunked: read (and dropped) only up to the
        # most a refused body is drained, never held past the limit
        assert sender.pulled <= (0 if length else DRAIN_AT_MOST + 1024), (path,
                                                                           sender.pulled)
    assert hasher.checked == 0


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "chunked"])
def test_a_refused_body_a_proxy_is_still_sending_is_read_to_its_end_first(
        pub: Pub, announced: bool) -> None:
    """20 kB to the login (limit 8 kB): all of it read before the 413 starts, so that a
    proxy still writing it does not see the connection close under it (Caddy then
    answered 502)."""
    app = create_app(pub, settings(CountingHasher(), LoginThrottle()), clock=lambda: NOW)
    size = 20 * 1024
    sender = Sender(size, size if announced else None)
    asyncio.run(app(sender.scope("/admin/login"), sender.receive, sender.send))
    assert sender.status == 413
    assert sender.pulled_at_answer >= size, sender.pulled_at_answer


def test_bodies_over_the_limit_get_413_and_normal_ones_pass(pub: Pub) -> None:
    hasher = CountingHasher()
    app = create_app(pub, settings(hasher, LoginThrottle()), clock=lambda: NOW)
    token = people(pub)["Alice"].form(pub)
    with TestClient(app, base_url="https://testserver") as client:
        big = {"password": "x" * 20_000, "next": "/admin/"}
        assert client.post("/admin/login", data=big).status_code == 413
        chunked = iter([b"password=", b"x" * 20_000])  # no Content-Length: counted
        reply = client.post("/admin/login", content=chunked,
                            headers={"content-type": "application/x-www-form-urlencoded"})
        assert reply.status_code == 413 and "8 kB" in reply.text
        assert client.post(token, data={"week": "2026-12-07",
                                        "shift": ["1"] * 5000}).status_code == 413
        assert hasher.checked == 0
        assert guess(client, PASSWORD) == 303  # a login of ordinary size goes through
        assert client.post("/admin/open", data={"week": "x" * 70_000}).status_code == 413
        reply = client.post("/admin/open", content=iter([b"week=", b"x" * 70_000]),
                            headers={"content-type": "application/x-www-form-urlencoded"})
        assert reply.status_code == 413 and "64 kB" in reply.text
        assert client.post("/admin/open", data={"week": "2026-12-07"},
                           follow_redirects=False).status_code == 303
