"""The operator's command line: ``pubsched [--db URL] COMMAND ...`` (docs/cli.md).

A thin front end. It parses, opens the pub, calls one domain function and turns what that
function said into an exit code and a line of output; it decides nothing about weeks,
tenders or mail. Every week action goes through :func:`pubsched.actions.perform`, the same
code the web buttons run, so the CLI and the admin can never disagree about what is legal.

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

What can be checked without the database (a WEEK that is not a Monday, a time with no
offset, a shift id that is not a number) is checked by the parser, before the database is
opened at all; the domain checks the rest (an unknown tender or shift) before it writes.
``--json`` output goes to stdout alone, with no progress, colour or chatter mixed in.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import rowstate

from .db.urls import DEFAULT_URL as DEFAULT_DB
from .mail.settings import MailConfigError
from .pub import BadInput, Config, Pub, Verdict

EXIT_APPLIED, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3
WEEK_ACTIONS = ("open", "close", "generate", "reopen", "approve", "unapprove", "send")


class Usage(Exception):
    """Bad usage found after parsing (e.g. no database yet): exit 2, nothing written."""


# -- what the parser checks before anything is opened ------------------------------------


def instant(text: str) -> datetime:
    """An ISO 8601 instant with an offset or ``Z``; a naive time is refused, because the
    same wall time names different instants in the pub's zone and on the operator's."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no offset: give the instant with Z or +HH:MM") from None
    return value.astimezone(UTC)


def week(text: str) -> str:
    """The Monday's ISO date (anything else is bad input before the database is opened)."""
    from .weeks import week_key

    try:
        return week_key(text)
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


# -- the context one command runs in -------------------------------------------------------


@dataclass
class Context:
    """Where a command writes, which database it opens, and the instant it acts at."""

    db_url: str
    now: datetime | None
    environ: Mapping[str, str]
    stdout: IO[str]
    stderr: IO[str]
    _pub: Pub | None = field(default=None, repr=False)

    def config(self) -> Config:
        return Config.from_env(self.environ, db_url=self.db_url)

    def pub(self) -> Pub:
        """The pub, opened on first use (bad input found by the parser never opens it)."""
        if self._pub is None:
            from .db import open_store

            config = self.config()  # a bad setting is bad input before anything is opened
            _require_schema(self.db_url)
            self._pub = Pub(open_store(self.db_url), config)
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


def _require_schema(url: str) -> None:
    """A database that was never initialised, or is behind the code, is bad usage said as
    such (not a traceback from the first query); a missing SQLite file is not created."""
    from .db import sqlite_path
    from .db.migrate import status

    path = sqlite_path(url) if url.startswith("sqlite:") else None
    if path is not None and not os.path.exists(path):
        raise Usage(f"no database at {path}: run `pubsched init` first")
    pending = [version for version, applied in status(url) if not applied]
    if pending:
        raise Usage(f"the database {redacted(url)} lacks migration(s) {', '.join(pending)}: "
                    "run `pubsched init`")


def report(ctx: Context, verdict: Verdict) -> int:
    """A verdict as an exit code: its message on stdout when applied, else one line on
    stderr."""
    if verdict.applied:
        ctx.say(verdict.message)
        return EXIT_APPLIED
    if verdict.reason == "RECORD_NOT_FOUND":  # the engine's word for a week never created
        ctx.complain(f"error: no such week ({verdict.message or verdict.reason})")
        return EXIT_USAGE
    if verdict.failed:
        ctx.complain(f"failed: {verdict.message or verdict.failed}")
        return EXIT_FAILED
    ctx.complain(f"refused ({verdict.reason}): {verdict.message or verdict.reason}")
    return EXIT_REFUSED


@contextmanager
def progress(ctx: Context, text: str) -> Iterator[None]:
    """A spinner on a terminal around a long operation; nothing at all otherwise (a pipe, a
    file, ``--json``), so that scripts read only the result."""
    if not ctx.is_tty():
        yield
        return
    with ctx.console().status(text):
        yield


# -- commands ------------------------------------------------------------------------------


def cmd_init(ctx: Context, args: argparse.Namespace) -> int:
    from .db.migrate import migrate

    applied = migrate(ctx.db_url)
    where = redacted(ctx.db_url)
    if applied:
        ctx.say(f"applied {len(applied)} migration(s) to {where}: {', '.join(applied)}")
    else:
        ctx.say(f"{where} is up to date")
    return EXIT_APPLIED


def cmd_tender_add(ctx: Context, args: argparse.Namespace) -> int:
    from . import tenders

    return report(ctx, tenders.add(ctx.pub(), args.name, args.email,
                                   max_shifts=args.max_shifts, now=ctx.now))


