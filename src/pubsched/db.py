"""Where pubsched's database is, and opening it as a rowstate store.

One URL names the database everywhere (the store, the migrations, the CLI):
``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, ``sqlite://`` (in memory:
tests only, it lives in one connection) or ``postgresql://user@host/dbname``. The
application reads it once at start-up with :func:`database_url` (``PUBSCHED_DB``, default
``sqlite:///pubsched.db``) and hands it down; nothing deeper reads the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal
from urllib.parse import unquote

import rowstate

DB_ENV = "PUBSCHED_DB"
DEFAULT_URL = "sqlite:///pubsched.db"

Dialect = Literal["sqlite", "postgresql"]
Store = rowstate.SQLiteStore | rowstate.PostgresStore


class DatabaseURLError(ValueError):
    """A database URL pubsched cannot open; the message says which forms it can."""


def database_url(environ: Mapping[str, str] | None = None) -> str:
    """The database URL from ``PUBSCHED_DB`` in ``environ`` (default: the process's
    environment); unset or empty means the embedded default ``sqlite:///pubsched.db``.

    Checked here, at start-up, so that a typo is an error naming the variable rather than a
    failure at the first query.
    """
    env = os.environ if environ is None else environ
    url = (env.get(DB_ENV) or "").strip() or DEFAULT_URL
    try:
        dialect_of(url)
    except DatabaseURLError as exc:
        raise DatabaseURLError(f"{DB_ENV}: {exc}") from None
    return url


def dialect_of(url: str) -> Dialect:
    """``"sqlite"`` or ``"postgresql"`` for a URL pubsched accepts; anything else raises."""
    if url.startswith("sqlite:"):
        sqlite_path(url)  # checks the form
        return "sqlite"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    raise DatabaseURLError(
        f"unsupported database URL {url!r}: use sqlite:///path.db or postgresql://..."
    )


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite URL, by rowstate's rules (so both open the same file):
    ``sqlite:///rel.db`` -> ``rel.db``, ``sqlite:////abs.db`` -> ``/abs.db``; ``None`` for
    the in-memory ``sqlite://`` and ``sqlite:///:memory:``."""
    if url in ("sqlite:", "sqlite://"):
        return None
    if not url.startswith("sqlite:///"):
        raise DatabaseURLError(f"SQLite URLs look like sqlite:///path.db, got {url!r}")
    path = unquote(url[len("sqlite:///"):])
    return None if path in ("", ":memory:") else path


def open_store(url: str, *, migrate: bool = False) -> Store:
    """A rowstate store on ``url`` (``rowstate.connect``); the caller closes it.

    With ``migrate=True`` every pending migration is applied first (:mod:`pubsched.migrate`).
    That is how an in-memory database gets its schema: it exists only inside the store's one
    connection, so it is migrated through that connection. A real deployment runs the
    migrations as their own step (``pubsched.migrate.migrate(url)``) before any instance
    starts, and opens stores without it.
    """
    from . import migrate as migrations

    dialect = dialect_of(url)
    if migrate and dialect == "postgresql":
        migrations.migrate(url)
    store = rowstate.connect(url)
    if migrate and isinstance(store, rowstate.SQLiteStore):
        try:
            migrations.migrate_connection(store.connection())
        except BaseException:
            store.close()
            raise
    return store
