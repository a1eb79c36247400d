"""What one command runs in, and how its outcome becomes an exit code.

Exit codes, which scripts depend on:

===  =====================================================================================
0    the action applied
1    the action ran and failed (SMTP down, a recipient refused: the run stays where it
     was, ``last_error`` set), or the database could not be reached
2    bad usage or bad input (not a Monday, a naive ``--now``, an unknown tender or shift):
     nothing written
3    refused (a lost race, the wrong state, a lease held, an invariant, a tender that
     already exists): the reason on stderr, in one line
===  =====================================================================================

This module is the bottom of the CLI: the commands, the output helpers and the demo import
it, it imports none of them. The pub is opened on first use, so that bad input the parser
found never opens the database.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from ..config import Config
from ..pub import Pub
from ..verdicts import Verdict

EXIT_APPLIED, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3


class Usage(Exception):
    """Bad usage found after parsing (e.g. no database yet): exit 2, nothing written."""


class Runner(Protocol):
    """The command line itself (:func:`pubsched.cli.dispatch.run`), as a command that runs other
    commands (the demo) is handed it: handed, not imported, so the demo never imports the
    module that dispatches to it."""

    def __call__(self, argv: Sequence[str] | None = None, *,
                 environ: Mapping[str, str] | None = None, stdout: IO[str] | None = None,
                 stderr: IO[str] | None = None) -> int: ...


@dataclass
class Context:
    """Where a command writes, which database it opens, and the instant it acts at."""

    db_url: str
    now: datetime | None
    environ: Mapping[str, str]
    stdout: IO[str]
    stderr: IO[str]
    runner: Runner
    stdin: IO[str] | None = None  # where ``--password-stdin`` reads (None: sys.stdin)
    _pub: Pub | None = field(default=None, repr=False)

    def config(self) -> Config:
        return Config.from_env(self.environ, db_url=self.db_url)

    def pub(self) -> Pub:
        """The pub, opened on first use (bad input found by the parser never opens it)."""
        if self._pub is None:
            from ..db.store import open_store

            config = self.config()  # a bad setting is bad input before anything is opened
            _require_schema(self.db_url)
            self._pub = Pub(open_store(self.db_url, read_url=config.db_reads_url), config)
        return self._pub

    def close(self) -> None:
        if self._pub is not None:
            self._pub.close()
            self._pub = None

    def say(self, text: str = "") -> None:
        print(text, file=self.stdout)

    def complain(self, text: str) -> None:
        """One line on stderr: what a script's log shows (newlines would split it)."""
        print(f"pubsched: {' '.join(text.split())}", file=self.stderr)

    def emit_json(self, value: Any) -> None:
        json.dump(value, self.stdout, indent=2, ensure_ascii=False, default=str)
        self.stdout.write("\n")

    def console(self) -> Any:
        from rich.console import Console

        return Console(file=self.stdout, highlight=False, soft_wrap=False)

    def is_tty(self) -> bool:
        isatty = getattr(self.stdout, "isatty", None)
        return bool(isatty and isatty())


MAX_BY = 64


def cli_actor(by: str | None, environ: Mapping[str, str]) -> str:
    """Who a command acts as, in the week's history: ``cli:NAME`` for ``--by NAME``, else
    ``cli:$USER`` (``$LOGNAME``; ``cli:unknown`` when neither is set). A NAME that is empty,
    has spaces or is over 64 characters is bad usage (exit 2, nothing written)."""
    name = by if by is not None else (environ.get("USER") or environ.get("LOGNAME")
                                      or "unknown")
    if not name or len(name) > MAX_BY or not name.isprintable() \
            or any(c.isspace() for c in name):
        raise Usage(f"--by is a name of 1 to {MAX_BY} characters without spaces, "
                    f"got {name!r}")
    return f"cli:{name}"


def _require_schema(url: str) -> None:
    """A database that was never initialised, or is behind the code, is bad usage said as
    such (not a traceback from the first query); a missing SQLite file is not created."""
    from ..db.migrate import status
    from ..db.urls import sqlite_path

    path = sqlite_path(url) if url.startswith("sqlite:") else None
    if path is not None and not os.path.exists(path):
        raise Usage(f"no database at {path}: run `pubsched init` first")
    pending = [version for version, applied in status(url) if not applied]
    if pending:
        raise Usage(f"the database {redacted(url)} lacks migration(s) {', '.join(pending)}: "
                    "run `pubsched init`")


def report(ctx: Context, verdict: Verdict) -> int:
    """A verdict as an exit code: its message on stdout when applied, else one line on
    stderr. An applied send that left recipients uncertain (handed over, no answer) says so
    on a line of its own: the week is SENT and exit 0, but those may never have had it."""
    if verdict.applied:
        ctx.say(verdict.message)
        uncertain = verdict.detail.get("uncertain") if verdict.detail else None
        if uncertain:
            ctx.say(_uncertain_line(list(uncertain), verdict.detail.get("week_of")))
        return EXIT_APPLIED
    if verdict.reason == "RECORD_NOT_FOUND":  # the engine's word for a week never created
        ctx.complain(f"error: no such week ({verdict.message or verdict.reason})")
        return EXIT_USAGE
    if verdict.failed:
        ctx.complain(f"failed: {verdict.message or verdict.failed}")
        return EXIT_FAILED
    ctx.complain(f"refused ({verdict.reason}): {verdict.message or verdict.reason}")
    return EXIT_REFUSED


def _uncertain_line(emails: list[str], week: object) -> str:
    named = ", ".join(emails[:3]) + (f" and {len(emails) - 3} more" if len(emails) > 3 else "")
    where = f"`pubsched week show {week}`" if week else "`pubsched week show`"
    return (f"warning: {len(emails)} recipient(s) uncertain ({named}): handed to the mail "
            "server, which never answered, so they may not have it; not re-sent on their "
            f"own: see {where}, and resend from the week's page in the web admin")


def redacted(url: str) -> str:
    """The URL as it may be printed: a password in it is not (libpq's keyword form too:
    ``host=db1,db2 password=... dbname=pub``)."""
    if "=" in url and not url.startswith(("postgresql:", "postgres:", "sqlite:")):
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        try:
            params = conninfo_to_dict(url)
        except Exception:  # not readable, so not safely redacted: not printed at all
            return "(a PostgreSQL conninfo libpq cannot read)"
        return url if "password" not in params else make_conninfo(url, password="***")
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
