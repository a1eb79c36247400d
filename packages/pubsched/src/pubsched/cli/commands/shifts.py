"""``pubsched shift add|list|edit|remove`` (the pub's week: the template new weeks are made
from) and ``pubsched week shift add|remove`` (one week's own shifts before its roster).

Thin: the checks and the writes are the domain's (:mod:`pubsched.week.template`,
:mod:`pubsched.week.shifts`), shared with the web; a bad value is its BadInput (exit 2,
nothing written), a week past its roster a refusal (exit 3)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeAlias

from ...verdicts import BadInput
from ..context import Context, report
from ..output import listing


def cmd_shift_add(ctx: Context, args: argparse.Namespace) -> int:
    from ...week import template

    return report(ctx, template.add(ctx.pub(), args.label, args.day, args.start, args.end,
                                    slots=args.slots, needs=args.needs or ()))


def cmd_shift_list(ctx: Context, args: argparse.Namespace) -> int:
    from ...week import template

    found = [t.as_json() for t in template.listing(ctx.pub())]
    return listing(ctx, args.json, found, "the pub's week has no shifts: add one with "
                   "`pubsched shift add LABEL --day fri --start 18:00 --end 02:00`",
                   ("id", "label", "day", "start", "end", "slots", "needs"),
                   lambda t: (str(t["id"]), t["label"], t["day"], t["start"], t["end"],
                              str(t["slots"]), ", ".join(t["needs"])))


def cmd_shift_edit(ctx: Context, args: argparse.Namespace) -> int:
    from ...week import template

    if args.no_needs and args.needs:
        raise BadInput("give --needs SKILL or --no-needs, not both")
    needs = () if args.no_needs else args.needs
    return report(ctx, template.edit(ctx.pub(), args.id, label=args.label, day=args.day,
                                     start=args.start, end=args.end, slots=args.slots,
                                     needs=needs))


def cmd_shift_remove(ctx: Context, args: argparse.Namespace) -> int:
    from ...week import template

    return report(ctx, template.remove(ctx.pub(), args.id))


def cmd_week_shift_add(ctx: Context, args: argparse.Namespace) -> int:
    from ...week import shifts as week_shifts

    return report(ctx, week_shifts.add_shift(
        ctx.pub(), args.week, args.label, args.date, args.start, args.end,
        slots=args.slots, needs=args.needs or (), now=ctx.now))


def cmd_week_shift_remove(ctx: Context, args: argparse.Namespace) -> int:
    from ...week import shifts as week_shifts

    return report(ctx, week_shifts.remove_shift(ctx.pub(), args.week, args.shift_id,
                                                now=ctx.now))


Group: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_shift_commands(commands: Group, week_actions: Group,
                       common: argparse.ArgumentParser) -> None:
    """The commands' surface (docs/cli.md), added to the parser's ``commands`` and to the
    ``week`` subcommands, so the parser module gains two lines, not forty."""
    from ..arguments import week, whole

    def leaf(group: Group, name: str, handler: Callable[[Context, argparse.Namespace], int],
             text: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = group.add_parser(name, parents=[common], help=text,
                                                        description=text)
        sub.set_defaults(handler=handler)
        return sub

    def shape(sub: argparse.ArgumentParser, *, required: bool) -> None:
        sub.add_argument("--start", metavar="HH:MM", required=required,
                         help="local start time")
        sub.add_argument("--end", metavar="HH:MM", required=required,
                         help="local end time (at or before the start: the next day)")
        sub.add_argument("--slots", metavar="N", type=whole, default=None if not required
                         else 2, help="people needed, 1 to 20" + (" (default 2)"
                                                                  if required else ""))
        sub.add_argument("--needs", metavar="SKILL", action="append", default=None,
                         help="a skill the shift needs (once per skill)")

    days = "mon|tue|wed|thu|fri|sat|sun"
    shift = commands.add_parser("shift", help="the pub's week: the shifts new weeks get")
    group = shift.add_subparsers(dest="shift_command", metavar="ACTION", required=True)
    add = leaf(group, "add", cmd_shift_add, "add a weekly shift (weeks created from now on)")
    add.add_argument("label", metavar="LABEL")
    add.add_argument("--day", metavar=days, required=True, help="the day it starts on")
    shape(add, required=True)
    leaf(group, "list", cmd_shift_list, "the pub's week, in week order").add_argument(
        "--json", action="store_true", help="print JSON (the shape in docs/cli.md)")
    edit = leaf(group, "edit", cmd_shift_edit,
                "change a weekly shift (weeks already created keep theirs)")
    edit.add_argument("id", metavar="ID", type=whole)
    edit.add_argument("--label", metavar="L", default=None)
    edit.add_argument("--day", metavar=days, default=None)
    shape(edit, required=False)
    edit.add_argument("--no-needs", action="store_true", help="the shift needs no skill")
    leaf(group, "remove", cmd_shift_remove,
         "remove a weekly shift (the weeks that have it keep it)"
         ).add_argument("id", metavar="ID", type=whole)

    own = week_actions.add_parser("shift", help="this week's own shifts, before its roster")
    mine = own.add_subparsers(dest="week_shift_command", metavar="ACTION", required=True)
    one_off = leaf(mine, "add", cmd_week_shift_add, "add a one-off shift to this week")
    one_off.add_argument("week", metavar="WEEK", type=week)
    one_off.add_argument("label", metavar="LABEL")
    one_off.add_argument("--date", metavar="YYYY-MM-DD", required=True,
                         help="the day it starts on, in the week")
    shape(one_off, required=True)
    closed = leaf(mine, "remove", cmd_week_shift_remove,
                  "remove a shift from this week (a closed night)")
    closed.add_argument("week", metavar="WEEK", type=week)
    closed.add_argument("shift_id", metavar="SHIFT_ID", type=whole)
