"""The pages read a standby (``PUBSCHED_DB_READS``), and a person still sees what they just
did (issue 30; :mod:`pubsched.web.own_writes`).

A real streaming standby of a throwaway primary (:func:`support.pg_standby.replicated`),
its replay paused so that it is behind for certain: the operator opens the week's form,
and the page the form's answer leads to shows it open (the answer's cookie sends that
read to the primary), while the same page read without the cookie shows the standby's
week, not yet open. Once the standby has replayed, it shows the week open too.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from dataclasses import replace

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from starlette.testclient import TestClient

from pubsched.config import Config
from pubsched.db.migrate import migrate
from pubsched.db.store import open_store, standby_reads
from pubsched.db.urls import DatabaseURLError
from pubsched.engines.flags import set_v2
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.verdicts import BadInput
from pubsched.web.app import create_app
from pubsched.web.own_writes import COOKIE
from support.pg_server import PostgresServer
from support.pg_standby import caught_up, replicated
from support.pub_web import login, people, web_settings
from support.pubs import BASE_URL, NOW, SECRET, TENDERS, WEEK
from support.services import LOCALHOST, ServiceUnavailable

pytestmark = pytest.mark.postgres


def _url(name: str, *servers: PostgresServer, attrs: str) -> str:
    hosts = ",".join(f"{LOCALHOST}:{s.port}" for s in servers)
    return f"postgresql://postgres@{hosts}/{name}?target_session_attrs={attrs}"


def _as_url(dsn: str) -> str:
    """A keyword conninfo as the URL the settings take."""
    p = conninfo_to_dict(dsn)
    return f"postgresql://{p['user']}@{p['host']}:{p['port']}/{p['dbname']}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[PostgresServer, PostgresServer, str]]:
    try:
        with replicated(lambda dsn: migrate(_as_url(dsn))) as pair:
            yield pair
    except ServiceUnavailable as exc:
        pytest.skip(f"no throwaway primary and standby: {exc}")


def _replay(standby: PostgresServer, on: bool) -> None:
    with psycopg.connect(standby.admin_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_resume()" if on else "SELECT pg_wal_replay_pause()")


def _pub(primary: PostgresServer, standby: PostgresServer, name: str) -> Pub:
    """The pub with its three tenders and v2 on, made in a context of its own (its writes
    must not decide where the test's requests read)."""
    reads = _url(name, standby, primary, attrs="prefer-standby")
    config = replace(Config(db_url=_url(name, primary, attrs="read-write")),
                     db_reads_url=reads, secret=SECRET, base_url=BASE_URL)

    def made() -> Pub:
        pub = Pub(open_store(config.db_url, read_url=reads), config)
        for who, email in TENDERS:
            tenders.add(pub, who, email, now=NOW)
        set_v2(pub, True, now=NOW)
        return pub

    return contextvars.Context().run(made)


def test_the_page_after_a_post_shows_it_while_the_standby_is_behind(
        cluster: tuple[PostgresServer, PostgresServer, str]) -> None:
    primary, standby, name = cluster
    pub = _pub(primary, standby, name)
    try:
        assert standby_reads(pub.store) is not None
        caught_up(primary.admin_dsn, standby.admin_dsn)
        app = create_app(pub, web_settings(), clock=lambda: NOW)
        with TestClient(app, base_url="https://testserver") as client:
            assert login(client).status_code == 303
            before = client.get(f"/admin/weeks/{WEEK}").text
            _replay(standby, False)
            try:
                opened = client.post("/admin/open", data={"week": WEEK},
                                     follow_redirects=True)
                assert opened.status_code == 200
                assert COOKIE in client.cookies
                assert opened.text != before and "Close the form" in opened.text
                client.cookies.delete(COOKIE)
                stale = client.get(f"/admin/weeks/{WEEK}").text
                assert "Close the form" not in stale  # the standby's: not yet open
            finally:
                _replay(standby, True)
            caught_up(primary.admin_dsn, standby.admin_dsn)
            assert "Close the form" in client.get(f"/admin/weeks/{WEEK}").text
    finally:
        pub.close()


def test_a_post_that_saved_nothing_carries_no_position(
        cluster: tuple[PostgresServer, PostgresServer, str]) -> None:
    """A post answered 4xx or 5xx (a tender's bad input here; a 503 while the database is
    away) wrote nothing to wait for: no cookie, and no statement on the primary to take a
    position (which, with the primary away, would wait for the pool)."""
    primary, standby, name = cluster
    pub = _pub(primary, standby, name)
    try:
        caught_up(primary.admin_dsn, standby.admin_dsn)  # the tenders, read there
        app = create_app(pub, web_settings(), clock=lambda: NOW)
        with TestClient(app, base_url="https://testserver") as client:
            form = contextvars.Context().run(lambda: people(pub)["Alice"].form(pub))
            refused = client.post(form, data={"week": WEEK, "shift": "999999"},
                                  follow_redirects=False)
            assert refused.status_code == 400
            assert COOKIE not in refused.cookies and COOKIE not in client.cookies
    finally:
        pub.close()


def test_a_cookie_that_is_no_log_position_is_ignored(
        cluster: tuple[PostgresServer, PostgresServer, str]) -> None:
    primary, standby, name = cluster
    pub = _pub(primary, standby, name)
    try:
        # the page reads the standby (a junk cookie names no position): the tenders first
        # reach it (CI once read "No tenders yet" there)
        caught_up(primary.admin_dsn, standby.admin_dsn)
        app = create_app(pub, web_settings(), clock=lambda: NOW)
        with TestClient(app, base_url="https://testserver") as client:
            assert login(client).status_code == 303
            # a page that reads and is there whatever the module's other tests did (they
            # share one database, in any order)
            for junk in ("x'; DROP TABLE pub_runs; --", "0/0/0", "G/1", ""):
                client.cookies.set(COOKIE, junk)
                page = client.get("/admin/tenders")
                assert page.status_code == 200 and "Alice" in page.text, junk
    finally:
        pub.close()


def test_reads_elsewhere_are_for_postgresql_only() -> None:
    with pytest.raises(BadInput, match="PUBSCHED_DB_READS"):
        Config.from_env({"PUBSCHED_DB_READS": "sqlite:///x.db"})
    assert Config.from_env({"PUBSCHED_DB_READS": " "}).db_reads_url is None
    with pytest.raises(DatabaseURLError, match="PUBSCHED_DB_READS"):
        open_store("sqlite://", read_url=f"postgresql://postgres@{LOCALHOST}/x")
