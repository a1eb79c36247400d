"""``pubsched [--db URL] COMMAND ...``: parse, open the context, run the command's handler,
and turn what escaped it into an exit code (:mod:`.context` lists them).

This is the top of the CLI: it imports the parser (and through it every command), and
nothing in the CLI imports it back; the demo, which runs commands, is handed :func:`run`
through the context.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from typing import IO, NoReturn

import rowstate

from ..context import acting_as
from ..db.urls import configured_url, sqlite_path
from ..mail.settings import MailConfigError
from ..verdicts import BadInput
from .context import EXIT_FAILED, EXIT_USAGE, Context, Usage, cli_actor
from .parser import Handler, build_parser


def run(argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None,
        stdout: IO[str] | None = None, stderr: IO[str] | None = None,
        stdin: IO[str] | None = None) -> int:
    """Run one command and return its exit code (``main`` exits with it); the demo and the
    tests call this with their own environment and streams. Every move the command makes
    records who made it (:func:`.context.cli_actor`)."""
    env = os.environ if environ is None else environ
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or bad usage (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    import psycopg

    from ..db.migrate import MigrationError
    from ..db.urls import DatabaseURLError, dialect_of

    ctx = Context(args.db or configured_url(env), args.now, env, out, err, runner=run,
                  stdin=stdin)
    handler: Handler = args.handler
    try:
        if getattr(args, "checks_db_url", True):
            dialect_of(ctx.db_url)
        # serve's requests and ticks say who they are themselves, not the shell's user
        actor = cli_actor(args.by, env) if getattr(args, "acts_as_cli", True) else None
        with acting_as(actor):
            return handler(ctx, args)
    except (BadInput, MailConfigError, DatabaseURLError, Usage) as exc:
        ctx.complain(f"error: {exc}")
        return EXIT_USAGE
    except (rowstate.StoreError, psycopg.Error, sqlite3.Error, MigrationError) as exc:
        # sqlite3's own errors too: a file that is not a database, a directory that is not
        ctx.complain(f"database error: {exc}{_where(ctx.db_url, exc)}")
        return EXIT_FAILED
    finally:
        ctx.close()


def _where(url: str, exc: Exception) -> str:
    """SQLite's messages do not name the file ("unable to open database file"): add it."""
    path = sqlite_path(url) if isinstance(exc, sqlite3.Error) else None
    return f" ({path})" if path else ""


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``pubsched`` console script (and ``python -m pubsched``)."""
    try:
        code = run(argv)
        sys.stdout.flush()
    except BrokenPipeError:  # `pubsched weeks --json | head`: the reader has gone
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = EXIT_FAILED
    except KeyboardInterrupt:  # Ctrl-C: a side effect in flight keeps its lease until TTL
        print("pubsched: interrupted", file=sys.stderr)
        code = 130
    raise SystemExit(code)
