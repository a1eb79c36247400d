"""The pubsched tests' fixtures: a database of each kind, a real SMTP server on loopback,
and a ``Pub`` wired to both (helpers in tests/support/pub_*.py).

  pub_sqlite_template  session   Path: a SQLite file with every migration applied
  pub_pg_template      session   str: NAME of a PostgreSQL database with every migration
                                 applied and no connection open, cloned per test
  pub_pg_clones        session   support.databases.Clones of pub_pg_template, one made ahead
  db_url               function  a migrated database, parametrized over {sqlite, postgres}:
                                 a copy of the session's template of that kind. A test (or
                                 module) marked ``empty_db`` gets a fresh, empty one instead:
                                 the tests of the migrations migrate from nothing themselves.
                                 Restrict the kinds with
                                 ``@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)``.
  pg_db_url            function  a migrated PostgreSQL database (a clone), unparametrized
  smtp                 function  support.smtp_server.SmtpTestServer on loopback
  browser              module    a headless Chromium (support.browser.launched: skipped
                                 without one, failed under PUBSCHED_REQUIRE_BROWSER=1)
  pub                  function  a ``Pub`` on ``db_url``, made the way the module's
                                 ``pub_setup(name)`` marker says: "v2" (the default:
                                 support.pub_v2, flag on, mail to ``smtp``), "engines"
                                 (support.pub_engines: flag as migrated, four tenders, mail to
                                 ``smtp``) or "web" (support.pub_web: signed links, three
                                 tenders, flag on, no mail)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pubsched.engines.flags import set_v2
from pubsched.pub import Pub
from support import pub_engines, pub_v2, pub_web
from support.browser import launched
from support.databases import Clones
from support.pub_db import cloned_url, fresh_url, migrated_pg_template, migrated_sqlite_template
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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.node.get_closest_marker("empty_db") is not None:
        return fresh_url(request, request.param, tmp_path)
    return cloned_url(request, request.param, tmp_path)


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
        made = pub_web.make_pub(db_url)
    elif setup == "engines":
        smtp = request.getfixturevalue("smtp")
        made = pub_engines.make_pub(db_url, pub_engines.mail_settings(smtp))
        pub_engines.add_tenders(made)
    elif setup == "v2":
        made = pub_v2.make_pub(db_url, request.getfixturevalue("smtp"))
        set_v2(made, True, now=pub_v2.NOW)
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
