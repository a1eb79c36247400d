"""``pubsched tender away EMAIL FROM TO`` and ``pubsched tender back EMAIL FROM``: a
tender's time off (:mod:`pubsched.people.away`).

Exit 0 applied (an away that covers a night they work in a week not sent yet adds one
``warning:`` line on stderr per such week: what to regenerate), 2 bad input (a date that
is not one, FROM after TO, an unknown tender: nothing written), 3 refused (a span that
overlaps one they have; a night they work in a sent week, with the hint to ask for
cover; ``back`` with no time off starting on FROM).
"""

from __future__ import annotations

import argparse

from ..context import Context, report


def cmd_tender_away(ctx: Context, args: argparse.Namespace) -> int:
    from ...people.away import add

    verdict = add(ctx.pub(), args.email, args.start, args.end, now=ctx.now)
    code = report(ctx, verdict)
    for warning in verdict.detail.get("warnings", ()) if verdict.applied else ():
        ctx.complain(f"warning: {warning}")
    return code


def cmd_tender_back(ctx: Context, args: argparse.Namespace) -> int:
    from ...people.away import cancel

    return report(ctx, cancel(ctx.pub(), args.email, args.start))