def cmd_tender_deactivate(ctx: Context, args: argparse.Namespace) -> int:
    from . import tenders

    return report(ctx, tenders.deactivate(ctx.pub(), args.email))


def cmd_tender_list(ctx: Context, args: argparse.Namespace) -> int:
    from . import tenders

    found = [t.as_json() for t in tenders.all_tenders(ctx.pub())]
    return _listing(ctx, args, found, "no tenders yet: add one with `pubsched tender add "
                    "NAME EMAIL`", ("id", "name", "email", "active", "max shifts"),
                    lambda t: (str(t["id"]), t["name"], t["email"],
                               "yes" if t["active"] else "no",
                               "" if t["max_shifts"] is None else str(t["max_shifts"])))


def _listing(ctx: Context, args: argparse.Namespace, found: list[dict[str, Any]],
             empty: str, headers: tuple[str, ...],
             row: Callable[[dict[str, Any]], tuple[str, ...]]) -> int:
    """A list command's answer: JSON with ``--json``, else a hint when there is nothing,
    else a table (rich is imported only here: ``--json`` and scripts never load it)."""
    if args.json:
        ctx.emit_json(found)
        return EXIT_APPLIED
    if not found:
        ctx.say(empty)
        return EXIT_APPLIED
    from rich.table import Table

    table = Table(*headers, box=None)
    for item in found:
        table.add_row(*row(item))
    ctx.console().print(table)
    return EXIT_APPLIED


def cmd_tender_link(ctx: Context, args: argparse.Namespace) -> int:
    from . import links, tenders

    pub = ctx.pub()
    tender = tenders.get(pub, args.email)
    if not tender.active:
        raise BadInput(f"{tender.email} is not an active tender: their link would not work")
    ctx.say(links.tender_url(pub.config, tender.id, tender.link_version,
                             base_url=args.base_url))
    return EXIT_APPLIED


def cmd_flag(ctx: Context, args: argparse.Namespace) -> int:
    from .engines.cutover import flip

    return report(ctx, flip(ctx.pub(), args.value == "on", force=args.force, now=ctx.now))


def cmd_cutover_check(ctx: Context, args: argparse.Namespace) -> int:
    from .engines.cutover import cutover_check

    check = cutover_check(ctx.pub(), ctx.now)
    if check.idle:
        ctx.say("the idle gap: no week in flight and no lease live; the flag may be flipped")
        return EXIT_APPLIED
    ctx.complain(f"refused (NOT_IDLE): not the idle gap: {'; '.join(check.reasons)}")
    return EXIT_REFUSED


def cmd_week_action(ctx: Context, args: argparse.Namespace) -> int:
    from .engines.actions import perform

    pub = ctx.pub()
    if args.action != "send":
        return report(ctx, perform(pub, args.action, args.week, now=ctx.now))
    if ctx.is_tty():
        from .view import week_show

        people = {e for s in week_show(pub, args.week)["shifts"] for e in s["assigned"]}
        text = f"sending the schedule of week {args.week} to {len(people)} tender(s)..."
    else:
        text = ""
    with progress(ctx, text):
        verdict = perform(pub, "send", args.week, now=ctx.now)
    return report(ctx, verdict)


def cmd_week_extend(ctx: Context, args: argparse.Namespace) -> int:
    from .engines.actions import perform

    return report(ctx, perform(ctx.pub(), "extend", args.week, now=ctx.now,
                               deadline=args.deadline))


def cmd_week_autopilot(ctx: Context, args: argparse.Namespace) -> int:
    from .engines.actions import perform

    return report(ctx, perform(ctx.pub(), "autopilot", args.week, on=args.value == "on",
                               now=ctx.now))


def cmd_week_show(ctx: Context, args: argparse.Namespace) -> int:
    from .view import week_show

    shown = week_show(ctx.pub(), args.week)
    if args.json:
        ctx.emit_json(shown)
    else:
        print_week(ctx.console(), shown)
    return EXIT_APPLIED


def cmd_weeks(ctx: Context, args: argparse.Namespace) -> int:
    from .view import weeks_list

    return _listing(ctx, args, weeks_list(ctx.pub()),
                    "no weeks yet: open one with `pubsched week open MONDAY`",
                    ("week", "state", "legacy status", "autopilot", "deadline (UTC)"),
                    lambda w: (w["week_of"], w["state"], str(w["legacy_status"]),
                               "on" if w["autopilot"] else "off", w["deadline_at"] or ""))


def cmd_avail(ctx: Context, args: argparse.Namespace) -> int:
    from .submissions import submit

    return report(ctx, submit(ctx.pub(), args.week, args.email, args.shift_ids,
                              max_shifts=args.max, now=ctx.now))


