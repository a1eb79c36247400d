"""Applying pubsched's numbered SQL migrations (``pubsched/db/migrations/``) to SQLite or
PostgreSQL.

Why a small runner of our own, not yoyo-migrations: yoyo 9.0 was tried here (psycopg 3
through ``postgresql+psycopg://`` and SQLite, four concurrent processes on each all
succeeded) and it reads our plain files, but

* it records a hash of each migration's *id*, not of its text: an applied file that was
  edited afterwards is silently skipped, which is exactly the drift between databases a
  runner must refuse;
* its lock is a row in a lock table: a migrator killed while holding it leaves the row
  behind, and every later run waits 10 s and fails with ``LockTimeout`` until someone runs
  ``yoyo break-lock`` (reproduced here on both databases);
* on SQLite it opens shared-cache connections with no busy timeout, starts deferred
  transactions (``BEGIN``, which FACTS.md measured failing at once with "database is
  locked" under a concurrent writer), and swaps the process-wide ``sqlite3`` datetime
  adapters while it runs, under every other thread of the application.

What this runner guarantees instead (one module, no new dependency):

* **one transaction per migration**: a file's statements and the row recording it commit
  together or not at all (both databases have transactional DDL);
* **a lock**: every step takes it inside its own transaction, so it is released by the
  commit, the rollback or the death of the connection, never left behind. PostgreSQL:
  ``pg_advisory_xact_lock``; SQLite: ``BEGIN IMMEDIATE`` (the one writer lock);
* **checksums**: the table ``pubsched_migrations`` records each applied version with the
  SHA-256 of its file; a changed applied file, an applied version this package does not
  know (a database newer than the code), or a new file numbered below one already applied
  is a :class:`MigrationError`, and nothing is applied;
* **idempotence**: each step re-reads what is applied after taking the lock, so two
  concurrent ``migrate()`` calls both succeed and apply each version once.

Statements are split at a ``;`` that ends a line (optionally followed by a ``-- comment``),
never by ``executescript()``, which COMMITs first on SQLite and would break the
transaction. The files therefore keep ``;`` out of strings, comments' ends and trigger
bodies (see :mod:`pubsched.db.migrations`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .files import create_database
from .urls import DatabaseURLError, Dialect, database_url, dialect_of, sqlite_path

if TYPE_CHECKING:  # psycopg is imported only when a PostgreSQL database is migrated
    import psycopg

TABLE = "pubsched_migrations"
# pg_advisory_xact_lock key of the migrator ("pubschd" in ASCII); only migrators take it
LOCK_KEY = 0x70756273636864
SQLITE_BUSY_TIMEOUT = 30.0  # seconds a migrator waits for another writer
CONNECT_TIMEOUT = 5  # seconds a PostgreSQL host may take to answer (rowstate's default)

_FILE = re.compile(
    r"^(?P<version>\d{4})_(?P<name>[a-z0-9_]+)\.(?P<dialect>sqlite|postgresql)\.sql$"
)
_STATEMENT_END = re.compile(r";[ \t]*(?:--[^\n]*)?$", re.MULTILINE)
_COMMENT = re.compile(r"--[^\n]*")

_TIME_TYPE = {"sqlite": "TEXT", "postgresql": "TIMESTAMPTZ"}
_NOW = {"sqlite": "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')", "postgresql": "now()"}


class MigrationError(RuntimeError):
    """The migrations cannot be applied as they are; the message says which and why.
    Nothing of the failing step was committed."""


@dataclass(frozen=True)
class Migration:
    """One version's SQL for one dialect, with the checksum recorded when it is applied."""

    version: str
    name: str
    dialect: Dialect
    sql: str

    @property
    def checksum(self) -> str:
        # line endings normalised: a checkout with CRLF is the same migration
        return hashlib.sha256(self.sql.replace("\r\n", "\n").encode()).hexdigest()

    @property
    def filename(self) -> str:
        return f"{self.version}_{self.name}.{self.dialect}.sql"

    def statements(self) -> list[str]:
        return split_statements(self.sql)


def split_statements(sql: str) -> list[str]:
    """The statements of a migration file: split at each ``;`` that ends a line; pieces
    that hold only comments and blanks are dropped."""
    out = []
    for piece in _STATEMENT_END.split(sql):
        if _COMMENT.sub("", piece).strip():
            out.append(piece.strip())
    return out


def load(dialect: Dialect) -> tuple[Migration, ...]:
    """Every migration shipped in ``pubsched/db/migrations`` for ``dialect``, in version order.

    The package must hold both dialects of every version (a version missing on one database
    would make the two schemas silently differ), and each version once.
    """
    found: dict[str, dict[str, Migration]] = {}
    for entry in resources.files("pubsched.db.migrations").iterdir():
        if not entry.name.endswith(".sql"):
            continue
        m = _FILE.match(entry.name)
        if m is None:
            raise MigrationError(
                f"migration file {entry.name!r} is not named NNNN_name.(sqlite|postgresql).sql"
            )
        d = m.group("dialect")
        migration = Migration(m.group("version"), m.group("name"),
                              "sqlite" if d == "sqlite" else "postgresql",
                              entry.read_text(encoding="utf-8"))
        per = found.setdefault(migration.version, {})
        if d in per:
            raise MigrationError(f"two {d} files for version {migration.version}")
        per[d] = migration
    for version, per in found.items():
        if set(per) != {"sqlite", "postgresql"}:
            names = ", ".join(m.filename for m in per.values())
            raise MigrationError(f"version {version} needs a sqlite and a postgresql file "
                                 f"(found {names})")
    return tuple(found[v][dialect] for v in sorted(found))


