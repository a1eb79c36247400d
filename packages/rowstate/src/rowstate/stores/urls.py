"""Database URLs: :func:`connect` and :func:`connect_async` pick the store by the URL's
scheme. A ``sqlite:`` URL opens a SQLite store without importing the PostgreSQL one (nor
psycopg)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ..errors import ValidationError
from .base import AsyncStore, Store
from .pgurls import postgres_url
from .sqlite import SQLiteStore


def _sqlite_path(url: str) -> str | None:
    """``sqlite:///rel.db`` -> ``rel.db``; ``sqlite:////abs.db`` -> ``/abs.db``;
    ``sqlite://`` and ``sqlite:///:memory:`` -> memory (None)."""
    if url in ("sqlite:", "sqlite://") or not url.startswith("sqlite:///"):
        if url not in ("sqlite:", "sqlite://"):
            raise ValidationError(f"SQLite URLs look like sqlite:///path.db, got {url!r}")
        return None
    path = unquote(url[len("sqlite:///"):])
    return None if path in ("", ":memory:") else path


def _no_reads_on_sqlite(options: dict[str, Any]) -> None:
    if options.get("read_url") is not None:
        raise ValidationError("read_url (reads on a standby) is for PostgreSQL; a SQLite "
                              "database has one file and no standby")
    options.pop("read_url", None)


def connect(url: str, **options: Any) -> Store:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://`` (memory) or
    ``postgresql://...`` (also ``postgresql+psycopg://`` and libpq's ``host=... dbname=...``:
    see :func:`postgres_url`; several hosts: :mod:`rowstate.stores.pgconnect`).
    ``read_url=``: where read-only units go (PostgreSQL: :mod:`rowstate.stores.pgreads`);
    None is taken by SQLite too, so one call serves both."""
    if url.startswith("sqlite:"):
        _no_reads_on_sqlite(options)
        return SQLiteStore(_sqlite_path(url), **options)
    if (pg := postgres_url(url)) is not None:
        from .postgres import PostgresStore  # on first use: see the module's docstring

        return PostgresStore(pg, **options)
    raise ValidationError(f"unsupported database URL {url!r}")


def connect_async(url: str, **options: Any) -> AsyncStore:
    if url.startswith("sqlite:"):
        from .sqlite_async import AsyncSQLiteStore  # asyncio, on first use

        _no_reads_on_sqlite(options)
        return AsyncSQLiteStore(_sqlite_path(url), **options)
    if (pg := postgres_url(url)) is not None:
        from .postgres_async import AsyncPostgresStore

        return AsyncPostgresStore(pg, **options)
    raise ValidationError(f"unsupported database URL {url!r}")
