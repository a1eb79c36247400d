"""``pubsched init``, ``tick``, ``serve`` and ``demo``: the database, the every-minute work,
the web admin, and the narrated week.

``serve`` imports the web front end only when it runs, so the CLI works where the web's
dependencies are missing; ``demo`` is handed the command line through its context
(:attr:`Context.runner`) instead of importing it, as the dispatcher imports this module.
"""

from __future__ import annotations

import argparse

from ..context import EXIT_APPLIED, EXIT_FAILED, Context, Usage, redacted


def cmd_init(ctx: Context, args: argparse.Namespace) -> int:
    from ...db.migrate import migrate

    applied = migrate(ctx.db_url)
    where = redacted(ctx.db_url)
    if applied:
        ctx.say(f"applied {len(applied)} migration(s) to {where}: {', '.join(applied)}")
    else:
        ctx.say(f"{where} is up to date")
    return EXIT_APPLIED


def cmd_tick(ctx: Context, args: argparse.Namespace) -> int:
    """The every-minute cron's work, once. A refusal inside a tick is normal (another
    instance got there first) and is not an error; a failure (a nudge SMTP refused) is."""
    from ...tick import tick

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
    from ..demo import run_demo

    return run_demo(ctx.stdout, run=ctx.runner, now=ctx.now)


def cmd_serve(ctx: Context, args: argparse.Namespace) -> int:
    try:
        from pubsched.web.serve import main as serve_main  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise Usage("the web admin is not installed in this environment "
                    f"(pubsched.web.serve: {exc}); the CLI works without it") from None
    serve_main(args.host, args.port, ctx.config())
    return EXIT_APPLIED