# -- the two databases --------------------------------------------------------------------


class _Db(Protocol):
    dialect: Dialect
    errors: tuple[type[Exception], ...]  # the driver's errors, wrapped by the runner

    def transaction(self) -> contextlib.AbstractContextManager[None]: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


class _SQLite:
    dialect: Dialect = "sqlite"
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, conn: sqlite3.Connection) -> None:
        if conn.isolation_level is not None or conn.in_transaction:
            raise MigrationError("migrate a SQLite connection in autocommit mode "
                                 "(isolation_level=None) and outside a transaction")
        self.conn = conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        # IMMEDIATE takes the writer lock now (waiting up to the busy timeout): this is
        # the migrators' lock, and a deferred BEGIN would fail at its first write instead
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # the runner's own statements write %s (psycopg's style); a migration file's text
        # is run with no parameters and is left as it is
        if params:
            sql = sql.replace("%s", "?")
        return self.conn.execute(sql, tuple(params)).fetchall()


class _Postgres:
    dialect: Dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        import psycopg

        self.errors: tuple[type[Exception], ...] = (psycopg.Error,)
        if not conn.autocommit:
            raise MigrationError("migrate a psycopg connection in autocommit mode: "
                                 "the runner opens one transaction per migration itself")
        self.conn = conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            # held until this transaction ends, however it ends (the connection dying too)
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            yield

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # no parameters: the text is sent as it is (a % in a migration stays a %)
        cur = self.conn.execute(sql, tuple(params) if params else None)
        return cur.fetchall() if cur.description is not None else []


@contextlib.contextmanager
def _open(url: str, *, make_folder: bool = False) -> Iterator[_Db]:
    dialect = dialect_of(url)
    if dialect == "postgresql":
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        # rowstate's stores' connect timeout, per host: a cluster's node that does not answer
        # costs that, not psycopg's 130 s, and the next host is tried (docs/scale.md)
        if "connect_timeout" not in conninfo_to_dict(url) and not os.environ.get(
                "PGCONNECT_TIMEOUT"):
            url = make_conninfo(url, connect_timeout=CONNECT_TIMEOUT)
        with psycopg.connect(url, autocommit=True) as pg:
            yield _Postgres(pg)
        return
    path = sqlite_path(url)
    if path is None:
        raise MigrationError("an in-memory SQLite database exists only inside one connection: "
                             "use pubsched.db.open_store(url, migrate=True)")
    # no PRAGMA journal_mode here: rowstate's store switches the file to WAL when it opens
    # it (and WAL sticks), while the switch itself fails at once, waiting for no busy
    # timeout, whenever another connection is writing: a migrator must simply wait
    create_database(Path(path), make_folder=make_folder)  # 0600 (0700 a folder made)
    conn = sqlite3.connect(path, isolation_level=None, timeout=SQLITE_BUSY_TIMEOUT)
    try:
        yield _SQLite(conn)
    finally:
        conn.close()


def _wrap(conn: sqlite3.Connection | psycopg.Connection[Any]) -> _Db:
    if isinstance(conn, sqlite3.Connection):
        return _SQLite(conn)
    return _Postgres(conn)


# -- the runner -----------------------------------------------------------------------------


def migrate(url: str, *, to: str | None = None,
            migrations: Sequence[Migration] | None = None) -> list[str]:
    """Apply every pending migration (up to and including version ``to``) to the database
    at ``url``; returns the versions this call applied, in order (``[]`` when there was
    nothing to do). Safe to run from several processes at once.

    ``migrations`` replaces the package's own files (tests); they must be of the URL's
    dialect.
    """
    with _open(url, make_folder=True) as db:
        return _migrate(db, to, migrations)


def migrate_connection(conn: sqlite3.Connection | psycopg.Connection[Any], *,
                       to: str | None = None,
                       migrations: Sequence[Migration] | None = None) -> list[str]:
    """:func:`migrate` on a connection the caller owns (in autocommit mode, outside a
    transaction): how an in-memory SQLite database is migrated."""
    return _migrate(_wrap(conn), to, migrations)


