"""The pubsched tests' databases: empty ones for the tests of the migrations, and clones of a
database migrated once per session for every other test.

Replaying every migration per test is what the tests of the migrations are about; for the
others it is set-up. So the session migrates one template of each kind and each test gets a
copy: on PostgreSQL ``CREATE DATABASE ... TEMPLATE`` (files copied by the server, no SQL
replayed; the template must have no open connection, and ``migrate`` closes its own), on
SQLite a copy of the migrated file. The PostgreSQL clones are made one ahead and dropped
after the test on worker threads (support.databases' ``Clones`` and ``Dropper``), so a test
waits for neither.

The fixtures are tests/pubsched/conftest.py's; these are the helpers behind them, and
``fresh_url`` for a test that needs an empty database of a kind it was given.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pubsched.db.migrate import migrate


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def fresh_url(request: pytest.FixtureRequest, kind: str, tmp_path: Path,
              name: str = "pub") -> str:
    """A fresh, empty database: a SQLite file ``name`` in ``tmp_path``, or a PostgreSQL
    database of its own (cloned from the session's empty template, dropped after the test;
    fixture ``pg_empty_clones``)."""
    if kind == "sqlite":
        return sqlite_url(tmp_path / f"{name}.db")
    return _pg_clone(request, "pg_empty_clones")


def cloned_url(request: pytest.FixtureRequest, kind: str, tmp_path: Path,
               name: str = "pub") -> str:
    """A database with every migration applied, copied from the session's template of
    ``kind`` (fixtures ``pub_sqlite_template`` / ``pub_pg_template`` through
    ``pub_pg_clones``)."""
    if kind == "sqlite":
        path = tmp_path / f"{name}.db"
        shutil.copyfile(request.getfixturevalue("pub_sqlite_template"), path)
        return sqlite_url(path)
    return _pg_clone(request, "pub_pg_clones")


def _pg_clone(request: pytest.FixtureRequest, clones_fixture: str) -> str:
    """A database of the session's pool of clones the fixture names, handed to the session's
    dropper when the test's fixtures are torn down."""
    from support.databases import Clones, Dropper, database_dsn

    clones: Clones = request.getfixturevalue(clones_fixture)
    dropper: Dropper = request.getfixturevalue("pg_dropper")
    name = clones.take()
    request.addfinalizer(lambda: dropper.drop(name))
    return database_dsn(clones.admin_dsn, name)


def migrated_sqlite_template(folder: Path) -> Path:
    """A SQLite file with every migration applied, closed (nothing left in a WAL file, so
    copying the one file copies the whole database)."""
    path = folder / "pub-template.db"
    migrate(sqlite_url(path))
    assert not Path(f"{path}-wal").exists(), "the migrated template left a WAL file behind"
    return path


@contextmanager
def migrated_pg_template(pg_admin_dsn: str, pg_template: str) -> Iterator[str]:
    """The NAME of a PostgreSQL database with every migration applied and no connection
    left open (PostgreSQL clones a template only then), dropped on the way out."""
    from support.databases import database_dsn, drop_database, make_database

    name = make_database(pg_admin_dsn, template=pg_template, prefix="rs_pubtpl_")
    try:
        migrate(database_dsn(pg_admin_dsn, name))
        yield name
    finally:
        drop_database(pg_admin_dsn, name)
