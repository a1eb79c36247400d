"""The operator's command line: ``pubsched [--db URL] COMMAND ...`` (docs/cli.md).

A thin front end. It parses, opens the pub, calls one domain function and turns what that
function said into an exit code and a line of output; it decides nothing about weeks,
tenders or mail. Every week action is a row of the one table of actions and goes through
:func:`pubsched.engines.actions.perform`, the same code the web buttons run, so the CLI and
the admin can never disagree about what is legal.
``--json`` output goes to stdout alone, with no progress, colour or chatter mixed in.

The parts, each importing only those listed after it::

    dispatch     run() and main(): parse, dispatch, exit codes      -> parser, context
    parser       the surface of docs/cli.md                          -> commands, arguments
    commands/    weeks, tenders, cutover, service: one handler each  -> output, context, demo
    demo         the narrated week, run through a handed Runner      -> context
    output       listings, a week, the spinner (rich)                -> context
    arguments    the parser's checks (instant, week, whole)
    context      Context, exit codes, report(), redacted()

This package re-exports the names callers use (``main``, ``run``, ``redacted``,
``build_parser``, the exit codes) and :func:`run_demo`, the demo bound to :func:`run`.
"""

from __future__ import annotations

from datetime import datetime
from typing import IO

from . import demo as _demo
from .context import EXIT_APPLIED, EXIT_FAILED, EXIT_REFUSED, EXIT_USAGE, Context, Usage, redacted
from .dispatch import main, run
from .parser import build_parser

__all__ = ["EXIT_APPLIED", "EXIT_FAILED", "EXIT_REFUSED", "EXIT_USAGE",
           "Context", "Usage", "build_parser", "main", "redacted", "run", "run_demo"]


def run_demo(out: IO[str], *, now: datetime | None = None, directory: str | None = None) -> int:
    """``pubsched demo`` without the parser: the narrated week, each step run through
    :func:`run`; exit 0 when every step did what the story says, 1 otherwise."""
    return _demo.run_demo(out, run=run, now=now, directory=directory)