def status(url: str, *, check: bool = True) -> list[tuple[str, bool]]:
    """``(version, applied)`` for every version of the package, in order. Reads only;
    creates nothing.

    With ``check`` (the default: what every command and the server ask before they run) a
    database ``migrate`` would refuse is refused here too, by the same
    :class:`MigrationError`: an applied migration changed since, a version this code does
    not know (a database newer than the code), a pending one numbered below an applied one.
    Running on such a schema would read and write tables this code was not written for.
    Without it (``--status``, a listing) such versions are listed too, applied, last."""
    with _open(url) as db:
        migrations = load(db.dialect)
        known = [m.version for m in migrations]
        applied = _applied(db) if _has_table(db) else {}
    if check:
        _check(migrations, applied)
    out = [(v, v in applied) for v in known]
    out += [(v, True) for v in sorted(applied) if v not in known]
    return out


def pending_after(dialect: Dialect, applied: dict[str, str]) -> list[str]:
    """The versions this package would still apply to a database whose applied migrations
    are ``applied`` (version -> checksum), in order: how far behind a backup is. A set
    :func:`migrate` would refuse (a version this code does not know: a database newer than
    the code; a changed checksum) raises the same :class:`MigrationError`."""
    migrations = load(dialect)
    _check(migrations, applied)
    return [m.version for m in migrations if m.version not in applied]


def _migrate(db: _Db, to: str | None, migrations: Sequence[Migration] | None) -> list[str]:
    todo = tuple(load(db.dialect) if migrations is None else migrations)
    for m in todo:
        if m.dialect != db.dialect:
            raise MigrationError(f"{m.filename} is for {m.dialect}, the database is {db.dialect}")
    if to is not None and to not in {m.version for m in todo}:
        raise MigrationError(f"no migration version {to!r} to migrate to")
    done: list[str] = []
    while True:
        # one transaction per step: lock, read what is applied (another migrator may have
        # just applied the next version), check, apply one version, record it, commit
        with db.transaction():
            _create_table(db)
            applied = _applied(db)
            _check(todo, applied)
            pending = [m for m in todo
                       if m.version not in applied and (to is None or m.version <= to)]
            if not pending:
                return done
            step = pending[0]
            _apply(db, step)
        done.append(step.version)


def _check(todo: Sequence[Migration], applied: dict[str, str]) -> None:
    by_version = {m.version: m for m in todo}
    unknown = sorted(v for v in applied if v not in by_version)
    if unknown:
        raise MigrationError(
            f"the database has migration(s) {', '.join(unknown)} applied that this version of "
            "pubsched does not know: it was migrated by newer code; refusing to go on"
        )
    for version, checksum in applied.items():
        m = by_version[version]
        if checksum != m.checksum:
            raise MigrationError(
                f"migration {m.filename} was changed after it was applied (checksum "
                f"{checksum[:12]}... recorded, {m.checksum[:12]}... now): an applied "
                "migration must never be edited; restore it and add a new version instead"
            )
    if applied:
        newest = max(applied)
        late = [m.version for m in todo if m.version not in applied and m.version < newest]
        if late:
            raise MigrationError(
                f"migration(s) {', '.join(late)} are numbered below {newest}, which is already "
                "applied: new migrations go at the end"
            )


def _apply(db: _Db, m: Migration) -> None:
    for i, stmt in enumerate(m.statements(), 1):
        try:
            db.execute(stmt)
        except db.errors as exc:
            raise MigrationError(f"migration {m.filename} failed at statement {i} "
                                 f"({stmt.splitlines()[0]!r}...): {exc}") from exc
    db.execute(f"INSERT INTO {TABLE} (version, name, checksum, applied_at) "
               f"VALUES (%s, %s, %s, {_NOW[db.dialect]})", (m.version, m.name, m.checksum))


def _create_table(db: _Db) -> None:
    db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (version TEXT NOT NULL PRIMARY KEY, "
               f"name TEXT NOT NULL, checksum TEXT NOT NULL, "
               f"applied_at {_TIME_TYPE[db.dialect]} NOT NULL)")


def _has_table(db: _Db) -> bool:
    if db.dialect == "sqlite":
        rows = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s",
                          (TABLE,))
    else:
        rows = db.execute("SELECT 1 WHERE to_regclass(%s) IS NOT NULL", (TABLE,))
    return bool(rows)


def _applied(db: _Db) -> dict[str, str]:
    return {str(v): str(c) for v, c in db.execute(f"SELECT version, checksum FROM {TABLE}")}


# -- the deployment step ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pubsched.db [--status] [--to VERSION] [URL]``: the step a deployment
    runs before any instance starts (URL default: ``PUBSCHED_DB``). Exit 0 when done, 1
    when a migration is refused or fails (the reason on stderr), 2 for a bad URL."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m pubsched.db",
                                     description="Apply pubsched's SQL migrations.")
    parser.add_argument("url", nargs="?", help="database URL (default: $PUBSCHED_DB)")
    parser.add_argument("--to", help="stop after this version")
    parser.add_argument("--status", action="store_true", help="only list the versions")
    args = parser.parse_args(argv)
    try:
        url = args.url or database_url()
        dialect_of(url)
    except DatabaseURLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.status:
            for version, applied in status(url, check=False):
                print(f"{version} {'applied' if applied else 'pending'}")
            return 0
        done = migrate(url, to=args.to)
    except MigrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for version in done:
        print(f"applied {version}")
    if not done:
        print("up to date")
    return 0
