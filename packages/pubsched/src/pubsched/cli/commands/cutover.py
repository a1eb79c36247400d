"""``pubsched flag v2 on|off``, ``pubsched cutover check`` and ``pubsched cutover
rehearse``: which engine runs the weeks, whether now is the idle gap in which that may
change, and the dress rehearsal that turning v2 on over real weeks requires."""

from __future__ import annotations

import argparse

from ..context import EXIT_APPLIED, EXIT_FAILED, EXIT_REFUSED, Context, report


def cmd_flag(ctx: Context, args: argparse.Namespace) -> int:
    from ...engines.cutover import flip

    return report(ctx, flip(ctx.pub(), args.value == "on", force=args.force, now=ctx.now))


def cmd_cutover_check(ctx: Context, args: argparse.Namespace) -> int:
    from ...engines.cutover import cutover_check

    pub = ctx.pub()
    check = cutover_check(pub, ctx.now)
    ctx.say(_rehearsal_line(ctx))
    if check.idle:
        ctx.say("the idle gap: no week in flight and no lease live; the flag may be flipped")
        return EXIT_APPLIED
    ctx.complain(f"refused (NOT_IDLE): not the idle gap: {'; '.join(check.reasons)}")
    return EXIT_REFUSED


def _rehearsal_line(ctx: Context) -> str:
    from ...engines.cutover import rehearsal_needed
    from ...rehearsal.record import last_passed

    pub = ctx.pub()
    passed = last_passed(pub)
    if passed is not None and passed.finished_at is not None:
        local = passed.finished_at.astimezone(pub.config.tz)
        return (f"rehearsal: passed {local:%a} {local.day} {local:%b %Y %H:%M %Z} "
                f"(rehearsal {passed.id})")
    if rehearsal_needed(pub):
        return ("rehearsal: none has passed; `pubsched cutover rehearse` before "
                "`flag v2 on` (this database has weeks)")
    return "rehearsal: none has passed (none needed: this database has no weeks yet)"


def cmd_cutover_rehearse(ctx: Context, args: argparse.Namespace) -> int:
    """Every step, one line each as it ends; exit 0 passed, 1 a step failed, 2 no operator
    address (nothing written), 3 another rehearsal is running a step."""
    from ...rehearsal import STEPS, Refused, run_all
    from ...rehearsal.steps import day

    pub = ctx.pub()
    total = len(STEPS)
    first = True
    try:
        for result in run_all(pub, now=lambda: ctx.now, by="cli"):
            if first:
                made = result.rehearsal
                ctx.say(f"rehearsal {made.id}: the week of {day(made.week_of)} on the new "
                        f"engine, on a throwaway copy; every email to "
                        f"{pub.config.mail.operator_email}")
                first = False
            said = "done" if result.ok else "FAILED"
            ctx.say(f"{result.number}/{total} {result.words}: {said} ({result.message})")
            if not result.ok:
                ctx.complain(f"failed: rehearsal failed at {result.name}: {result.message}; "
                             "the flag stays as it is")
                return EXIT_FAILED
    except Refused as exc:
        ctx.complain(f"refused ({exc.reason}): {exc}")
        return EXIT_REFUSED
    ctx.say("rehearsal passed: `pubsched flag v2 on` may now switch to the new engine")
    return EXIT_APPLIED
