from __future__ import annotations

from collections.abc import Iterator
from typing import NoReturn

import pytest

import services

# ======================================================================================
# >>> SERVICE FIXTURES (real PostgreSQL / NATS JetStream) -- logic in tests/services.py
#
#   postgres_server  session   services.PostgresServer (found, or a throwaway we started)
#   pg_admin_dsn     session   str: admin DSN of that server (superuser / CREATEDB role)
#   pg_template      session   str: NAME of this session's (empty) template database
#   pg_dsn           function  str: DSN of a fresh database rs_<uuidhex> cloned from
#                              pg_template, dropped (WITH (FORCE)) after the test
#   nats_server      session   services.NatsServer
#   nats_url         session   str: nats://... with JetStream enabled
#
# No service -> the test is SKIPPED with the reason; ROWSTATE_REQUIRE_SERVICES=1 turns that
# into a failure. Tests using these fixtures get the `postgres` / `nats` marker
# automatically, so `-m "not postgres and not nats"` runs the service-free tests only.
#
# To put a schema into every test database, override/extend `pg_template` (connect to the
# template, migrate, CLOSE the connection: PostgreSQL refuses to clone a template that has
# connections).
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
}


def _unavailable(service: str, reason: str) -> NoReturn:
    message = f"{service} unavailable: {reason}"
    _UNAVAILABLE[service] = message
    if services.services_required():
        pytest.fail(f"{message} [failing because {services.REQUIRE_SERVICES_ENV}=1]", pytrace=False)
    pytest.skip(
        f"{message} [set {services.PG_DSN_ENV} / {services.NATS_URL_ENV}, or "
        f"{services.REQUIRE_SERVICES_ENV}=1 to fail instead of skipping]"
    )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[services.PostgresServer]:
    try:
        server = services.acquire_postgres()
    except services.ServiceUnavailable as exc:
        _unavailable("PostgreSQL", str(exc))
    try:
        yield server
    finally:
        server.stop()  # no-op unless it is our throwaway cluster


@pytest.fixture(scope="session")
def pg_admin_dsn(postgres_server: services.PostgresServer) -> str:
    return postgres_server.admin_dsn


@pytest.fixture(scope="session")
def pg_template(pg_admin_dsn: str) -> Iterator[str]:
    name = services.make_database(pg_admin_dsn, template="template0", prefix="rs_tpl_")
    try:
        yield name
    finally:
        services.drop_database(pg_admin_dsn, name)


@pytest.fixture
def pg_dsn(pg_admin_dsn: str, pg_template: str) -> Iterator[str]:
    name = services.make_database(pg_admin_dsn, template=pg_template)
    try:
        yield services.database_dsn(pg_admin_dsn, name)
    finally:
        services.drop_database(pg_admin_dsn, name)


@pytest.fixture(scope="session")
def nats_server() -> Iterator[services.NatsServer]:
    try:
        server = services.acquire_nats()
    except services.ServiceUnavailable as exc:
        _unavailable("NATS JetStream", str(exc))
    try:
        yield server
    finally:
        server.stop()  # no-op unless we started it


@pytest.fixture(scope="session")
def nats_url(nats_server: services.NatsServer) -> str:
    return nats_server.url


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


# <<< END OF SERVICE FIXTURES -- project fixtures go below this line
# ======================================================================================


# ======================================================================================
# >>> ENGINE FIXTURES (helpers in tests/engine_fixtures.py)
#
#   engine_pg_database  session   str: DSN of one database for this session's engine tests
#   engine_pg_schema    function  str: conninfo of a FRESH SCHEMA in it (search_path set),
#                                 dropped after the test: a schema costs milliseconds where a
#                                 CREATE DATABASE per test costs ~0.4 s, and the engine tests
#                                 run ~150 PostgreSQL cases
#   backend             function  engine_fixtures.Backend, parametrized over
#                                 {sqlite, postgres} x {sync, async}; every store it opened is
#                                 closed at teardown
# ======================================================================================

import uuid  # noqa: E402

import psycopg  # noqa: E402
from psycopg import sql as pg_sql  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

import engine_fixtures  # noqa: E402
import race_helpers  # noqa: E402


@pytest.fixture(scope="session")
def engine_pg_database(pg_admin_dsn: str, pg_template: str) -> Iterator[str]:
    name = services.make_database(pg_admin_dsn, template=pg_template, prefix="rs_engine_")
    try:
        yield services.database_dsn(pg_admin_dsn, name)
    finally:
        services.drop_database(pg_admin_dsn, name)


@pytest.fixture
def engine_pg_schema(engine_pg_database: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:20]}"  # plain lowercase: no quoting in search_path
    schema = pg_sql.Identifier(name)
    with psycopg.connect(engine_pg_database, autocommit=True) as conn:
        conn.execute(pg_sql.SQL("CREATE SCHEMA {}").format(schema))
    try:
        yield make_conninfo(engine_pg_database, options=f"-c search_path={name}")
    finally:
        with psycopg.connect(engine_pg_database, autocommit=True) as conn:
            conn.execute(pg_sql.SQL("DROP SCHEMA {} CASCADE").format(schema))


@pytest.fixture(params=engine_fixtures.backend_params())
def backend(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[engine_fixtures.Backend]:
    db, mode = request.param
    if db == "postgres":
        where = request.getfixturevalue("engine_pg_schema")
    else:
        where = f"{tmp_path}/engine.db"
    made = engine_fixtures.Backend(db, mode, where)
    try:
        yield made
    finally:
        made.close()


# -- shared by several modules -------------------------------------------------------------


@pytest.fixture(scope="module")
def ds_pg_database(pg_admin_dsn: str, pg_template: str) -> Iterator[str]:
    """One PostgreSQL database per dataset_lifecycle test module (a schema per test)."""
    from dataset_fixtures import session_database

    with session_database(pg_admin_dsn, pg_template) as dsn:
        yield dsn


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """The races' and crashes' database: a SQLite file (WAL) or a fresh PostgreSQL one."""
    if request.param == "sqlite":
        return race_helpers.sqlite_url(f"{tmp_path}/race.db")
    return str(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def children() -> Iterator[list[race_helpers.Child]]:
    """Worker processes of a test; whatever is left is killed (by pid) and reaped."""
    started: list[race_helpers.Child] = []
    try:
        yield started
    finally:
        for child in started:
            child.kill()

