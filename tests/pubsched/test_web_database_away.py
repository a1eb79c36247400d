"""Pages when the database does not answer (pubsched.web.outage): a 503 page in the pub's
words, quickly, never a 500 or a hang, nothing changed by a form refused before it began,
and the same app serving again once the database answers, without a restart.

The database is the real PostgreSQL behind :class:`support.frozen_link.FrozenLink`, which
stops answering as a stopped server or a cut link does (connections accepted, nothing
answered): a request on a pooled connection would wait for ever. A failover (no server
at all for 10-20 s) is tests/failover/test_pubsched_failover.py's; a database's errors
(the connection lost, no connection) give the same page, checked here on a pool that
cannot connect.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from starlette.testclient import TestClient

from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.web.outage import PATIENCE
from pubsched.web.within import DEADLINE
from support.cut_link import CutLink, commit
from support.frozen_link import FrozenLink
from support.pub_web import login, people, web_settings
from support.pubs import NOW, make_pub
from support.services import timed

pytestmark = pytest.mark.postgres

#: the first request after the database stopped: its work's patience, then the probe
FIRST = PATIENCE + DEADLINE + 1.0
#: a request once the app knows: the probe only
KNOWN = DEADLINE + 1.0


@pytest.fixture
def client(linked: Pub, link: FrozenLink) -> Iterator[TestClient]:
    with TestClient(create_app(linked, web_settings(), clock=lambda: NOW),
                    base_url="https://testserver", raise_server_exceptions=False,
                    follow_redirects=False) as made:
        try:
            yield made
        finally:
            link.thaw()


def away_page(reply: Any) -> str:
    """The 503 page's text, checked to be the app's page in words, with no trace."""
    assert reply.status_code == 503, (reply.status_code, reply.text[:300])
    assert reply.headers["retry-after"] == "5"
    assert "The database is not answering" in reply.text
    assert 'rel="stylesheet"' in reply.text  # the app's own look (base.html)
    assert "Traceback" not in reply.text and "Error" not in reply.text
    return str(reply.text)


def test_pages_say_503_quickly_while_the_database_is_silent_and_200_after(
        client: TestClient, linked: Pub, link: FrozenLink) -> None:
    ann = people(linked)["Alice"]
    assert login(client).status_code == 303
    assert "Alice" in client.get("/admin/tenders").text  # logged in, the page drawn
    link.freeze()
    reply, took = timed(lambda: client.get("/admin/tenders"), FIRST)
    assert took < FIRST, took
    assert "Try again in a moment" in away_page(reply)
    # known now: each request is answered within the probe's deadline, the public ones too
    for path in ("/admin/", "/admin/tenders", "/t/" + "x" * 40):
        reply, took = timed(lambda p=path: client.get(p), KNOWN)  # type: ignore[misc]
        assert took < KNOWN, (path, took)
        away_page(reply)
    health, took = timed(lambda: client.get("/healthz"), KNOWN)
    assert health.status_code == 503 and took < KNOWN
    # a form refused before its work began: nothing changed, and the page says so
    reply, _ = timed(lambda: client.post("/admin/tenders/add", data={
        "name": "Dan", "email": "dan@example.com"}, follow_redirects=False), KNOWN)
    assert "nothing was changed" in away_page(reply)
    link.thaw()
    deadline = time.monotonic() + 30
    while (page := client.get("/admin/tenders")).status_code != 200:
        assert page.status_code == 503 and time.monotonic() < deadline, page.status_code
        time.sleep(0.2)
    assert "Dan" not in page.text and "Alice" in page.text  # the same app, serving again
    assert client.get("/healthz").status_code == 200
    assert client.get(ann.form(linked)).status_code == 200
    assert tenders.by_id(linked, ann.id) is not None


def test_a_form_whose_work_began_says_it_may_or_may_not_have_been_saved(
        client: TestClient, linked: Pub, link: FrozenLink) -> None:
    ann = people(linked)["Alice"]
    page = ann.form(linked)
    assert client.get(page).status_code == 200  # the pool has its connection
    link.freeze()
    reply, took = timed(lambda: client.post(f"{page}/reminders", data={"on": "0"},
                                            follow_redirects=False), FIRST)
    assert took < FIRST, took
    assert "may or may not have been saved" in away_page(reply)
    link.thaw()
    deadline = time.monotonic() + 30
    while client.get(page).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    # whole or not at all: here the request stopped before the change (its first read
    # was the one held), so the switch is as it was
    found = tenders.by_id(linked, ann.id)
    assert found is not None and found.shift_reminders is True


@pytest.fixture
def cut(pg_db_url: str) -> Iterator[tuple[CutLink, Pub]]:
    """The pub through a link that cuts a chosen message (support.cut_link)."""
    where = urlsplit(pg_db_url)
    with CutLink(where.hostname or "127.0.0.1", where.port or 5432) as link:
        user = where.netloc.rsplit("@", 1)[0] + "@" if "@" in where.netloc else ""
        query = "&".join(q for q in (where.query, "sslmode=disable") if q)
        pub = make_pub(urlunsplit(where._replace(netloc=f"{user}127.0.0.1:{link.port}",
                                                 query=query)), web=True)
        try:
            yield link, pub
        finally:
            pub.close()


def after(statement: bytes) -> Callable[[bytes, bytes], bool]:
    """A cut at the COMMIT that follows a message holding ``statement``: a simple query
    ``COMMIT``, or, once psycopg has prepared it (after five on one connection), the Sync
    that ends it, the one after the statement's own."""
    syncs: list[int] = []

    def match(kind: bytes, body: bytes) -> bool:
        if statement in body:
            syncs.append(0)
        elif syncs and kind == b"S":
            syncs[0] += 1
        return bool(syncs) and (commit(kind, body) or syncs[0] == 2)

    return match


def test_a_lost_connection_is_a_503_page_and_a_lost_commit_says_check(
        cut: tuple[CutLink, Pub]) -> None:
    """The database's own errors (``ConnectionLostError`` on a read, ``OutcomeUnknown``
    on a COMMIT whose answer never came) are the 503 page, not the crash page; the
    second one says the change may or may not have been saved, and it had been."""
    link, pub = cut
    ann = people(pub)["Alice"]
    page = ann.form(pub)
    with TestClient(create_app(pub, web_settings(), clock=lambda: NOW),
                    base_url="https://testserver", raise_server_exceptions=False,
                    follow_redirects=False) as client:
        assert client.get(page).status_code == 200
        link.cut_at(lambda kind, body: b"FROM pub_tenders" in body, deliver=False)
        reply, _ = timed(lambda: client.get(page), FIRST)
        assert link.cuts == 1 and "Try again in a moment" in away_page(reply)
        link.cut_at(after(b"UPDATE pub_tenders"), deliver=True)
        reply, _ = timed(lambda: client.post(f"{page}/reminders", data={"on": "0"},
                                             follow_redirects=False), FIRST)
        assert link.cuts == 2, (reply.status_code, reply.text[:500])
        assert "may or may not have been saved" in away_page(reply)
        found = tenders.by_id(pub, ann.id)
        assert found is not None and found.shift_reminders is False  # it had landed
        assert client.get(page).status_code == 200  # and the next request is served
