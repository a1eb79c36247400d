"""``pubsched week ACTION WEEK``, ``weeks`` and ``avail``: a week's actions, its view, the
list of weeks, and a tender's availability given on their behalf.

Every week action is one row of the table of actions and goes through
:func:`pubsched.engines.actions.perform`, the same code the web buttons run, so the CLI and
the admin can never disagree about what an action is called, takes, or may do.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..context import EXIT_APPLIED, Context, report
from ..output import listing, print_week, progress


def cmd_week_action(ctx: Context, args: argparse.Namespace) -> int:
    """One row of the table of actions (:mod:`pubsched.engines.actions`): its options read
    from the arguments the parser built for them, then :func:`perform`; an action with a
    progress text (the send, which waits on SMTP) runs under a spinner on a terminal."""
    from ...engines.actions import BY_NAME, ON_OFF, WALL, perform
    from ...week.time import local_to_utc

    action = BY_NAME[args.action]
    options: dict[str, Any] = {}
    pub = ctx.pub()
    for option in action.options:
        if option.cli_arg is None:
            continue
        value = getattr(args, option.cli_arg.lstrip("-").replace("-", "_"))
        if option.kind == WALL and value is None:
            continue  # left out: the engine's default
        if option.kind == WALL and value.tzinfo is None:  # the pub's wall clock
            value = local_to_utc(value.date(), value.time(), pub.config.tz)
        options[option.name] = value == "on" if option.kind == ON_OFF else value
    if action.progress is None:
        return report(ctx, perform(pub, action.name, args.week, now=ctx.now, **options))
    if ctx.is_tty():
        from ...week.view import week_show

        people = {e for s in week_show(pub, args.week)["shifts"] for e in s["assigned"]}
        text = action.progress.format(week=args.week, people=len(people))
    else:
        text = ""
    with progress(ctx, text):
        verdict = perform(pub, action.name, args.week, now=ctx.now, **options)
    return report(ctx, verdict)


def cmd_week_show(ctx: Context, args: argparse.Namespace) -> int:
    from ...week.status import week_status
    from ...week.view import week_show

    pub = ctx.pub()
    shown = week_show(pub, args.week)
    if args.json:
        ctx.emit_json(shown)
    else:
        status = week_status(pub, shown)
        said = [status.now, status.busy, f"Next: {status.next}" if status.next else ""]
        print_week(ctx.console(), shown, [line for line in said if line])
    return EXIT_APPLIED


def cmd_weeks(ctx: Context, args: argparse.Namespace) -> int:
    from ...week.view import weeks_list

    return listing(ctx, args.json, weeks_list(ctx.pub()),
                   "no weeks yet: open one with `pubsched week open MONDAY`",
                   ("week", "state", "legacy status", "autopilot", "deadline (UTC)"),
                   lambda w: (w["week_of"], w["state"], str(w["legacy_status"]),
                              "on" if w["autopilot"] else "off", w["deadline_at"] or ""))


def cmd_avail(ctx: Context, args: argparse.Namespace) -> int:
    from ...week.submissions import submit

    return report(ctx, submit(ctx.pub(), args.week, args.email, args.shift_ids,
                              max_shifts=args.max, now=ctx.now, save_usual=args.usual))
