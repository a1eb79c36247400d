"""``pubsched backup PATH``: a consistent copy of the pub's database, taken while it serves.

* **SQLite**: the online backup API (:meth:`sqlite3.Connection.backup`, all pages in one
  step), which copies one consistent state of the file while the server keeps writing:
  a write that lands during the copy is either all in it or not at all. The copy is then
  checked (``PRAGMA integrity_check``) before it is given its name.
* **PostgreSQL**: ``pg_dump --format=custom`` (one snapshot of the database, whatever
  writes meanwhile), then ``pg_restore --list`` reads it back, when ``pg_restore`` is
  there. Without ``pg_dump`` on PATH the backup is refused, naming what to install: a
  backup that quietly did nothing is the worst kind.

Either way the copy is written beside ``PATH`` under a temporary name and renamed onto it
only once it is whole and checked, so a crash or a full disk never leaves a half backup
under the name a restore would trust; an existing ``PATH`` is never overwritten. The file
is readable by its owner only (mode 0600): it holds the tenders' addresses and the
operators' password hashes. The
restore is documented in docs/pubsched.md ("Backups"): the file copied back (SQLite), or
``pg_restore`` into a new database (PostgreSQL); ``pubsched init`` then brings an older
backup's schema up to date.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from .urls import dialect_of, sqlite_path

PG_TIMEOUT = 3600  # a dump of a pub's database takes seconds; an hour means it hangs


class BackupRefused(Exception):
    """Nothing was written: the reason says what to do (the target exists, pg_dump is not
    installed, the database is in memory)."""


class BackupFailed(Exception):
    """The copy was started and did not finish (pg_dump's own error, a disk full); nothing
    is left under the target's name."""


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
    # readable by its owner only from its first byte: it holds everything the pub knows
    os.close(os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    try:
        how = (_sqlite(url, partial) if dialect_of(url) == "sqlite"
               else _postgresql(url, partial))
        os.replace(partial, target)
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
    dump = shutil.which("pg_dump")
    if dump is None:
        raise BackupRefused("pg_dump is not installed: install PostgreSQL's client tools "
                            "(Debian: apt install postgresql-client, of the server's major "
                            "version or newer) and run the backup again")
    where, password = _without_password(url)
    env = dict(os.environ)
    if password is not None:  # not in the arguments, which every process listing shows
        env["PGPASSWORD"] = password
    done = subprocess.run([dump, "--format=custom", "--no-password", f"--file={partial}",
                           f"--dbname={where}"], capture_output=True, text=True, env=env,
                          timeout=PG_TIMEOUT)
    if done.returncode != 0:
        raise BackupFailed(f"pg_dump failed: {_last_line(done.stderr)}")
    listing = shutil.which("pg_restore")
    if listing is None:
        return "pg_dump (custom format)"
    read = subprocess.run([listing, "--list", str(partial)], capture_output=True, text=True,
                          timeout=PG_TIMEOUT)
    if read.returncode != 0:
        raise BackupFailed(f"the dump does not read back: {_last_line(read.stderr)}")
    return "pg_dump (custom format), read back by pg_restore --list"


def _without_password(url: str) -> tuple[str, str | None]:
    """The URL with its password taken out, and the password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}{port}")), unquote(parts.password)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


__all__ = ["Backup", "BackupFailed", "BackupRefused", "backup"]
