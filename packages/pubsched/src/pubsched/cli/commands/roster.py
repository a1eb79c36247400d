"""``pubsched week assign|unassign WEEK SHIFT_ID EMAIL``: the roster by hand.

Not rows of the table of actions (:mod:`pubsched.engines.actions`): those are the run's
moves, these edit the week's roster while it stays ASSIGNED (:mod:`pubsched.week.roster`).
Exit 0 applied (an assign without the tender's availability adds a warning line on
stderr), 2 bad input (nothing written), 3 refused with its reason code.
"""

from __future__ import annotations

import argparse

from ..context import Context, report


def cmd_week_assign(ctx: Context, args: argparse.Namespace) -> int:
    from ...week.roster import assign

    verdict = assign(ctx.pub(), args.week, args.shift_id, args.email, now=ctx.now)
    code = report(ctx, verdict)
    warning = verdict.detail.get("warning") if verdict.applied else None
    if warning:
        ctx.complain(f"warning: {warning}")
    return code


def cmd_week_unassign(ctx: Context, args: argparse.Namespace) -> int:
    from ...week.roster import unassign

    return report(ctx, unassign(ctx.pub(), args.week, args.shift_id, args.email, now=ctx.now))
