from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from support import services

# libpq (psycopg's binary build) tries GSSAPI encryption first on every TCP connect, and
# its Kerberos start-up is not thread-safe: connects from several threads at once (the
# template cloner, the dropper, a race test's workers) segfaulted the test process once
# here (psycopg#1213, ruby-pg#311). Loopback servers with trust auth need no GSSAPI; a
# caller's own setting wins, and subprocesses inherit it.
os.environ.setdefault("PGGSSENCMODE", "disable")

# gettext's language is C: no message catalog is looked for. argparse asks gettext for every
# string it builds, and pubsched's parser is built once per command: each in-process CLI
# call searched the disk for catalogs of $LANG's variants thousands of times (none exists),
# ~7 of its ~16 ms of parser building (test_roster, test_week_shifts and test_covers_cli on
# SQLite, serially: 27 s -> 20 s). What anything prints is the same (no catalog was found),
# and a machine whose language has catalogs still prints the English the tests read.
os.environ["LANGUAGE"] = "C"

if TYPE_CHECKING:  # the drivers are imported by the fixtures that need them, not here
    from support.databases import Clones, Dropper
    from support.nats_server import NatsServer
    from support.patroni import PatroniCluster
    from support.pg_server import PostgresServer

# ======================================================================================
# >>> SERVICE FIXTURES (real PostgreSQL / NATS JetStream) -- logic in tests/support/
#
#   postgres_server  session   support.pg_server.PostgresServer (found, or a throwaway we started)
#   pg_admin_dsn     session   str: admin DSN of that server (superuser / CREATEDB role)
#   pg_template      session   str: NAME of this session's (empty) template database
#   pg_dsn           function  str: DSN of a fresh database rs_<uuidhex> cloned from
#                              pg_template, dropped (WITH (FORCE)) after the test
#   pg_empty_clones  session   support.databases.Clones of pg_template, one made ahead
#   pg_dropper       session   support.databases.Dropper: drops the tests' databases off
#                              the tests' path (all gone at session end)
#   nats_server      session   support.nats_server.NatsServer
#   nats_url         session   str: nats://... with JetStream enabled
#   patroni_cluster  session   support.patroni.PatroniCluster: etcd and two Patroni nodes
#                              we start (deploy/patroni/patroni.yml), that a test may fail
#                              over; its tests get the `failover` marker, which the default
#                              run leaves out (make failover runs them)
#
# Only these shared service fixtures live here; each test package's own fixtures are in its
# conftest.py (tests/rowstate/, tests/dataset_lifecycle/, tests/pubsched/), and the helpers
# they share are the `support` package (tests/ is on sys.path through pyproject's
# `pythonpath`). Importing this file imports no database driver: the fixtures import
# support.pg_server / support.databases (psycopg) and support.nats_server when first used.
#
# No service -> the test is SKIPPED with the reason; ROWSTATE_REQUIRE_SERVICES=1 turns that
# into a failure. Tests using these fixtures get the `postgres` / `nats` marker
# automatically, so `-m "not postgres and not nats"` runs the service-free tests only.
#
# To put a schema into every test database, clone a template of your own made from
# `pg_template` (connect to it, migrate, CLOSE the connection: PostgreSQL refuses to clone a
# template that has connections), as tests/pubsched/conftest.py does.
#
# The two hooks below are registered under private names (`specname=`), so a
# `pytest_collection_modifyitems` / `pytest_terminal_summary` appended later does not
# silently replace them.
# ======================================================================================

_UNAVAILABLE: dict[str, str] = {}

_MARKER_FOR_FIXTURE = {
    "postgres_server": "postgres",
    "pg_admin_dsn": "postgres",
    "pg_template": "postgres",
    "pg_dsn": "postgres",
    "nats_server": "nats",
    "nats_url": "nats",
    "patroni_cluster": "failover",
}


