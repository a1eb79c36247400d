"""Where the benchmarks run: a fresh PostgreSQL database, a SQLite file, NATS.

PostgreSQL and NATS are found or started with ``tests/support/`` (the same rules as the
test suite: ``$ROWSTATE_PG_DSN`` / ``$ROWSTATE_NATS_URL``, else the default local servers,
else throwaway ones). The PostgreSQL database is created for this run and dropped at the end.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from rowstate.stores import AsyncPostgresStore, AsyncSQLiteStore, PostgresStore, SQLiteStore

ROOT = Path(__file__).resolve().parent.parent


# the tests' helpers: ``tests/`` on sys.path makes their ``support`` package importable
sys.path.insert(0, str(ROOT / "tests"))
from support import databases, nats_server, pg_server, services  # noqa: E402


class Env:
    """Connections and stores for one benchmark run."""

    def __init__(self) -> None:
        self.pg_server: Any = None
        self.pg_admin_dsn: str | None = None
        self.pg_db: str | None = None
        self.pg_dsn: str | None = None
        self.tmp = Path(tempfile.mkdtemp(prefix="rowstate-bench-"))
        self.sqlite_path = str(self.tmp / "bench.db")
        self.nats_server: Any = None

    # -- set-up and tear-down --------------------------------------------------------------

    def start_postgres(self) -> str | None:
        """The DSN of a fresh database, or None (with the reason printed)."""
        try:
            self.pg_server = pg_server.acquire_postgres()
        except services.ServiceUnavailable as exc:
            print(f"PostgreSQL unavailable: {exc}")
            return None
        self.pg_admin_dsn = self.pg_server.admin_dsn
        self.pg_db = databases.make_database(self.pg_admin_dsn, prefix="rs_bench_")
        self.pg_dsn = databases.database_dsn(self.pg_admin_dsn, self.pg_db)
        return self.pg_dsn

    def start_nats(self) -> str | None:
        try:
            self.nats_server = nats_server.acquire_nats()
        except services.ServiceUnavailable as exc:
            print(f"NATS JetStream unavailable: {exc}")
            return None
        url: str = self.nats_server.url
        return url

    def close(self) -> None:
        if self.pg_db and self.pg_admin_dsn:
            databases.drop_database(self.pg_admin_dsn, self.pg_db)
            self.pg_db = None
        if self.pg_server is not None:
            self.pg_server.stop()  # only a throwaway cluster we started
        if self.nats_server is not None:
            self.nats_server.stop()  # only a server we started
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the library's stores --------------------------------------------------------------

    def store(self, backend: str, workers: int) -> SQLiteStore | PostgresStore:
        if backend == "sqlite":
            return SQLiteStore(self.sqlite_path, synchronous="NORMAL")
        assert self.pg_dsn
        # each worker thread keeps its own connection, as each hand-written worker does
        return PostgresStore(self.pg_dsn, per_thread=True)

    def astore(self, backend: str, workers: int) -> AsyncSQLiteStore | AsyncPostgresStore:
        if backend == "sqlite":
            return AsyncSQLiteStore(self.sqlite_path, workers=workers, synchronous="NORMAL")
        assert self.pg_dsn
        return AsyncPostgresStore(self.pg_dsn, min_size=workers, max_size=workers)

    # -- the baselines' plain driver connections -------------------------------------------

    def connect(self, backend: str) -> Any:
        if backend == "sqlite":
            return sqlite_connect(self.sqlite_path)
        assert self.pg_dsn
        return psycopg.connect(self.pg_dsn, autocommit=True)

    async def aconnect(self) -> psycopg.AsyncConnection[Any]:
        assert self.pg_dsn
        return await psycopg.AsyncConnection.connect(self.pg_dsn, autocommit=True)


def sqlite_connect(path: str) -> sqlite3.Connection:
    """What a careful hand-written SQLite program opens: real autocommit, WAL,
    synchronous=NORMAL, a busy timeout (the same settings as the library's store)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn
