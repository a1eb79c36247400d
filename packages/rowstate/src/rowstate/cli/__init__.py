"""The ``rowstate`` command (and ``python -m rowstate``): ``diagram``, ``inspect``, ``stuck``.

Exit codes, which scripts depend on:

===  =====================================================================================
0    done: the row was found (inspect); nothing is stuck (stuck)
1    the database failed (unreachable, a missing table): one line on stderr saying what;
     or the reader of stdout left early (``| head``)
2    bad usage or bad input (a URL, a MODULE:ATTR, a key, Django's settings), or no row
     has the key
3    ``stuck`` listed something: a cron job or a monitor alerts on it (the report is on
     stdout as for 0)
===  =====================================================================================

Every failure is one line on stderr, never a traceback (bad usage is argparse's: its
message and exit 2, raised as ``SystemExit`` by :func:`main`). The commands only read:
inspect and stuck run in a read-only unit of work.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO

from ..errors import DefinitionError, RowstateError, UsageError, ValidationError
from .parser import parser
from .stuck import EXIT_STUCK
from .targets import BadInput

EXIT_OK, EXIT_DATABASE, EXIT_USAGE = 0, 1, 2


def main(argv: Sequence[str] | None = None, *, stdout: IO[str] | None = None,
         stderr: IO[str] | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = parser().parse_args(argv)  # bad usage: argparse's message and exit 2
    try:
        code: int = args.run(args, out)
        return code
    except BadInput as exc:
        err.write(f"rowstate {args.command}: {exc}\n")
        return EXIT_USAGE
    except (ValidationError, UsageError, DefinitionError) as exc:
        err.write(f"rowstate {args.command}: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:  # `| head`: the reader left; no traceback for it
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_DATABASE
    except RowstateError as exc:  # the database's: StoreError, ConnectionLostError, ...
        err.write(f"rowstate {args.command}: database error ({type(exc).__name__}): "
                  f"{_one_line(exc)}\n")
        return EXIT_DATABASE


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


__all__ = ["EXIT_DATABASE", "EXIT_OK", "EXIT_STUCK", "EXIT_USAGE", "main"]
