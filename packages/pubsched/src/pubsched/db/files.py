"""The pub's database and its copies as files on disk: readable by their owner only, and
given their final name only once they are whole.

* **Private from the first byte.** A SQLite database holds the tenders' addresses and the
  operators' password hashes. :func:`create_database` makes the file with mode 0600 before
  SQLite opens it (SQLite then gives its ``-wal`` and ``-shm`` the main file's mode, so
  they are 0600 too), and a folder it has to make, 0700. A backup or a restore's copy is
  made the same way (:func:`private_file`).
* **Whole or absent.** A copy is written beside its target under a temporary name and
  flushed to the disk (:func:`flush`) before it takes the target's name: a crash or a full
  disk leaves a stray temporary file, never a half copy under a name someone trusts.
  :func:`claim` gives the name only if nobody holds it (a hard link fails on an existing
  name, atomically), so nothing already there is ever replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700


def private_file(path: Path) -> None:
    """Create ``path``, empty, mode 0600; an existing one raises ``FileExistsError``."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)  # whatever the umask
    finally:
        os.close(fd)


def create_database(path: Path, *, make_folder: bool = False) -> None:
    """The SQLite file at ``path``, created empty with mode 0600 if it is missing (an empty
    file is an empty database to SQLite); an existing one is left as it is. With
    ``make_folder`` (``pubsched init``) a missing folder is made too, mode 0700."""
    folder = path.parent
    if not folder.exists():
        if not make_folder:
            return  # SQLite's own "unable to open database file" says it, as before
        folder.mkdir(mode=PRIVATE_FOLDER, parents=True, exist_ok=True)
        os.chmod(folder, PRIVATE_FOLDER)  # mkdir's mode is cut by the umask
    with contextlib.suppress(FileExistsError):
        private_file(path)


def tighten(path: Path) -> list[Path]:
    """The database file and its ``-wal``/``-shm`` made 0600 where others could read them
    (an install from before this rule); the files changed (``pubsched init`` says which)."""
    changed = []
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError):
            if file.stat().st_mode & 0o077:
                os.chmod(file, PRIVATE_FILE)
                changed.append(file)
    return changed


def flush(path: Path) -> None:
    """``path``'s bytes on the disk, not only in the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def flush_folder(folder: Path) -> None:
    """A rename or a link in ``folder`` on the disk (the folder's entry is data too)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def claim(partial: Path, target: Path) -> None:
    """Give the flushed ``partial`` the name ``target``, only if nobody holds that name:
    ``FileExistsError`` when someone does (their file is kept). ``partial`` is gone after,
    either way. On a file system without hard links the target is created exclusively
    (``O_EXCL``) and the bytes copied into it."""
    try:
        try:
            os.link(partial, target)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            _copy_exclusively(partial, target)
        flush_folder(target.parent)
    finally:
        partial.unlink(missing_ok=True)


def _copy_exclusively(partial: Path, target: Path) -> None:
    private_file(target)  # the claim: raises FileExistsError when the name is taken
    try:
        with open(partial, "rb") as src, open(target, "r+b") as dst:
            shutil.copyfileobj(src, dst)
            dst.flush()
            os.fsync(dst.fileno())
    except BaseException:
        target.unlink(missing_ok=True)
        raise


__all__ = ["claim", "create_database", "flush", "flush_folder", "private_file", "tighten"]
