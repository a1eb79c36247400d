"""``pubsched report hours``: who worked how much in sent weeks between two dates, as a
table for a person, CSV for a spreadsheet (``--csv``: ``name,email,shifts,hours``) or JSON
(``--json``)."""

from __future__ import annotations

import argparse

from ..context import EXIT_APPLIED, Context
from ..output import listing


def cmd_report_hours(ctx: Context, args: argparse.Namespace) -> int:
    from ...people.hours import as_csv, hours_text, hours_worked

    lines = hours_worked(ctx.pub(), args.start, args.end)
    if args.csv:
        ctx.stdout.write(as_csv(lines))
        return EXIT_APPLIED
    return listing(ctx, args.json, [line.as_json() for line in lines],
                   "no tenders yet: add them with `pubsched tender add NAME EMAIL`",
                   ("name", "email", "shifts", "hours"),
                   lambda h: (h["name"], h["email"], str(h["shifts"]), hours_text(h["hours"])))


__all__ = ["cmd_report_hours"]
