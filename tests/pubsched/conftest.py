"""The pubsched tests' fixtures: a database of each kind, a real SMTP server on loopback,
and a ``Pub`` wired to both (helpers in tests/support/pub_*.py).

  pub_sqlite_template  session   Path: a SQLite file with every migration applied
  pub_pg_template      session   str: NAME of a PostgreSQL database with every migration
                                 applied and no connection open, cloned per test
  pub_pg_clones        session   support.databases.Clones of pub_pg_template, one made ahead
  db_url               function  a migrated database: a copy of the session's template of its
                                 kind, SQLite unless the test (or module) is marked
                                 ``both_databases("why")``, which runs it on PostgreSQL too
                                 (see "Which tests run on PostgreSQL" below). A test marked
                                 ``empty_db`` gets a fresh, empty one instead: the tests of the
                                 migrations migrate from nothing themselves. A test may choose
                                 the kinds itself: ``@pytest.mark.parametrize("db_url",
                                 ["postgres"], indirect=True)``.
  pg_db_url            function  a migrated PostgreSQL database (a clone), unparametrized
  link                 function  support.frozen_link.FrozenLink to ``pg_db_url``'s server
  linked               function  the web tests' ``Pub`` on ``pg_db_url`` reached through
                                 ``link`` (thawed, then closed, at the end)
  smtp                 function  support.smtp_server.SmtpTestServer on loopback
  browser              module    a headless Chromium (support.browser.launched: skipped
                                 without one, failed under PUBSCHED_REQUIRE_BROWSER=1)
  pub                  function  a ``Pub`` on ``db_url`` (support.pubs' ``make_pub``), made
                                 the way the module's ``pub_setup(name)`` marker says: "v2"
                                 (the default: flag on, mail to ``smtp``), "engines" (flag as
                                 migrated, support.pub_engines' four tenders, mail to ``smtp``
                                 with its operator) or "web" (signed links, three tenders, flag
                                 on, no mail)

Which tests run on PostgreSQL: those whose behaviour depends on the database. Races and
crashes (two processes, a lock, a lease, a unit killed midway), the migrations, SQL that
differs by dialect (``pub.dialect`` branches: ``FOR UPDATE``, the flag's lock, the
rehearsal's scratch database, ``clock_timestamp()``), and one test per feature whose
statements reach PostgreSQL, so that every statement the application sends is run there
by some test. The rest (wording, bad input refused before any write, pages, refusals the
engine decides from a row it read) behaves the same on both and runs on SQLite only.
A test that needs PostgreSQL says why in its marker: ``@pytest.mark.both_databases("the
send lease taken by two processes")``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from pubsched.pub import Pub
from support import pub_engines
from support.browser import launched
from support.databases import Clones
from support.frozen_link import FrozenLink
from support.pub_db import cloned_url, fresh_url, migrated_pg_template, migrated_sqlite_template
from support.pubs import mail_settings, make_pub
from support.smtp_server import SmtpTestServer


@pytest.fixture(scope="session")
def pub_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_sqlite_template(tmp_path_factory.mktemp("pub_template"))


@pytest.fixture(scope="session")
def pub_pg_template(pg_admin_dsn: str, pg_template: str) -> Iterator[str]:
    with migrated_pg_template(pg_admin_dsn, pg_template) as name:
        yield name


@pytest.fixture(scope="session")
def pub_pg_clones(pg_admin_dsn: str, pub_pg_template: str) -> Iterator[Clones]:
    clones = Clones(pg_admin_dsn, pub_pg_template, prefix="rs_pub_")
    try:
        yield clones
    finally:
        clones.close()


POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``db_url``'s kinds: SQLite, and PostgreSQL too for a test marked ``both_databases``
    (with its reason); a test that parametrizes ``db_url`` itself keeps its own."""
    if "db_url" not in metafunc.fixturenames or any(
            "db_url" in _argnames(m) for m in metafunc.definition.iter_markers("parametrize")):
        return
    marker = metafunc.definition.get_closest_marker("both_databases")
    if marker is not None and not (marker.args and str(marker.args[0]).strip()):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: both_databases needs a "
                                "reason: why PostgreSQL matters to this test")
    metafunc.parametrize("db_url", ["sqlite", POSTGRES] if marker else ["sqlite"],
                         indirect=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that chose PostgreSQL itself (``parametrize("db_url", ["postgres"], ...)``) is
    marked ``postgres`` too, so that ``-m postgres`` selects every test that needs it."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("db_url") == "postgres":
            item.add_marker(pytest.mark.postgres)


def _argnames(marker: pytest.Mark) -> list[str]:
    names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
    return [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.node.get_closest_marker("empty_db") is not None:
        return fresh_url(request, request.param, tmp_path)
    return cloned_url(request, request.param, tmp_path)


@pytest.fixture
def link(pg_db_url: str) -> Iterator[FrozenLink]:
    where = urlsplit(pg_db_url)
    with FrozenLink(where.hostname or "127.0.0.1", where.port or 5432) as frozen:
        yield frozen


@pytest.fixture
def linked(pg_db_url: str, link: FrozenLink) -> Iterator[Pub]:
    where = urlsplit(pg_db_url)
    user = where.netloc.rsplit("@", 1)[0] + "@" if "@" in where.netloc else ""
    pub = make_pub(urlunsplit(where._replace(netloc=f"{user}127.0.0.1:{link.port}")),
                   web=True)
    try:
        yield pub
    finally:
        link.thaw()  # the work held in flight finishes, and the pool closes
        pub.close()


@pytest.fixture
def pg_db_url(request: pytest.FixtureRequest, tmp_path: Path, pub_pg_clones: Clones) -> str:
    """A migrated PostgreSQL database (a clone), for a test about PostgreSQL only."""
    return cloned_url(request, "postgres", tmp_path)


@pytest.fixture
def smtp() -> Iterator[SmtpTestServer]:
    with SmtpTestServer() as server:
        yield server


@pytest.fixture
def pub(request: pytest.FixtureRequest, db_url: str) -> Iterator[Pub]:
    marker = request.node.get_closest_marker("pub_setup")
    setup = marker.args[0] if marker is not None else "v2"
    if setup == "web":
        made = make_pub(db_url, web=True)
    elif setup == "engines":
        smtp = request.getfixturevalue("smtp")
        made = make_pub(db_url, mail_settings(smtp, operator=pub_engines.OPERATOR))
        pub_engines.add_tenders(made)
    elif setup == "v2":
        made = make_pub(db_url, mail_settings(request.getfixturevalue("smtp")), v2=True)
    else:
        raise pytest.UsageError(f"unknown pub_setup {setup!r}: v2, engines or web")
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per browser test module; each test opens its own context. Not per
    session: Playwright's sync API keeps an event loop running in the main thread while it
    is open, and the tests that call ``asyncio.run`` (an ASGI app driven by hand) would
    then fail."""
    with launched() as made:
        yield made
