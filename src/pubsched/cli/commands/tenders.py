"""``pubsched tender add|edit|activate|deactivate|list|link|invite``: the people on the
roster, their details and skills, and their personal links."""

from __future__ import annotations

import argparse

from ...pub import BadInput
from ..context import EXIT_APPLIED, Context, report
from ..output import listing


def cmd_tender_add(ctx: Context, args: argparse.Namespace) -> int:
    from ... import tenders

    return report(ctx, tenders.add(ctx.pub(), args.name, args.email,
                                   max_shifts=args.max_shifts, skills=args.skills or (),
                                   now=ctx.now))


def cmd_tender_edit(ctx: Context, args: argparse.Namespace) -> int:
    """Only the options given change; ``--no-skills`` clears the skills, ``--skill``
    replaces them, ``--max-shifts none`` clears the maximum, ``--shift-reminders on|off``
    switches the email before each of their shifts."""
    from ... import tenders

    skills = () if args.no_skills else args.skills
    reminders = None if args.shift_reminders is None else args.shift_reminders == "on"
    return report(ctx, tenders.edit(ctx.pub(), args.email, name=args.name,
                                    new_email=args.new_email, max_shifts=args.max_shifts,
                                    skills=skills, shift_reminders=reminders))


def cmd_tender_activate(ctx: Context, args: argparse.Namespace) -> int:
    from ... import tenders

    return report(ctx, tenders.activate(ctx.pub(), args.email))


def cmd_tender_deactivate(ctx: Context, args: argparse.Namespace) -> int:
    from ... import tenders

    return report(ctx, tenders.deactivate(ctx.pub(), args.email))


def cmd_tender_list(ctx: Context, args: argparse.Namespace) -> int:
    from ... import tenders

    found = [t.as_json() for t in tenders.all_tenders(ctx.pub())]
    return listing(ctx, args.json, found, "no tenders yet: add one with `pubsched tender add "
                   "NAME EMAIL`", ("id", "name", "email", "active", "max shifts", "skills"),
                   lambda t: (str(t["id"]), t["name"], t["email"],
                              "yes" if t["active"] else "no",
                              "" if t["max_shifts"] is None else str(t["max_shifts"]),
                              " ".join(t["skills"])))


def cmd_tender_link(ctx: Context, args: argparse.Namespace) -> int:
    from ... import links, tenders

    pub = ctx.pub()
    tender = tenders.get(pub, args.email)
    if not tender.active:
        raise BadInput(f"{tender.email} is not an active tender: their link would not work")
    ctx.say(links.tender_url(pub.config, tender.id, tender.link_version,
                             base_url=args.base_url))
    return EXIT_APPLIED


def cmd_tender_invite(ctx: Context, args: argparse.Namespace) -> int:
    """One tender (EMAIL) or every active one (``--all``), never both; with ``--all``
    each one sent gets a line on stdout, and a failure the one line on stderr (exit 1)."""
    from ... import invite

    if (args.email is None) == (not args.all):
        raise BadInput("give one tender's EMAIL or --all, not both and not neither")
    base_url = invite.check_base_url(args.base_url)  # before the database is opened
    if args.email is not None:
        return report(ctx, invite.invite(ctx.pub(), args.email, base_url=base_url,
                                         now=ctx.now))
    verdict = invite.invite_all(ctx.pub(), base_url=base_url, now=ctx.now)
    for email in verdict.detail.get("sent", ()):
        ctx.say(f"Invitation sent to {email}")
    return report(ctx, verdict)
