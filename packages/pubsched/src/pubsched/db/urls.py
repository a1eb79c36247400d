"""Where pubsched's database is: its URL, the one reading of ``PUBSCHED_DB``, and the
forms pubsched accepts.

One URL names the database everywhere (the store, the migrations, the CLI):
``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, ``sqlite://`` (in memory:
tests only, it lives in one connection) or ``postgresql://user@host/dbname``; a PostgreSQL
cluster's nodes as libpq names them, in either of its forms
(``postgresql://user@db1:5432,db2:5432/pub?target_session_attrs=read-write`` or
``host=db1,db2 port=5432,5432 dbname=pub user=pub target_session_attrs=read-write``: libpq
finds the primary among them, docs/scale.md). The application reads it once at start-up
and hands it down; nothing deeper reads the environment. :func:`configured_url` is the one
reading of ``PUBSCHED_DB`` (with the one default, :data:`DEFAULT_URL`);
:func:`database_url` is that reading, checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal
from urllib.parse import unquote

from rowstate.stores import postgres_url

DB_ENV = "PUBSCHED_DB"
DEFAULT_URL = "sqlite:///pubsched.db"

Dialect = Literal["sqlite", "postgresql"]


class DatabaseURLError(ValueError):
    """A database URL pubsched cannot open; the message says which forms it can."""


def configured_url(environ: Mapping[str, str] | None = None) -> str:
    """The database URL ``PUBSCHED_DB`` names in ``environ`` (default: the process's
    environment), unchecked; unset, empty or blank means :data:`DEFAULT_URL`. Every reader
    of the variable reads it here (the pub's config, the CLI, the migrator)."""
    env = os.environ if environ is None else environ
    return (env.get(DB_ENV) or "").strip() or DEFAULT_URL


def database_url(environ: Mapping[str, str] | None = None) -> str:
    """The database URL from ``PUBSCHED_DB`` in ``environ`` (default: the process's
    environment); unset or empty means the embedded default ``sqlite:///pubsched.db``.

    Checked here, at start-up, so that a typo is an error naming the variable rather than a
    failure at the first query.
    """
    url = configured_url(environ)
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
    # libpq's keyword form (host=db1,db2 ...), as rowstate's connect reads it (one reading)
    if not url.startswith("postgres") and postgres_url(url) == url:
        return "postgresql"
    raise DatabaseURLError(
        f"unsupported database URL {url!r}: use sqlite:///path.db, postgresql://... or "
        "libpq's host=... dbname=..."
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


READS_ENV = "PUBSCHED_DB_READS"


def configured_reads_url(environ: Mapping[str, str] | None = None) -> str | None:
    """Where the pages read, from ``PUBSCHED_DB_READS`` (unset or blank: the database
    itself): a PostgreSQL standby, or every node with ``target_session_attrs=prefer-standby``
    (docs/scale.md). Checked here, at start-up: only a PostgreSQL database has standbys."""
    env = os.environ if environ is None else environ
    url = (env.get(READS_ENV) or "").strip()
    if not url:
        return None
    if not url.startswith(("postgresql://", "postgres://")) and "host=" not in url:
        raise DatabaseURLError(f"{READS_ENV}: a standby's PostgreSQL URL, got {url!r}")
    return url

