"""``pubsched restore PATH``: put a ``pubsched backup`` back as the pub's database, whole.

Why a command and not ``cp``: after a crash, ``cp backup pub.db`` left the old
``pub.db-wal`` beside the copied file, and SQLite replayed it (a write-ahead log does not
know which database it was written for): the restored database had the writes made after
the backup. So the restore replaces the database *with* its companions, and only when
nobody has it open.

**Checked first, on both databases.** The backup must be a pubsched database: a SQLite
file that passes ``PRAGMA integrity_check`` or a ``pg_dump`` custom-format archive, with
pubsched's migrations table. Its migrations are judged as ``pubsched init`` judges a
database's (:func:`pubsched.db.migrate.pending_after`): a backup made by newer code (a
version this code does not know) or with a changed migration is refused; an older one is
restored and named as such, and ``pubsched init`` brings it up to date afterwards.

**SQLite**, never while in use. Every SQLite connection to a database in WAL mode (the
pub's always is) holds a shared POSIX lock on the file's lock bytes for as long as it is
open, idle or not, and another on the ``-shm`` file's "in use" byte; a ``serve`` keeps
connections open, a ``tick`` holds one while it runs. The restore takes both as exclusive
locks without waiting (the byte offsets are SQLite's file format: the pending byte at
1 GiB, then the reserved byte and the 510 shared bytes; the ``-shm``'s byte 128), so any
open connection makes it refuse, and a process that starts meanwhile waits on the lock
(SQLite's busy timeout) instead of opening a file being swapped. Under the lock: the old
``-wal``, ``-shm`` and ``-journal`` are removed *first* (a crash then leaves at worst the
old database without its log, never the restored one with the old log), then the copy,
written beside the database under a temporary name, flushed, mode 0600, is renamed onto
it and the folder flushed. The old file's own lock goes with its inode.

**PostgreSQL**: ``pg_restore --clean --if-exists --single-transaction`` into the configured
database (``--no-owner --no-privileges``: the tables belong to whoever restores them, the
pub's own user), refused while another session is connected to it. Tables that a newer
migration made in the current database and the backup does not have would survive
``--clean`` and make ``pubsched init`` fail; they are dropped first (only tables pubsched's
own migrations create, never another application's), in a transaction of their own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import pgtools
from .files import flush, flush_folder, private_file
from .migrate import TABLE, MigrationError, load, pending_after
from .urls import Dialect, dialect_of, sqlite_path

# SQLite's lock bytes (its file format, see the module docstring)
PENDING_BYTE = 0x40000000
LOCK_BYTES = 2 + 510  # the reserved byte, the shared bytes after the pending byte
SHM_IN_USE_BYTE = 128
COMPANIONS = ("-wal", "-shm", "-journal")


class RestoreRefused(Exception):
    """Nothing was changed: the reason says what to do (not a pubsched backup, a backup
    newer than the code, the database in use, pg_restore not installed)."""


class RestoreFailed(Exception):
    """The restore started and did not finish; the message says where things stand."""


@dataclass(frozen=True)
class Restored:
    target: str  # the file or the database, as it may be printed
    level: str  # the backup's newest migration
    pending: list[str] = field(default_factory=list)  # what `pubsched init` will apply


Confirm = Callable[[str], bool]


def restore(url: str, source: Path, *, confirm: Confirm | None = None) -> Restored:
    """Replace the database ``url`` names with the backup at ``source`` (module
    docstring). ``confirm`` is asked, once the backup is checked and nobody is using the
    database, whether to go on (with what will happen, in words); no: refused, nothing
    changed. None: no question (``--yes``)."""
    if not source.is_file():
        raise RestoreRefused(f"there is no backup at {source}")
    if dialect_of(url) == "sqlite":
        return _sqlite(url, source, confirm)
    return _postgresql(url, source, confirm)


def _ask(confirm: Confirm | None, target: str, source: Path, level: str,
         pending: list[str]) -> None:
    if confirm is None:
        return
    older = (", older than this code: `pubsched init` brings it up to date after"
             if pending else "")
    if not confirm(f"Replace {target} with the backup {source} (migration {level}{older})? "
                   "Everything written to it since that backup is lost."):
        raise RestoreRefused("the answer was not yes; nothing was changed")


def _judge(dialect: Dialect, applied: dict[str, str], source: Path) -> tuple[str, list[str]]:
    """The backup's level and what ``init`` will apply after it, or refused."""
    if not applied:
        raise RestoreRefused(f"{source} is not a pubsched backup (no migrations recorded)")
    try:
        pending = pending_after(dialect, applied)
    except MigrationError as exc:
        raise RestoreRefused(f"{source} cannot be restored by this version of pubsched: "
                             f"{exc}") from None
    return max(applied), pending


