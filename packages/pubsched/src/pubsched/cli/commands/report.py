"""``pubsched report hours``: each tender's shifts and hours on the sent roster between two
dates, and of those the ones still to come at ``--now``, as a table for a person, CSV for a
spreadsheet (``--csv``: ``name,email,shifts,hours,shifts_to_come,hours_to_come,active``) or
JSON (``--json``)."""

from __future__ import annotations

import argparse

from ..context import EXIT_APPLIED, Context
from ..output import listing


def cmd_report_hours(ctx: Context, args: argparse.Namespace) -> int:
    from ...people.hours import as_csv, hours_text, hours_worked

    lines = hours_worked(ctx.pub(), args.start, args.end, now=ctx.now)
    if args.csv:
        ctx.stdout.write(as_csv(lines))
        return EXIT_APPLIED
    return listing(ctx, args.json, [line.as_json() for line in lines],
                   "no tenders yet: add them with `pubsched tender add NAME EMAIL`",
                   ("name", "email", "shifts", "hours", "to come", "hours to come"),
                   lambda h: (h["name"] + ("" if h["active"] else " (inactive)"), h["email"],
                              str(h["shifts"]), hours_text(h["hours"]),
                              str(h["shifts_to_come"]), hours_text(h["hours_to_come"])))


__all__ = ["cmd_report_hours"]
