"""``pubsched backup PATH``: a consistent copy of the pub's database, taken while it serves.

* **SQLite**: the online backup API (:meth:`sqlite3.Connection.backup`, all pages in one
  step), which copies one consistent state of the file while the server keeps writing:
  a write that lands during the copy is either all in it or not at all. The copy is then
  checked (``PRAGMA integrity_check``) before it is given its name.
* **PostgreSQL**: ``pg_dump --format=custom`` (one snapshot of the database, whatever
  writes meanwhile), then ``pg_restore --list`` reads it back, when ``pg_restore`` is
  there. Without ``pg_dump`` on PATH the backup is refused, naming what to install: a
  backup that quietly did nothing is the worst kind.

**Never over anything.** The copy is written beside ``PATH`` under a temporary name,
flushed, and only then given ``PATH``, exclusively (:func:`pubsched.db.files.claim`: a hard
link, which fails on a name that exists). A ``PATH`` that exists when the backup starts is
refused at once; one that appears while the copy runs (another backup to the same name, a
file someone put there) is kept, and this backup fails saying so. So of two backups to one
name exactly one succeeds. The file is readable by its owner only (mode 0600): it holds
the tenders' addresses and the operators' password hashes. ``pubsched restore PATH``
(:mod:`pubsched.db.restore`) puts it back.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from . import pgtools
from .files import claim, flush, private_file
from .urls import dialect_of, sqlite_path


class BackupRefused(Exception):
    """Nothing was written: the reason says what to do (the target exists, pg_dump is not
    installed, the database is in memory)."""


class BackupFailed(Exception):
    """The copy was started and did not finish (pg_dump's own error, a disk full, the
    target's name taken meanwhile); nothing of it is left, and nothing under the target's
    name was touched."""


@dataclass(frozen=True)
class Backup:
    path: Path
    size: int
    how: str  # what made it, in words


def backup(url: str, target: Path) -> Backup:
    """Copy the database ``url`` names to ``target`` (module docstring)."""
    if target.exists():
        raise BackupRefused(f"{target} exists already: a backup never overwrites one "
                            "(give a new name, e.g. with the date in it)")
    if not target.parent.is_dir():
        raise BackupRefused(f"{target.parent} is not a directory")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    private_file(partial)  # readable by its owner only from its first byte
    try:
        how = (_sqlite(url, partial) if dialect_of(url) == "sqlite"
               else _postgresql(url, partial))
        flush(partial)
        claim(partial, target)
    except FileExistsError:
        raise BackupFailed(f"{target} was created by someone else while this backup ran "
                           "(another backup to the same name?): it is kept as it is, and "
                           "this backup was not written; run it again with a new "
                           "name") from None
    finally:
        partial.unlink(missing_ok=True)
    return Backup(target, target.stat().st_size, how)


def _sqlite(url: str, partial: Path) -> str:
    path = sqlite_path(url)
    if path is None:
        raise BackupRefused("an in-memory database lives only in its process: nothing to "
                            "back up")
    if not Path(path).is_file():
        raise BackupRefused(f"there is no database at {path}")
    source = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
    copy = sqlite3.connect(partial)
    try:
        source.backup(copy)  # pages=-1: every page in one step, one consistent state
        (verdict,) = copy.execute("PRAGMA integrity_check").fetchone()
    finally:
        copy.close()
        source.close()
    if verdict != "ok":
        raise BackupFailed(f"the copy failed its integrity check: {verdict}")
    return "SQLite's online backup, integrity checked"


def _postgresql(url: str, partial: Path) -> str:
    try:
        pgtools.find("pg_dump")
    except pgtools.ToolMissing as exc:
        raise BackupRefused(str(exc)) from None
    done = pgtools.run("pg_dump", ["--format=custom", f"--file={partial}"], url)
    if done.returncode != 0:
        raise BackupFailed(f"pg_dump failed: {pgtools.last_line(done.stderr)}")
    try:
        read = pgtools.run("pg_restore", ["--list", str(partial)])
    except pgtools.ToolMissing:
        return "pg_dump (custom format)"
    if read.returncode != 0:
        raise BackupFailed(f"the dump does not read back: {pgtools.last_line(read.stderr)}")
    return "pg_dump (custom format), read back by pg_restore --list"


__all__ = ["Backup", "BackupFailed", "BackupRefused", "backup"]
