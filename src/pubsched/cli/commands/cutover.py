"""``pubsched flag v2 on|off`` and ``pubsched cutover check``: which engine runs the weeks,
and whether now is the idle gap in which that may change."""

from __future__ import annotations

import argparse

from ..context import EXIT_APPLIED, EXIT_REFUSED, Context, report


def cmd_flag(ctx: Context, args: argparse.Namespace) -> int:
    from ...engines.cutover import flip

    return report(ctx, flip(ctx.pub(), args.value == "on", force=args.force, now=ctx.now))


def cmd_cutover_check(ctx: Context, args: argparse.Namespace) -> int:
    from ...engines.cutover import cutover_check

    check = cutover_check(ctx.pub(), ctx.now)
    if check.idle:
        ctx.say("the idle gap: no week in flight and no lease live; the flag may be flipped")
        return EXIT_APPLIED
    ctx.complain(f"refused (NOT_IDLE): not the idle gap: {'; '.join(check.reasons)}")
    return EXIT_REFUSED
