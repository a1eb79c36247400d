"""The engine tests' fixtures (helpers in tests/support/engine.py and races.py).

  engine_pg_database  session   str: DSN of one database for this session's engine tests
  engine_pg_schema    function  str: conninfo of a FRESH SCHEMA in it (search_path set),
                                dropped after the test: a schema costs milliseconds where a
                                CREATE DATABASE per test costs ~0.4 s, and the engine tests
                                run ~150 PostgreSQL cases
  backend             function  support.engine.Backend, parametrized over
                                {sqlite, postgres} x {sync, async} and the contrib stores
                                (SQLAlchemy sync/async, Django; marked ``contrib``); a
                                contrib store runs a test by default only when it is marked
                                ``conformance`` (else it is marked ``slow``: ``-m contrib``,
                                i.e. ``make contrib``, runs them all); every store it
                                opened is closed at teardown
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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A contrib store runs the ``conformance`` tests by default; its other items are
    ``slow`` (marked before ``-m`` deselects them). A conformance test's module docstring
    says why it is one (support/engine.py): a test marked without a word there is refused."""
    for item in items:
        if not item.get_closest_marker("contrib"):
            continue
        if not item.get_closest_marker("conformance"):
            item.add_marker(pytest.mark.slow)
            continue
        assert isinstance(item, pytest.Function)
        if item.originalname not in (item.module.__doc__ or ""):
            raise pytest.UsageError(f"{item.path.name}::{item.originalname} is marked "
                                    "conformance but its module's docstring does not say why")


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
