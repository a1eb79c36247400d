"""``pubsched tender add|deactivate|list|link``: the people on the roster and their
personal links."""

from __future__ import annotations

import argparse

from ...pub import BadInput
from ..context import EXIT_APPLIED, Context, report
from ..output import listing


def cmd_tender_add(ctx: Context, args: argparse.Namespace) -> int:
    from ... import tenders

    return report(ctx, tenders.add(ctx.pub(), args.name, args.email,
                                   max_shifts=args.max_shifts, now=ctx.now))


def cmd_tender_deactivate(ctx: Context, args: argparse.Namespace) -> int:
    from ... import tenders

    return report(ctx, tenders.deactivate(ctx.pub(), args.email))


def cmd_tender_list(ctx: Context, args: argparse.Namespace) -> int:
    from ... import tenders

    found = [t.as_json() for t in tenders.all_tenders(ctx.pub())]
    return listing(ctx, args.json, found, "no tenders yet: add one with `pubsched tender add "
                   "NAME EMAIL`", ("id", "name", "email", "active", "max shifts"),
                   lambda t: (str(t["id"]), t["name"], t["email"],
                              "yes" if t["active"] else "no",
                              "" if t["max_shifts"] is None else str(t["max_shifts"])))


def cmd_tender_link(ctx: Context, args: argparse.Namespace) -> int:
    from ... import links, tenders

    pub = ctx.pub()
    tender = tenders.get(pub, args.email)
    if not tender.active:
        raise BadInput(f"{tender.email} is not an active tender: their link would not work")
    ctx.say(links.tender_url(pub.config, tender.id, tender.link_version,
                             base_url=args.base_url))
    return EXIT_APPLIED
