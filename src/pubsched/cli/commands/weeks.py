"""``pubsched week ACTION WEEK``, ``weeks`` and ``avail``: a week's actions, its view, the
list of weeks, and a tender's availability given on their behalf.

Every week action goes through :func:`pubsched.actions.perform`, the same code the web
buttons run, so the CLI and the admin can never disagree about what is legal.
"""

from __future__ import annotations

import argparse

from ..context import EXIT_APPLIED, Context, report
from ..output import listing, print_week, progress


def cmd_week_action(ctx: Context, args: argparse.Namespace) -> int:
    """A plain action (open, close, ..., send); the send runs under a spinner on a
    terminal, as it waits on SMTP."""
    from ...engines.actions import perform

    pub = ctx.pub()
    if args.action != "send":
        return report(ctx, perform(pub, args.action, args.week, now=ctx.now))
    if ctx.is_tty():
        from ...view import week_show

        people = {e for s in week_show(pub, args.week)["shifts"] for e in s["assigned"]}
        text = f"sending the schedule of week {args.week} to {len(people)} tender(s)..."
    else:
        text = ""
    with progress(ctx, text):
        verdict = perform(pub, "send", args.week, now=ctx.now)
    return report(ctx, verdict)


def cmd_week_extend(ctx: Context, args: argparse.Namespace) -> int:
    from ...engines.actions import perform

    return report(ctx, perform(ctx.pub(), "extend", args.week, now=ctx.now,
                               deadline=args.deadline))


def cmd_week_autopilot(ctx: Context, args: argparse.Namespace) -> int:
    from ...engines.actions import perform

    return report(ctx, perform(ctx.pub(), "autopilot", args.week, on=args.value == "on",
                               now=ctx.now))


def cmd_week_show(ctx: Context, args: argparse.Namespace) -> int:
    from ...view import week_show

    shown = week_show(ctx.pub(), args.week)
    if args.json:
        ctx.emit_json(shown)
    else:
        print_week(ctx.console(), shown)
    return EXIT_APPLIED


def cmd_weeks(ctx: Context, args: argparse.Namespace) -> int:
    from ...view import weeks_list

    return listing(ctx, args.json, weeks_list(ctx.pub()),
                   "no weeks yet: open one with `pubsched week open MONDAY`",
                   ("week", "state", "legacy status", "autopilot", "deadline (UTC)"),
                   lambda w: (w["week_of"], w["state"], str(w["legacy_status"]),
                              "on" if w["autopilot"] else "off", w["deadline_at"] or ""))


def cmd_avail(ctx: Context, args: argparse.Namespace) -> int:
    from ...submissions import submit

    return report(ctx, submit(ctx.pub(), args.week, args.email, args.shift_ids,
                              max_shifts=args.max, now=ctx.now))
