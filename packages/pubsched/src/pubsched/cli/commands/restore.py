"""``pubsched restore PATH [--yes]``: a ``pubsched backup`` put back as the pub's database,
whole (:mod:`pubsched.db.restore`: SQLite's file with its ``-wal`` and ``-shm`` replaced
together while nobody has it open; PostgreSQL: ``pg_restore --clean`` in one transaction).

It destroys what the database holds now, so it asks first, on a terminal; not on one (a
script, a pipe) it refuses unless ``--yes`` says the question was answered. Exit 0
restored; 2 bad usage (no terminal and no ``--yes``); 3 refused, nothing changed (not a
pubsched backup, newer than the code, the database in use, not confirmed); 1 failed
midway (the message says where things stand)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..context import EXIT_APPLIED, EXIT_FAILED, EXIT_REFUSED, Context, Usage


def cmd_restore(ctx: Context, args: argparse.Namespace) -> int:
    from ...db.restore import RestoreFailed, RestoreRefused, restore

    stdin = ctx.stdin if ctx.stdin is not None else sys.stdin
    isatty = getattr(stdin, "isatty", None)
    if not args.yes and not (isatty and isatty()):
        raise Usage("restore replaces the whole database: run it on a terminal to be asked, "
                    "or add --yes; nothing was restored")

    def confirm(question: str) -> bool:
        print(f"{question}\nType yes to restore: ", end="", file=ctx.stderr, flush=True)
        return stdin.readline().strip().lower() == "yes"

    try:
        done = restore(ctx.db_url, Path(args.path), confirm=None if args.yes else confirm)
    except RestoreRefused as exc:
        ctx.complain(f"not restored: {exc}")
        return EXIT_REFUSED
    except RestoreFailed as exc:
        ctx.complain(f"restore failed: {exc}")
        return EXIT_FAILED
    except OSError as exc:  # a folder not writable, a directory where the file should be
        ctx.complain(f"restore failed: {exc.strerror or exc}: {exc.filename}; the database "
                     "was not replaced")
        return EXIT_FAILED
    ctx.say(f"restored {done.target} from {args.path}, at migration {done.level}")
    if done.pending:
        ctx.say(f"the backup is older than this code: run `pubsched init` to apply "
                f"{', '.join(done.pending)} before starting the service")
    return EXIT_APPLIED
