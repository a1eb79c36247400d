"""``pubsched init``, ``tick``, ``serve`` and ``demo``: the database, the every-minute work,
the web admin, and the narrated week.

``serve`` imports the web front end only when it runs, so the CLI works where the web's
dependencies are missing; ``demo`` is handed the command line through its context
(:attr:`Context.runner`) instead of importing it, as the dispatcher imports this module.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from ...engines.flags import V2_FLAG
from ...pub import Pub, utc
from ..context import EXIT_APPLIED, EXIT_FAILED, Context, Usage, redacted


def cmd_init(ctx: Context, args: argparse.Namespace) -> int:
    """Migrate, then choose the engine of a database that never had one (see
    :func:`first_engine`) and say which engine runs it."""
    from ...db.files import tighten
    from ...db.migrate import migrate
    from ...db.urls import dialect_of, sqlite_path

    applied = migrate(ctx.db_url)
    where = redacted(ctx.db_url)
    if applied:
        ctx.say(f"applied {len(applied)} migration(s) to {where}: {', '.join(applied)}")
    else:
        ctx.say(f"{where} is up to date")
    path = sqlite_path(ctx.db_url) if dialect_of(ctx.db_url) == "sqlite" else None
    if path is not None:
        for file in tighten(Path(path)):
            ctx.say(f"{file} could be read by other users of this machine: made readable "
                    "by its owner only (mode 0600)")
    ctx.say(first_engine(ctx.pub(), ctx.now))
    return EXIT_APPLIED


def first_engine(pub: Pub, now: datetime | None) -> str:
    """The engine a database starts on, chosen once: a database with no weeks yet starts on
    v2 (nothing for the legacy engine to finish, so the flag goes on); one that has weeks
    (a legacy install being upgraded) keeps the legacy engine until its cutover. A flag
    already written, by an operator or an earlier ``init``, is never changed here. The
    check and the write are one unit (PostgreSQL: with the runs locked against a week
    created meanwhile), so two ``init`` at once decide alike. Returns the sentence
    ``init`` prints."""
    with pub.atomic() as tx:
        if pub.dialect == "postgresql":
            tx.execute("LOCK TABLE pub_schedule_runs IN SHARE MODE")
        flag = tx.execute("SELECT value FROM pub_flags WHERE name = %s", [V2_FLAG])
        if flag:
            on = flag[0]["value"] == "on"
            return (f"engine: {'v2' if on else 'legacy'} ({V2_FLAG} {'on' if on else 'off'}, "
                    "as set; `pubsched flag v2 on|off` changes it in the idle gap)")
        weeks = tx.execute("SELECT COUNT(*) AS n FROM pub_schedule_runs")[0]["n"]
        if weeks:
            return (f"engine: legacy ({V2_FLAG} off): this database has {weeks} week(s) of "
                    "the legacy engine; it keeps running them until the cutover "
                    "(`pubsched cutover check`, then `pubsched flag v2 on`)")
        tx.execute("INSERT INTO pub_flags (name, value, changed_at) VALUES (%s, 'on', %s) "
                   "ON CONFLICT (name) DO NOTHING", [V2_FLAG, utc(now)])
    return (f"engine: v2 ({V2_FLAG} on): a new database with no weeks starts on the v2 "
            "state machine")


def cmd_tick(ctx: Context, args: argparse.Namespace) -> int:
    """The every-minute cron's work, once. A refusal inside a tick is normal (another
    instance got there first) and is not an error; a failure (a nudge SMTP refused) is."""
    from ...tick.status import run_tick

    verdicts = run_tick(ctx.pub(), ctx.now)
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
    from ..demo import run_demo

    return run_demo(ctx.stdout, run=ctx.runner, now=ctx.now)


def cmd_serve(ctx: Context, args: argparse.Namespace) -> int:
    try:
        from pubsched.web.serve import main as serve_main  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise Usage("the web admin is not installed in this environment "
                    f"(pubsched.web.serve: {exc}); the CLI works without it") from None
    serve_main(args.host, args.port, ctx.config(), tick=not args.no_tick,
               metrics_port=args.metrics_port)
    return EXIT_APPLIED
