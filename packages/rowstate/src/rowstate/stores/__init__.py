"""Stores run statements; they decide nothing.

One module per database, and what they share:

* :mod:`.base`: :class:`Store` and :class:`AsyncStore`, the typed protocols every store
  (rowstate's, the contrib ones, an application's) satisfies;
* :mod:`.common`: the statement counter, per-thread connections, the unit of work's flow;
* :mod:`.sqlite`: the SQLite store (stdlib ``sqlite3``), and :mod:`.sqlite_async` its
  asyncio twin (loaded on first use: asyncio costs more to import than the engine);
* :mod:`.postgres`: the PostgreSQL store (psycopg 3 + psycopg_pool), and
  :mod:`.postgres_async` its asyncio twin, on :mod:`.pgwire`
  (psycopg at the wire), :mod:`.pgconnect` (connecting, several hosts) and
  :mod:`.pgsettle` (ending the session of a COMMIT whose answer was lost);
* :mod:`.urls`: :func:`connect` and :func:`connect_async`, by the URL's scheme.

Driver errors are translated here: a UNIQUE violation becomes :class:`InvariantViolation`
(reported as reason INVARIANT), a dead connection :class:`ConnectionLostError` (nothing
committed) or, with the commit in flight, :class:`OutcomeUnknown` (the write may have
landed), a statement the server cancelled and rolled back, or a write refused by a server
that is read-only (a standby), :class:`StatementCancelled` (it did not land), a value the
database (or the driver, e.g. text that is not valid UTF-8) refuses
:class:`ValidationError`, any other
:class:`StoreError`; the driver's error is kept as ``__cause__``. That holds for scripts
too: a caller only ever sees a :class:`RowstateError`. A store's first connection that
cannot be opened (refused, no such database or role, no answer within the connect timeout;
a SQLite file that will not open) is :class:`ConnectError`, raised when the store opens
(:mod:`.pgconnect`, docs/engine.md "Connecting").

The PostgreSQL names are loaded on first use (PEP 562), so that a SQLite-only program
(``SQLiteStore``, ``connect("sqlite:...")``) never imports psycopg.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import AsyncStore, Store
from .pgurls import postgres_url
from .sqlite import SQLiteStore
from .urls import connect, connect_async

if TYPE_CHECKING:
    from .pgwire import _cursors as _cursors  # tests/rowstate/test_stores.py reads it
    from .postgres import PostgresStore
    from .postgres_async import AsyncPostgresStore
    from .sqlite_async import AsyncSQLiteStore

# name -> the module that defines it, imported on first use
_LAZY = {"PostgresStore": "postgres", "AsyncPostgresStore": "postgres_async", "_cursors": "pgwire",
         "AsyncSQLiteStore": "sqlite_async"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = [
    "AsyncPostgresStore",
    "AsyncSQLiteStore",
    "AsyncStore",
    "PostgresStore",
    "SQLiteStore",
    "Store",
    "connect",
    "connect_async",
    "postgres_url",
]