def cmd_tick(ctx: Context, args: argparse.Namespace) -> int:
    """The every-minute cron's work, once. A refusal inside a tick is normal (another
    instance got there first) and is not an error; a failure (a nudge SMTP refused) is."""
    from .tick import tick

    verdicts = tick(ctx.pub(), ctx.now)
    if not verdicts:
        ctx.say("tick: nothing due")
    failed = False
    for v in verdicts:
        if v.failed:
            failed = True
            ctx.complain(f"failed: {v.message or v.failed}")
        elif v.applied:
            ctx.say(v.message)
        else:
            ctx.say(f"skipped ({v.reason}): {v.message}")
    return EXIT_FAILED if failed else EXIT_APPLIED


def cmd_demo(ctx: Context, args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(ctx.stdout, now=ctx.now)


def cmd_serve(ctx: Context, args: argparse.Namespace) -> int:
    try:
        from pubsched.web.serve import main as serve_main  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise Usage("the web admin is not installed in this environment "
                    f"(pubsched.web.serve: {exc}); the CLI works without it") from None
    serve_main(args.host, args.port, ctx.config())
    return EXIT_APPLIED


def redacted(url: str) -> str:
    """The URL as it may be printed: a password in it is not."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


# -- rendering ----------------------------------------------------------------------------


def roster_table(shown: Mapping[str, Any]) -> Any:
    """The week's shifts with who works them and the slots left empty."""
    from rich.table import Table

    table = Table("id", "shift", "slots", "assigned", box=None)
    for s in shown["shifts"]:
        names = list(s["assigned"])
        empty = max(0, int(s["slots"]) - len(names))
        table.add_row(str(s["id"]), s["label"], str(s["slots"]),
                      ", ".join(names + ["(unfilled)"] * empty) if names or empty else "")
    return table


def print_week(console: Any, shown: Mapping[str, Any]) -> None:
    from rich.table import Table

    console.print(f"week {shown['week_of']}: {shown['state']} "
                  f"(legacy status {shown['legacy_status']}, {shown.get('engine', '')} engine, "
                  f"autopilot {'on' if shown['autopilot'] else 'off'})")
    console.print(f"  form opens {shown['opens_at']}, deadline {shown['deadline_at']}")
    if shown.get("lease"):
        console.print(f"  in flight: {shown['lease']['kind']} since {shown['lease']['since']}")
    if shown["last_error"]:
        console.print(f"  last error: {shown['last_error']}")
    console.print(roster_table(shown))
    if shown["unfilled"]:
        console.print(f"  {shown['unfilled']} slot(s) unfilled")
    if shown["submissions"]:
        subs = Table("submitted by", "shift ids", "max", box=None)
        for s in shown["submissions"]:
            subs.add_row(s["email"], " ".join(str(i) for i in s["shift_ids"]),
                         "" if s["max"] is None else str(s["max"]))
        console.print(subs)
    if shown["deliveries"]:
        sent = Table("delivery to", "status", "error", box=None)
        for d in shown["deliveries"]:
            sent.add_row(d["email"], d["status"], d.get("error") or "")
        console.print(sent)
    if shown["history"]:
        past = Table("when", "edge", "from", "to", "by", box=None)
        for h in shown["history"]:
            past.add_row(str(h["at"]), str(h["edge"]), str(h["from"] or "[*]"), str(h["to"]),
                         str(h["by"] or ""))
        console.print(past)


# -- the parser ----------------------------------------------------------------------------

Handler = Callable[[Context, argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The exact surface of docs/cli.md. ``--db`` and ``--now`` are accepted before the
    command and after it (the later one wins)."""
    parser = argparse.ArgumentParser(
        prog="pubsched", description="The pub scheduler's operator command line.",
        epilog="exit codes: 0 applied, 1 ran and failed, 2 bad usage or input "
               "(nothing written), 3 refused (the reason on stderr)")
    parser.add_argument("--db", metavar="URL", default=None,
                        help=f"database URL (default $PUBSCHED_DB, else {DEFAULT_DB})")
    parser.add_argument("--now", metavar="ISO", type=instant, default=None,
                        help="the instant to act at, with an offset or Z (default: now)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", metavar="URL", default=argparse.SUPPRESS,
                        help="database URL (as before the command)")
    common.add_argument("--now", metavar="ISO", type=instant, default=argparse.SUPPRESS,
                        help="the instant to act at, with an offset or Z (default: now)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def leaf(group: Any, name: str, handler: Handler, text: str,
             **defaults: Any) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = group.add_parser(name, parents=[common], help=text,
                                                        description=text)
        sub.set_defaults(handler=handler, **defaults)
        return sub

    def json_flag(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--json", action="store_true",
                         help="print JSON (the shape in docs/cli.md)")

    leaf(commands, "init", cmd_init, "create or upgrade the database (migrations)")

    tender = commands.add_parser("tender", help="add, deactivate, list tenders; their links")
    tenders = tender.add_subparsers(dest="tender_command", metavar="ACTION", required=True)
    add = leaf(tenders, "add", cmd_tender_add, "add a tender (an email once, in any case)")
    add.add_argument("name", metavar="NAME")
    add.add_argument("email", metavar="EMAIL")
    add.add_argument("--max-shifts", metavar="N", type=whole, default=None,
                     help="at most N shifts a week")
    leaf(tenders, "deactivate", cmd_tender_deactivate,
         "deactivate a tender (kept for history; their link stops working)"
         ).add_argument("email", metavar="EMAIL")
    json_flag(leaf(tenders, "list", cmd_tender_list, "every tender"))
    link = leaf(tenders, "link", cmd_tender_link, "the tender's signed personal link")
    link.add_argument("email", metavar="EMAIL")
    link.add_argument("--base-url", metavar="URL", default=None,
                      help="the site's address (default $PUBSCHED_BASE_URL)")

    flag = leaf(commands, "flag", cmd_flag,
                "turn the v2 engine on or off (refused outside the idle gap unless --force)")
    flag.add_argument("name", choices=["v2"], metavar="v2")
    flag.add_argument("value", choices=["on", "off"], metavar="on|off")
    flag.add_argument("--force", action="store_true", help="flip outside the idle gap")

    cutover = commands.add_parser("cutover", help="the cutover's idle-gap check")
    checks = cutover.add_subparsers(dest="cutover_command", metavar="ACTION", required=True)
    leaf(checks, "check", cmd_cutover_check,
         "is this the idle gap (exit 0), or why not (exit 3)")

    week_parser = commands.add_parser("week", help="act on one week (WEEK: its Monday)")
    actions = week_parser.add_subparsers(dest="week_command", metavar="ACTION", required=True)
    for name in WEEK_ACTIONS:
        leaf(actions, name, cmd_week_action, f"{name} the week", action=name
             ).add_argument("week", metavar="WEEK", type=week)
    extend = leaf(actions, "extend", cmd_week_extend, "move the week's deadline")
    extend.add_argument("week", metavar="WEEK", type=week)
    extend.add_argument("--deadline", metavar="ISO", type=instant, required=True)
    autopilot = leaf(actions, "autopilot", cmd_week_autopilot,
                     "let the tick advance the week's timed steps (never approve or send)")
    autopilot.add_argument("week", metavar="WEEK", type=week)
    autopilot.add_argument("value", choices=["on", "off"], metavar="on|off")
    show = leaf(actions, "show", cmd_week_show, "the week: state, shifts, submissions, ...")
    show.add_argument("week", metavar="WEEK", type=week)
    json_flag(show)

    json_flag(leaf(commands, "weeks", cmd_weeks, "every week with its state"))

    avail = leaf(commands, "avail", cmd_avail, "submit availability as that tender")
    avail.add_argument("week", metavar="WEEK", type=week)
    avail.add_argument("email", metavar="EMAIL")
    avail.add_argument("shift_ids", metavar="SHIFT_ID", type=whole, nargs="+")
    avail.add_argument("--max", metavar="N", type=whole, default=None,
                       help="at most N shifts this week")

    leaf(commands, "tick", cmd_tick,
         "the every-minute cron's work, once (legacy crons with the flag off)")
    leaf(commands, "demo", cmd_demo,
         "a whole week's lifecycle on a temporary SQLite database, narrated")
    serve = leaf(commands, "serve", cmd_serve, "the web admin and the every-minute ticker")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=whole, default=8000)
    return parser


def run(argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None,
        stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Run one command and return its exit code (``main`` exits with it); the demo and the
    tests call this with their own environment and streams."""
    env = os.environ if environ is None else environ
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or bad usage (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    import psycopg

    from .db import DatabaseURLError, dialect_of
    from .db.migrate import MigrationError

    ctx = Context(args.db or env.get("PUBSCHED_DB") or DEFAULT_DB, args.now, env, out, err)
    handler: Handler = args.handler
    try:
        if handler not in (cmd_demo, cmd_serve):
            dialect_of(ctx.db_url)
        return handler(ctx, args)
    except (BadInput, MailConfigError, DatabaseURLError, Usage) as exc:
        ctx.complain(f"error: {exc}")
        return EXIT_USAGE
    except (rowstate.StoreError, psycopg.Error, MigrationError) as exc:
        ctx.complain(f"database error: {exc}")
        return EXIT_FAILED
    finally:
        ctx.close()


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``pubsched`` console script."""
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


if __name__ == "__main__":
    main()
