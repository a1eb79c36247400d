"""``pubsched tender add|edit|activate|deactivate|list|show|link|invite``: the people on
the roster, their details and skills, their time off to come, their usual, and their
personal links (``tender away|back`` are :mod:`.away`'s)."""

from __future__ import annotations

import argparse

from ...verdicts import BadInput
from ..context import EXIT_APPLIED, Context, report
from ..output import listing


def cmd_tender_add(ctx: Context, args: argparse.Namespace) -> int:
    from ...people import tenders

    return report(ctx, tenders.add(ctx.pub(), args.name, args.email,
                                   max_shifts=args.max_shifts, skills=args.skills or (),
                                   now=ctx.now))


def cmd_tender_edit(ctx: Context, args: argparse.Namespace) -> int:
    """Only the options given change; ``--no-skills`` clears the skills, ``--skill``
    replaces them, ``--max-shifts none`` clears the maximum, ``--shift-reminders on|off``
    switches the email before each of their shifts."""
    from ...people import tenders

    skills = () if args.no_skills else args.skills
    reminders = None if args.shift_reminders is None else args.shift_reminders == "on"
    return report(ctx, tenders.edit(ctx.pub(), args.email, name=args.name,
                                    new_email=args.new_email, max_shifts=args.max_shifts,
                                    skills=skills, shift_reminders=reminders))


def cmd_tender_activate(ctx: Context, args: argparse.Namespace) -> int:
    from ...people import tenders

    return report(ctx, tenders.activate(ctx.pub(), args.email))


def cmd_tender_deactivate(ctx: Context, args: argparse.Namespace) -> int:
    """Refused (exit 3, HAS_SHIFTS) while the tender works shifts to come on sent rosters,
    naming them; ``--cover`` asks for cover for each on their behalf, takes them off and
    deactivates them in one go, then sends the requests' emails as ``cover ask`` does."""
    from ...covers.leaving import HAS_SHIFTS, deactivate
    from .covers import delivered

    pub = ctx.pub()
    verdict = deactivate(pub, args.email, cover=args.cover, now=ctx.now)
    code = delivered(ctx, pub, verdict)
    if verdict.reason == HAS_SHIFTS:
        ctx.complain(f"To do so: pubsched tender deactivate {args.email} --cover")
    return code


def _away_words(spans: list[dict[str, str]]) -> str:
    from datetime import date

    from ...mail.wording import days

    return "; ".join(days(date.fromisoformat(s["from"]), date.fromisoformat(s["to"]))
                     for s in spans)


def cmd_tender_list(ctx: Context, args: argparse.Namespace) -> int:
    """Each tender with ``time_off``: their spans that have not ended (``{"from", "to"}``)."""
    from ...people import away, tenders
    from ...people.time_off import spans

    pub = ctx.pub()
    mine: dict[int, list[dict[str, str]]] = {}
    for span in spans(pub, since=away.today(pub, ctx.now)):
        mine.setdefault(span.tender_id, []).append(away.as_json(span))
    found = [{**t.as_json(), "time_off": mine.get(t.id, [])}
             for t in tenders.all_tenders(pub)]
    return listing(ctx, args.json, found, "no tenders yet: add one with `pubsched tender add "
                   "NAME EMAIL`",
                   ("id", "name", "email", "active", "max shifts", "skills", "away"),
                   lambda t: (str(t["id"]), t["name"], t["email"],
                              "yes" if t["active"] else "no",
                              "" if t["max_shifts"] is None else str(t["max_shifts"]),
                              " ".join(t["skills"]),
                              ", ".join(f"{s['from']} to {s['to']}" for s in t["time_off"])))


def cmd_tender_show(ctx: Context, args: argparse.Namespace) -> int:
    """One tender: their details, ``time_off`` to come, and ``usual`` (None: never saved;
    else ``{"shifts": ["Fri 18:00", ...], "max", "saved_at"}``)."""
    from ...people import away, tenders, usual
    from ...week.view import iso

    pub = ctx.pub()
    tender = tenders.get(pub, args.email)
    theirs = usual.of(pub, tender.id)
    shown = {**tender.as_json(),
             "time_off": [away.as_json(s) for s in away.upcoming(pub, tender.id, ctx.now)],
             "usual": None if theirs is None else {**theirs.as_json(),
                                                   "saved_at": iso(theirs.saved_at)}}
    if args.json:
        ctx.emit_json(shown)
        return EXIT_APPLIED
    ctx.say(f"{tender.name} ({tender.email}){'' if tender.active else ', inactive'}")
    ctx.say(f"  max shifts: {'no maximum' if tender.max_shifts is None else tender.max_shifts}"
            f"; skills: {' '.join(tender.skills) or 'none'}")
    ctx.say(f"  time off: {_away_words(shown['time_off']) or 'none to come'}")
    if theirs is None:
        ctx.say("  usual: none saved")
    else:
        limit = "no maximum" if theirs.max_shifts is None else f"at most {theirs.max_shifts}"
        ctx.say(f"  usual: {', '.join(shown['usual']['shifts']) or 'no shifts'} ({limit})")
    return EXIT_APPLIED


def cmd_tender_link(ctx: Context, args: argparse.Namespace) -> int:
    from ...people import links, tenders

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
    from ...people import invite

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
