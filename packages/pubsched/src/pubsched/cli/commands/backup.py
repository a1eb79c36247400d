"""``pubsched backup PATH``: a consistent copy of the database while it serves
(:mod:`pubsched.db.backup`: SQLite's online backup API, or ``pg_dump`` in custom format).
Refused (exit 3, nothing written): the path exists, ``pg_dump`` is not installed, the
database is in memory. Failed (exit 1, nothing left under PATH): the copy did not finish."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..context import EXIT_APPLIED, EXIT_FAILED, EXIT_REFUSED, Context, redacted


def cmd_backup(ctx: Context, args: argparse.Namespace) -> int:
    from ...db.backup import BackupFailed, BackupRefused, backup

    try:
        made = backup(ctx.db_url, Path(args.path))
    except BackupRefused as exc:
        ctx.complain(f"no backup made: {exc}")
        return EXIT_REFUSED
    except BackupFailed as exc:
        ctx.complain(f"backup failed: {exc}")
        return EXIT_FAILED
    except OSError as exc:  # a folder not writable, a disk full
        ctx.complain(f"backup failed: {exc.strerror or exc}: {exc.filename}; nothing was "
                     "written under the backup's name")
        return EXIT_FAILED
    ctx.say(f"backed up {redacted(ctx.db_url)} to {made.path} ({_size(made.size)}): "
            f"{made.how}")
    return EXIT_APPLIED


def _size(n: int) -> str:
    return f"{n / 1024:.0f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"
