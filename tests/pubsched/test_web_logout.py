"""A logout outlives the process (issue 29, item 19): the logged-out cookie opens ``/admin/``
on no other instance (another app, its own pub and store, the same secret and database) and
not after a restart (a new app), on both databases; the record is cleaned up once the cookie
would have expired anyway."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from starlette.testclient import TestClient

from pubsched.db import open_store
from pubsched.db.instants import instant
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.web.auth import SESSION_COOKIE, SESSION_MAX_AGE
from support.pub_web import login, web_settings
from support.pubs import NOW

pytestmark = [pytest.mark.pub_setup("web"),
              pytest.mark.both_databases("the ended session is a row every instance reads")]


class Instance:
    """One running app: its own pub (its own store and connections) on the database."""

    def __init__(self, pub: Pub, clock: list[datetime]) -> None:
        self.pub = pub
        self.client = TestClient(create_app(pub, web_settings(), clock=lambda: clock[0]),
                                 base_url="https://testserver")

    def log_in(self) -> str:
        """A new session's cookie."""
        self.client.cookies.clear()
        reply = login(self.client)
        assert reply.status_code == 303
        return str(reply.cookies[SESSION_COOKIE])

    def send(self, method: str, path: str, cookie: str) -> int:
        self.client.cookies.clear()
        self.client.cookies.set(SESSION_COOKIE, cookie, path="/admin")
        return self.client.request(method, path, follow_redirects=False).status_code

    def admin(self, cookie: str) -> int:
        return self.send("GET", "/admin/", cookie)

    def log_out(self, cookie: str) -> None:
        assert self.send("POST", "/admin/logout", cookie) == 303


@pytest.fixture
def instances(pub: Pub, db_url: str) -> Iterator[tuple[list[datetime], list[Instance]]]:
    clock: list[datetime] = [NOW]
    made = [Instance(pub, clock), Instance(Pub(open_store(db_url), pub.config), clock)]
    try:
        yield clock, made
    finally:
        for one in made:
            one.client.close()
        made[1].pub.close()


def test_a_logged_out_cookie_opens_nothing_elsewhere_or_after_a_restart(
        instances: tuple[list[datetime], list[Instance]], db_url: str, pub: Pub) -> None:
    clock, (first, second) = instances
    cookie = first.log_in()
    assert second.admin(cookie) == 200  # a session opens every instance ...
    first.log_out(cookie)
    assert second.admin(cookie) == 303  # ... and its logout closes every instance
    assert first.admin(cookie) == 303
    restarted = Instance(Pub(open_store(db_url), pub.config), clock)
    try:
        assert restarted.admin(cookie) == 303
        assert restarted.admin(restarted.log_in()) == 200  # a new login, a new session
    finally:
        restarted.client.close()
        restarted.pub.close()


def test_the_record_goes_once_the_cookie_would_have_expired(
        instances: tuple[list[datetime], list[Instance]], pub: Pub) -> None:
    clock, (first, _) = instances

    def log_in_and_out(at: datetime) -> None:
        clock[0] = at
        first.log_out(first.log_in())

    def ends() -> list[datetime]:
        return sorted(instant(r["ends_at"]) for r in pub.query(
            "SELECT ends_at FROM pub_ended_sessions"))

    log_in_and_out(NOW)
    log_in_and_out(NOW + timedelta(minutes=5))
    assert ends() == [NOW + timedelta(seconds=SESSION_MAX_AGE),
                      NOW + timedelta(minutes=5, seconds=SESSION_MAX_AGE)]
    log_in_and_out(NOW + timedelta(seconds=SESSION_MAX_AGE + 1))  # the first one expired
    assert ends() == [NOW + timedelta(minutes=5, seconds=SESSION_MAX_AGE),
                      NOW + timedelta(seconds=2 * SESSION_MAX_AGE + 1)]
