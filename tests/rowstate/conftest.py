"""The engine tests' fixtures (helpers in tests/support/engine.py and races.py).

  engine_pg_database  session   str: DSN of one database for this session's engine tests
  engine_pg_schema    function  str: conninfo of a FRESH SCHEMA in it (search_path set),
                                dropped after the test: a schema costs milliseconds where a
                                CREATE DATABASE per test costs ~0.4 s, and the engine tests
                                run ~150 PostgreSQL cases
  backend             function  support.engine.Backend, parametrized over
                                {sqlite, postgres} x {sync, async}, and the contrib stores
                                (SQLAlchemy sync/async, Django; marked ``contrib``) for the
                                modules in CONTRIB_MODULES (elsewhere they are marked
                                ``slow``: ``-m slow`` runs them); every store it opened is
                                closed at teardown
  url                 function  the races' and crashes' database: a SQLite file (WAL) or a
                                fresh PostgreSQL one
  children            function  worker processes of a test, killed (by pid) at teardown
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from support import races
from support.engine import Backend, backend_params

# The modules whose ``backend`` tests also run on the contrib stores by default: the
# behaviour of moves, leases, units, events, finalization and timers, i.e. everything a
# store takes part in. Elsewhere (bulk, races, lanes, statement counts) they are ``slow``.
CONTRIB_MODULES = {"test_transitions.py", "test_leases.py", "test_units.py",
                   "test_events.py", "test_finalization.py", "test_timers.py"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Contrib backends outside CONTRIB_MODULES are ``slow`` (before ``-m`` deselects)."""
    for item in items:
        if item.get_closest_marker("contrib") and item.path.name not in CONTRIB_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def engine_pg_database(pg_admin_dsn: str, pg_template: str) -> Iterator[str]:
    from support.databases import cloned_database

    with cloned_database(pg_admin_dsn, pg_template, prefix="rs_engine_") as dsn:
        yield dsn


@pytest.fixture
def engine_pg_schema(engine_pg_database: str) -> Iterator[str]:
    import psycopg
    from psycopg import sql as pg_sql
    from psycopg.conninfo import make_conninfo

    name = f"t_{uuid.uuid4().hex[:20]}"  # plain lowercase: no quoting in search_path
    schema = pg_sql.Identifier(name)
    with psycopg.connect(engine_pg_database, autocommit=True) as conn:
        conn.execute(pg_sql.SQL("CREATE SCHEMA {}").format(schema))
    try:
        yield make_conninfo(engine_pg_database, options=f"-c search_path={name}")
    finally:
        with psycopg.connect(engine_pg_database, autocommit=True) as conn:
            conn.execute(pg_sql.SQL("DROP SCHEMA {} CASCADE").format(schema))


@pytest.fixture(params=backend_params())
def backend(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Backend]:
    db, mode, door = request.param
    if db == "postgres":
        where = request.getfixturevalue("engine_pg_schema")
    else:
        where = f"{tmp_path}/engine.db"
    made = Backend(db, mode, where, door)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """The races' and crashes' database: a SQLite file (WAL) or a fresh PostgreSQL one."""
    if request.param == "sqlite":
        return races.sqlite_url(f"{tmp_path}/race.db")
    return str(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def children() -> Iterator[list[races.Child]]:
    """Worker processes of a test; whatever is left is killed (by pid) and reaped."""
    started: list[races.Child] = []
    try:
        yield started
    finally:
        for child in started:
            child.kill()