# -- SQLite ----------------------------------------------------------------------------


def _sqlite(url: str, source: Path, confirm: Confirm | None) -> Restored:
    path = sqlite_path(url)
    if path is None:
        raise RestoreRefused("an in-memory database lives only in its process: there is "
                             "nothing to restore into")
    target = Path(path)
    if not target.parent.is_dir():
        raise RestoreRefused(f"{target.parent} is not a directory")
    level, pending = _judge("sqlite", _sqlite_migrations(source), source)
    with _nobody_in(target):  # said before the question, checked again for the swap
        pass
    _ask(confirm, str(target), source, level, pending)
    partial = target.with_name(f".{target.name}.restore-{os.getpid()}")
    private_file(partial)
    try:
        with open(source, "rb") as src, open(partial, "r+b") as dst:
            shutil.copyfileobj(src, dst)
        flush(partial)
        with _nobody_in(target):
            for suffix in COMPANIONS:  # first: never the restored file with the old log
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            os.replace(partial, target)
            flush_folder(target.parent)
    finally:
        partial.unlink(missing_ok=True)
    return Restored(str(target), level, pending)


def _sqlite_migrations(source: Path) -> dict[str, str]:
    """The migrations a SQLite backup records (version -> checksum), read without writing
    a byte beside it (``immutable``: no lock, no log); refused unless it is a whole SQLite
    database with pubsched's table."""
    log = Path(f"{source}-wal")
    if log.exists() and log.stat().st_size > 0:
        raise RestoreRefused(f"{source} has a write-ahead log beside it ({log.name}): it is "
                             "a live database's file, not a closed backup; make one with "
                             "`pubsched backup`")
    try:
        db = sqlite3.connect(f"file:{source.resolve()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise RestoreRefused(f"{source} cannot be opened: {exc}") from None
    try:
        (verdict,) = db.execute("PRAGMA integrity_check").fetchone()
        if verdict != "ok":
            raise RestoreRefused(f"{source} is damaged (integrity check: {verdict})")
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                          (TABLE,)).fetchall():
            return {}
        return {str(v): str(c) for v, c in db.execute(f"SELECT version, checksum FROM {TABLE}")}
    except sqlite3.DatabaseError as exc:  # "file is not a database"
        raise RestoreRefused(f"{source} is not a SQLite database ({exc})") from None
    finally:
        db.close()


@contextlib.contextmanager
def _nobody_in(target: Path) -> Iterator[None]:
    """Hold SQLite's locks on ``target`` (and its ``-shm``) exclusively for the block, or
    refuse at once when any connection has it open (module docstring)."""
    held: list[int] = []
    try:
        for path, start, length in ((target, PENDING_BYTE, LOCK_BYTES),
                                    (Path(f"{target}-shm"), SHM_IN_USE_BYTE, 1)):
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue
            held.append(fd)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start)
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                raise RestoreRefused(
                    f"{target} is in use: stop `pubsched serve` and the tick's timer (or "
                    "cron), then run the restore again; nothing was changed") from None
        yield
    finally:
        for fd in held:
            os.close(fd)  # the locks go with it


