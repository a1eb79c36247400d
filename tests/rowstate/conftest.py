"""The engine tests' fixtures (helpers in tests/support/engine.py and races.py).

  engine_pg_database  session   str: DSN of one database for this session's engine tests
                                (synchronous_commit off: see the fixture)
  engine_pg_schema    function  str: conninfo of a FRESH SCHEMA in it (search_path set),
                                dropped after the test (in the background: Schemas): a
                                schema costs milliseconds where a CREATE DATABASE per test
                                costs ~0.4 s, and the engine tests run ~500 PostgreSQL cases
  backend             function  support.engine.Backend, parametrized over
                                {sqlite, postgres} x {sync, async} and the contrib stores
                                (SQLAlchemy sync/async, Django; marked ``contrib``); a
                                contrib store runs a test by default only when it is marked
                                ``conformance`` (else it is marked ``slow``: ``-m contrib``,
                                i.e. ``make contrib``, runs them all); every store it
                                opened is closed at teardown
  url                 function  the races' and crashes' database: a SQLite file (WAL) or a
                                fresh PostgreSQL one (cloned ahead, dropped in the
                                background: pg_empty_clones, pg_dropper)
  children            function  worker processes of a test, killed (by pid) at teardown
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from support import races
from support.engine import Backend, backend_params

if TYPE_CHECKING:  # the drivers are imported by the fixtures that need them
    from support.databases import Dropper


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
    from psycopg import sql as pg_sql
    from psycopg.conninfo import conninfo_to_dict

    from support.databases import admin_connect, cloned_database

    with cloned_database(pg_admin_dsn, pg_template, prefix="rs_engine_") as dsn:
        # no engine test crashes this server: a commit need not wait for its WAL flush
        # (the tests' many small commits and DDL scripts waited on fsync, more so when
        # other suites share the disk); what a commit makes visible is the same
        with admin_connect(pg_admin_dsn) as conn:
            conn.execute(pg_sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(
                pg_sql.Identifier(str(conninfo_to_dict(dsn)["dbname"]))))
        yield dsn


class Schemas:
    """Fresh schemas in one database: made on a connection kept for the session, dropped
    by a thread of their own on another, so that a test's teardown does not wait for a
    ``DROP SCHEMA ... CASCADE`` (each test's tables are its own: nothing else waits on
    them). ``close()`` waits until every schema handed back is gone and raises the first
    error a drop met, so nothing is left behind silently."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.dsn = dsn
        self._maker = psycopg.connect(dsn, autocommit=True)
        self._gone: queue.Queue[str | None] = queue.Queue()
        self._errors: list[BaseException] = []
        self._dropper = threading.Thread(target=self._drop_all, name="schema-dropper",
                                         daemon=True)
        self._dropper.start()

    def make(self) -> str:
        """A new schema's name (plain lowercase: no quoting in search_path)."""
        from psycopg import sql as pg_sql

        name = f"t_{uuid.uuid4().hex[:20]}"
        self._maker.execute(pg_sql.SQL("CREATE SCHEMA {}").format(pg_sql.Identifier(name)))
        return name

    def drop(self, name: str) -> None:
        self._gone.put(name)

    def _drop_all(self) -> None:
        import psycopg
        from psycopg import sql as pg_sql

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            # a connection a test leaked, holding a lock on its tables, fails the drop (and
            # the session, at close()) instead of hanging the session's end
            conn.execute("SET lock_timeout = '60s'")
            while (name := self._gone.get()) is not None:
                try:
                    conn.execute(pg_sql.SQL("DROP SCHEMA {} CASCADE").format(
                        pg_sql.Identifier(name)))
                except BaseException as exc:  # reported by close()
                    self._errors.append(exc)

    def close(self) -> None:
        self._gone.put(None)
        self._dropper.join()
        self._maker.close()
        if self._errors:
            raise self._errors[0]


@pytest.fixture(scope="session")
def engine_pg_schemas(engine_pg_database: str) -> Iterator[Schemas]:
    schemas = Schemas(engine_pg_database)
    try:
        yield schemas
    finally:
        schemas.close()


@pytest.fixture
def engine_pg_schema(engine_pg_database: str, engine_pg_schemas: Schemas) -> Iterator[str]:
    from psycopg.conninfo import make_conninfo

    name = engine_pg_schemas.make()
    try:
        yield make_conninfo(engine_pg_database, options=f"-c search_path={name}")
    finally:
        engine_pg_schemas.drop(name)


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
def url(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    """The races' and crashes' database: a SQLite file (WAL) or a fresh PostgreSQL one,
    cloned ahead and dropped after the test on worker threads (support.databases), so the
    test waits for neither; the test's ``pg_dsn`` when it asks for that one too."""
    if request.param == "sqlite":
        yield races.sqlite_url(f"{tmp_path}/race.db")
        return
    if "pg_dsn" in request.fixturenames:
        yield str(request.getfixturevalue("pg_dsn"))
        return
    from support.databases import database_dsn

    admin = str(request.getfixturevalue("pg_admin_dsn"))
    dropper: Dropper = request.getfixturevalue("pg_dropper")
    name = request.getfixturevalue("pg_empty_clones").take()
    try:
        yield database_dsn(admin, name)
    finally:
        dropper.drop(name)


@pytest.fixture
def children() -> Iterator[list[races.Child]]:
    """Worker processes of a test; whatever is left is killed (by pid) and reaped."""
    started: list[races.Child] = []
    try:
        yield started
    finally:
        for child in started:
            child.kill()
