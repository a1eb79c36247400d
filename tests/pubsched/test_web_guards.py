"""The web's guards against a hostile client, through the real ASGI app: parallel guesses
are throttled as much as serial ones, the throttle keys on the real client behind a trusted
proxy (and on the peer otherwise), and a body too big is refused without being read."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import pytest
from argon2 import PasswordHasher
from starlette.testclient import TestClient

from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.web.auth import AdminPassword, LoginThrottle
from pubsched.web.settings import WebSettings
from support.pub_web import NOW, PASSWORD

pytestmark = [pytest.mark.pub_setup("web"),
              pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]


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