# -- PostgreSQL ----------------------------------------------------------------------------

_TABLE_ENTRY = re.compile(r"^\d+; \d+ \d+ TABLE (?P<schema>\S+) (?P<name>\S+) ", re.MULTILINE)
_CREATED = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", re.IGNORECASE)


def _postgresql(url: str, source: Path, confirm: Confirm | None) -> Restored:
    try:
        pgtools.find("pg_restore")
    except pgtools.ToolMissing as exc:
        raise RestoreRefused(str(exc)) from None
    listing = pgtools.run("pg_restore", ["--list", str(source)])
    if listing.returncode != 0:
        raise RestoreRefused(f"{source} is not a pg_dump archive of the custom format that "
                             f"`pubsched backup` makes ({pgtools.last_line(listing.stderr)})")
    dumped = {m.group("name") for m in _TABLE_ENTRY.finditer(listing.stdout)}
    if TABLE not in dumped:
        raise RestoreRefused(f"{source} is not a pubsched backup (no {TABLE} table in it)")
    level, pending = _judge("postgresql", _pg_migrations(source), source)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        others = conn.execute(
            "SELECT count(*), string_agg(DISTINCT coalesce(nullif(application_name, ''), "
            "'a client'), ', ') FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchone()
        if others is not None and others[0]:
            raise RestoreRefused(
                f"the database is in use ({others[0]} other session(s): {others[1]}): stop "
                "`pubsched serve` and the tick's timer (or cron), then run the restore "
                "again; nothing was changed")
        _ask(confirm, _database_name(url), source, level, pending)
        ours = _pubsched_tables()
        live = {str(r[0]) for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        strays = sorted((live & ours) - dumped)
        if strays:  # a newer migration's tables: --clean would leave them behind
            with conn.transaction():
                conn.execute("DROP TABLE IF EXISTS " + ", ".join(strays) + " CASCADE")
    done = pgtools.run("pg_restore", ["--clean", "--if-exists", "--single-transaction",
                                      "--exit-on-error", "--no-owner", "--no-privileges",
                                      str(source)], url)
    if done.returncode != 0:
        dropped = (f"; the tables of newer migrations ({', '.join(strays)}) were already "
                   "dropped" if strays else "")
        raise RestoreFailed(f"pg_restore failed, and its one transaction was rolled back"
                            f"{dropped}: {pgtools.last_line(done.stderr)}; fix the cause and "
                            "run the restore again")
    return Restored(_database_name(url), level, pending)


def _pg_migrations(source: Path) -> dict[str, str]:
    """The migrations table's rows in a dump, read by pg_restore as COPY text."""
    done = pgtools.run("pg_restore", ["--data-only", f"--table={TABLE}", "--file=-",
                                      str(source)])
    if done.returncode != 0:
        raise RestoreRefused(f"{source} does not read back: {pgtools.last_line(done.stderr)}")
    rows: dict[str, str] = {}
    copying = False
    for line in done.stdout.splitlines():
        if line.startswith("COPY ") and f"{TABLE} (" in line:
            columns = line[line.index("(") + 1:line.index(")")].split(", ")
            copying = True
        elif copying and line == "\\.":
            copying = False
        elif copying:
            row = dict(zip(columns, line.split("\t"), strict=False))
            rows[row["version"]] = row["checksum"]
    return rows


def _pubsched_tables() -> set[str]:
    """Every table a migration of this package creates, and the migrations' own."""
    return {TABLE} | {m.group(1).lower() for migration in load("postgresql")
                      for m in _CREATED.finditer(migration.sql)}


def _database_name(url: str) -> str:
    """The database's name as libpq reads it from either form (a cluster's URL too)."""
    from psycopg.conninfo import conninfo_to_dict

    return f"the database {conninfo_to_dict(url).get('dbname') or '(default)'}"


__all__ = ["RestoreFailed", "RestoreRefused", "Restored", "restore"]