def _unavailable(service: str, reason: str,
                 remedy: str = f"set {services.PG_DSN_ENV} / {services.NATS_URL_ENV}") -> NoReturn:
    message = f"{service} unavailable: {reason}"
    _UNAVAILABLE[service] = message
    if services.services_required():
        pytest.fail(f"{message} [failing because {services.REQUIRE_SERVICES_ENV}=1]", pytrace=False)
    pytest.skip(
        f"{message} [{remedy}, or {services.REQUIRE_SERVICES_ENV}=1 to fail instead of skipping]"
    )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    from support.pg_server import acquire_postgres

    try:
        server = acquire_postgres()
    except services.ServiceUnavailable as exc:
        _unavailable("PostgreSQL", str(exc))
    try:
        yield server
    finally:
        server.stop()  # no-op unless it is our throwaway cluster


@pytest.fixture(scope="session")
def pg_admin_dsn(postgres_server: PostgresServer) -> str:
    return postgres_server.admin_dsn


@pytest.fixture(scope="session")
def pg_template(pg_admin_dsn: str) -> Iterator[str]:
    from support.databases import drop_database, make_database

    name = make_database(pg_admin_dsn, template="template0", prefix="rs_tpl_")
    try:
        yield name
    finally:
        drop_database(pg_admin_dsn, name)


@pytest.fixture
def pg_dsn(pg_admin_dsn: str, pg_template: str) -> Iterator[str]:
    from support.databases import cloned_database

    with cloned_database(pg_admin_dsn, pg_template) as dsn:
        yield dsn


@pytest.fixture(scope="session")
def pg_empty_clones(pg_admin_dsn: str, pg_template: str) -> Iterator[Clones]:
    from support.databases import Clones

    clones = Clones(pg_admin_dsn, pg_template, prefix="rs_")
    try:
        yield clones
    finally:
        clones.close()


@pytest.fixture(scope="session")
def pg_dropper(pg_admin_dsn: str) -> Iterator[Dropper]:
    from support.databases import Dropper

    dropper = Dropper(pg_admin_dsn)
    try:
        yield dropper
    finally:
        dropper.close()


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    from support.nats_server import acquire_nats

    try:
        server = acquire_nats()
    except services.ServiceUnavailable as exc:
        _unavailable("NATS JetStream", str(exc))
    try:
        yield server
    finally:
        server.stop()  # no-op unless we started it


@pytest.fixture(scope="session")
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url


@pytest.fixture(scope="session")
def patroni_cluster() -> Iterator[PatroniCluster]:
    from support.patroni import start_cluster

    try:
        cluster = start_cluster()
    except services.ServiceUnavailable as exc:
        _unavailable("Patroni cluster", str(exc), ".ci/run installs them")
    try:
        yield cluster
    finally:
        cluster.stop()


# Modules whose tests run on one xdist worker (under -n): each has a module fixture that is
# dear to make, which a second worker given one of its tests would make again.
ONE_WORKER = {
    "tests/pubsched/test_wheel.py": "builds the wheels and installs them in a venv (~45 s)",
    **{f"tests/pubsched/test_browser{name}.py": "serves a site and launches Chromium"
       for name in ("", "_away", "_covers", "_login", "_rehearsal", "_reminders", "_roster",
                    "_template", "_tender_page", "_tenders")},
}


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist load`` (what ``-n`` means), except that a module of ``ONE_WORKER`` is one
    unit of work. (xdist's own ``--dist loadgroup`` tags a test by rewriting its node id,
    which pytest 9 no longer lets a plugin do: its groups are silently ignored.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER else nodeid

    return OneWorkerModules(config, log)


@pytest.hookimpl(specname="pytest_collection_modifyitems")
def pytest_rowstate_services_mark(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        for marker in sorted({m for f, m in _MARKER_FOR_FIXTURE.items() if f in names}):
            item.add_marker(marker)


@pytest.hookimpl(specname="pytest_terminal_summary")
def pytest_rowstate_services_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _UNAVAILABLE:
        return
    terminalreporter.write_sep("!", "SERVICES UNAVAILABLE: their tests did not run", red=True)
    for message in _UNAVAILABLE.values():
        terminalreporter.write_line(message, red=True, bold=True)
    if not services.services_required():
        terminalreporter.write_line(
            f"(set {services.REQUIRE_SERVICES_ENV}=1 to make a missing service a failure)"
        )
