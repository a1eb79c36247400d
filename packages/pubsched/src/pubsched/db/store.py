"""Opening pubsched's database as a rowstate store (and, for a database in memory,
migrating it through the store's own connection).

Above the URLs and the migration runner, so that neither of them needs the other's
caller: ``store`` -> ``migrate`` -> ``urls``, one way.
"""

from __future__ import annotations

from pathlib import Path

import rowstate
import rowstate.stores

from . import migrate as migrations
from .files import create_database
from .urls import DatabaseURLError, dialect_of, sqlite_path

Store = rowstate.Store
#: a store whose read-only units go to a standby (``PUBSCHED_DB_READS``)
StandbyReads = rowstate.stores.PostgresStore


def open_store(url: str, *, migrate: bool = False, read_url: str | None = None) -> Store:
    """A rowstate store on ``url`` (``rowstate.connect``); the caller closes it.
    ``read_url``: where its read-only units go (the pages' reads: :mod:`pubsched.pub`).

    With ``migrate=True`` every pending migration is applied first (:mod:`pubsched.db.migrate`).
    That is how an in-memory database gets its schema: it exists only inside the store's one
    connection, so it is migrated through that connection. A real deployment runs the
    migrations as their own step (``pubsched.db.migrate.migrate(url)``) before any instance
    starts, and opens stores without it.
    """
    dialect = dialect_of(url)
    if migrate and dialect == "postgresql":
        migrations.migrate(url)
    path = sqlite_path(url) if dialect == "sqlite" else None
    if path is not None:
        create_database(Path(path))  # a new file is 0600 before SQLite opens it
    if read_url is not None and dialect != "postgresql":
        raise DatabaseURLError(
            "PUBSCHED_DB_READS: reads on a standby need a PostgreSQL database")
    store = rowstate.connect(url, read_url=read_url)
    if migrate and isinstance(store, rowstate.stores.SQLiteStore):
        try:
            migrations.migrate_connection(store.connection())
        except BaseException:
            store.close()
            raise
    return store


def standby_reads(store: Store) -> StandbyReads | None:
    """``store`` when its read-only units go to a standby, else None."""
    if isinstance(store, rowstate.stores.PostgresStore) and store.reads is not None:
        return store
    return None

