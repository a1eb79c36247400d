"""The pub's SQLite database is readable by its owner only (issue 29, item 8): the file,
its ``-wal`` and ``-shm`` are created 0600 whatever the umask lets through (an ordinary
022 here, which gave 0644 before), the folder ``init`` makes 0700, and ``init`` tightens an
older install's 0644 files, saying so."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pubsched.config import Config
from pubsched.db import open_store
from pubsched.people import tenders
from pubsched.pub import Pub

PUBSCHED = Path(sys.executable).parent / "pubsched"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def init(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PUBSCHED), "--db", url, "init"], capture_output=True,
                          text=True, timeout=120, preexec_fn=lambda: os.umask(0o022))


def test_init_makes_a_private_folder_and_file_and_sqlite_follows_for_its_logs(
        tmp_path: Path) -> None:
    folder = tmp_path / "var" / "pubsched"
    path = folder / "pub.db"
    done = init(f"sqlite:///{path}")
    assert done.returncode == 0, done.stderr
    assert mode(folder) == 0o700 and mode(path) == 0o600
    with umask(0o022):  # a server writing: SQLite makes the -wal and -shm now
        pub = Pub(open_store(f"sqlite:///{path}"), Config(db_url=f"sqlite:///{path}"))
        try:
            assert tenders.add(pub, "Ann", "ann@pub.test")
            logs = [Path(f"{path}-wal"), Path(f"{path}-shm")]
            assert {p.name: mode(p) for p in logs} == {"pub.db-wal": 0o600,
                                                       "pub.db-shm": 0o600}
        finally:
            pub.close()


def test_a_store_opened_on_a_new_file_makes_it_private(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    with umask(0o022):
        open_store(url, migrate=True).close()
    assert mode(tmp_path / "new.db") == 0o600


def test_init_tightens_an_older_installs_readable_files(tmp_path: Path) -> None:
    path = tmp_path / "pub.db"
    url = f"sqlite:///{path}"
    assert init(url).returncode == 0
    os.chmod(path, 0o644)  # as an install from before this rule has it
    done = init(url)
    assert done.returncode == 0, done.stderr
    assert mode(path) == 0o600
    assert f"{path} could be read by other users of this machine: made readable by its " \
           "owner only (mode 0600)" in done.stdout
    assert "could be read" not in init(url).stdout  # once


@pytest.mark.parametrize("made", ["backup", "restore"])
def test_a_backup_and_a_restored_database_are_private(tmp_path: Path, made: str) -> None:
    url = f"sqlite:///{tmp_path / 'pub.db'}"
    assert init(url).returncode == 0
    copy = tmp_path / "copy.backup"
    subprocess.run([str(PUBSCHED), "--db", url, "backup", str(copy)], check=True,
                   capture_output=True, preexec_fn=lambda: os.umask(0o022))
    if made == "restore":
        os.chmod(tmp_path / "pub.db", 0o644)
        subprocess.run([str(PUBSCHED), "--db", url, "restore", str(copy), "--yes"],
                       check=True, capture_output=True, preexec_fn=lambda: os.umask(0o022))
    assert mode(copy if made == "backup" else tmp_path / "pub.db") == 0o600
