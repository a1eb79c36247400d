"""The exact surface of docs/cli.md, in one place: every command, its arguments and its
handler. The ``week`` actions are not listed here: each is a row of the one table of
actions (:data:`pubsched.engines.actions.ACTIONS`), which gives its name, its help and its
options' spelling (a positional such as ``on|off``, a flag such as ``--deadline ISO``).

The parser checks what can be checked without the database (a WEEK that is not a Monday, a
time with no offset, a shift id that is not a number: :mod:`.arguments`), before the
database is opened at all; the domain checks the rest. A command whose handler must not
meet a malformed ``--db`` check first (``demo`` makes its own database, ``serve`` reports
through the web's own start) says so with ``checks_db_url=False``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..db.urls import DEFAULT_URL
from ..engines.actions import ACTIONS, INSTANT, WALL, Action
from ..people.tenders import KEEP
from .arguments import day, instant, wall, week, whole, whole_or_none
from .commands.away import cmd_tender_away, cmd_tender_back
from .commands.backup import cmd_backup
from .commands.covers import cmd_cover_ask, cmd_cover_cancel, cmd_cover_list, cmd_cover_take
from .commands.cutover import cmd_cutover_check, cmd_cutover_rehearse, cmd_flag
from .commands.mail import cmd_mail_resend, cmd_mail_unknown
from .commands.operators import (
    cmd_operator_add,
    cmd_operator_list,
    cmd_operator_password,
    cmd_operator_remove,
)
from .commands.report import cmd_report_hours
from .commands.restore import cmd_restore
from .commands.roster import cmd_week_assign, cmd_week_unassign
from .commands.secret import cmd_secret_new
from .commands.service import cmd_demo, cmd_init, cmd_serve, cmd_tick
from .commands.shifts import add_shift_commands
from .commands.tenders import (
    cmd_tender_activate,
    cmd_tender_add,
    cmd_tender_deactivate,
    cmd_tender_edit,
    cmd_tender_invite,
    cmd_tender_link,
    cmd_tender_list,
    cmd_tender_show,
)
from .commands.weeks import cmd_avail, cmd_week_action, cmd_week_show, cmd_weeks
from .context import Context

Handler = Callable[[Context, argparse.Namespace], int]
# the week actions the CLI has a command for, in the table's order (the web's "resend" is
# not one of them): pubsched.engines.actions.ACTIONS is the only list of them
CLI_ACTIONS: tuple[Action, ...] = tuple(a for a in ACTIONS if a.cli)


class _PrintVersions(argparse.Action):
    """``pubsched X (rowstate Y)`` on one line (argparse's own version action wraps it):
    the two distributions move separately, and an upgrade is checked by reading both
    (docs/pubsched.md, "Upgrading")."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from importlib.metadata import version

        print(f"pubsched {version('pubsched')} (rowstate {version('rowstate')})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """``--db``, ``--now`` and ``--by`` are accepted before the command and after it (the
    later one wins)."""
    parser = argparse.ArgumentParser(
        prog="pubsched", description="The pub scheduler's operator command line.",
        epilog="exit codes: 0 applied, 1 ran and failed, 2 bad usage or input "
               "(nothing written), 3 refused (the reason on stderr)")
    parser.add_argument("--version", action=_PrintVersions, nargs=0,
                        help="print pubsched's version and the engine's, then exit")
    parser.add_argument("--db", metavar="URL", default=None,
                        help=f"database URL (default $PUBSCHED_DB, else {DEFAULT_URL})")
    parser.add_argument("--now", metavar="ISO", type=instant, default=None,
                        help="the instant to act at, with an offset or Z (default: now)")
    parser.add_argument("--by", metavar="NAME", default=None,
                        help="who acts, as the week's history records it: cli:NAME "
                             "(default: cli:$USER)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", metavar="URL", default=argparse.SUPPRESS,
                        help="database URL (as before the command)")
    common.add_argument("--now", metavar="ISO", type=instant, default=argparse.SUPPRESS,
                        help="the instant to act at, with an offset or Z (default: now)")
    common.add_argument("--by", metavar="NAME", default=argparse.SUPPRESS,
                        help="who acts (as before the command)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def leaf(group: Any, name: str, handler: Handler, text: str,
             **defaults: Any) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = group.add_parser(name, parents=[common], help=text,
                                                        description=text)
        sub.set_defaults(handler=handler, **defaults)
        return sub

    def json_flag(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--json", action="store_true",
                         help="print JSON (the shape in docs/cli.md)")

    leaf(commands, "init", cmd_init, "create or upgrade the database (migrations)")
    leaf(commands, "backup", cmd_backup, "a consistent copy of the database, also while it "
         "serves (SQLite: a file; PostgreSQL: a pg_dump custom-format archive)"
         ).add_argument("path", metavar="PATH", help="the new backup's file (never "
                        "overwritten)")
    restore = leaf(commands, "restore", cmd_restore, "put a backup back as the whole "
                   "database (asks first; stop serve and the tick before)")
    restore.add_argument("path", metavar="PATH", help="a file `pubsched backup` made")
    restore.add_argument("--yes", action="store_true", help="restore without asking (a "
                         "script; without it the command asks on a terminal)")

    tender = commands.add_parser("tender", help="add, edit, (de)activate, list tenders; "
                                 "their links; their time off")
    tenders = tender.add_subparsers(dest="tender_command", metavar="ACTION", required=True)
    add = leaf(tenders, "add", cmd_tender_add, "add a tender (an email once, in any case)")
    add.add_argument("name", metavar="NAME")
    add.add_argument("email", metavar="EMAIL")
    add.add_argument("--max-shifts", metavar="N", type=whole, default=None,
                     help="at most N shifts a week")
    add.add_argument("--skill", metavar="SKILL", dest="skills", action="append",
                     help="a skill (one word; repeat for more)")
    edit = leaf(tenders, "edit", cmd_tender_edit,
                "change a tender's name, email, maximum, skills or shift reminders (the "
                "rest stays)")
    edit.add_argument("email", metavar="EMAIL")
    edit.add_argument("--name", metavar="NAME", default=None, help="the new name")
    edit.add_argument("--email", metavar="EMAIL", dest="new_email", default=None,
                      help="the new email (their links keep working)")
    edit.add_argument("--max-shifts", metavar="N|none", type=whole_or_none, default=KEEP,
                      help="at most N shifts a week; none: no maximum")
    skills = edit.add_mutually_exclusive_group()
    skills.add_argument("--skill", metavar="SKILL", dest="skills", action="append",
                        help="a skill (repeat for more): these replace the tender's skills")
    skills.add_argument("--no-skills", action="store_true", help="clear the skills")
    edit.add_argument("--shift-reminders", metavar="on|off", choices=["on", "off"],
                      default=None, help="the email before each of their shifts")
    leaf(tenders, "activate", cmd_tender_activate,
         "make an inactive tender active again (their current link works again)"
         ).add_argument("email", metavar="EMAIL")
    deactivate = leaf(tenders, "deactivate", cmd_tender_deactivate,
                      "deactivate a tender (kept for history; their link stops working); "
                      "refused while they work shifts to come on sent rosters")
    deactivate.add_argument("email", metavar="EMAIL")
    deactivate.add_argument("--cover", action="store_true",
                            help="take them off their shifts to come on sent rosters, "
                                 "asking for cover for each on their behalf")
    json_flag(leaf(tenders, "list", cmd_tender_list,
                   "every tender (with their time off to come)"))
    show_one = leaf(tenders, "show", cmd_tender_show,
                    "one tender: details, time off to come, their usual")
    show_one.add_argument("email", metavar="EMAIL")
    json_flag(show_one)
    away = leaf(tenders, "away", cmd_tender_away,
                "time off: the tender is away from FROM to TO (both days included)")
    away.add_argument("email", metavar="EMAIL")
    away.add_argument("start", metavar="FROM", type=day, help="the first day away, YYYY-MM-DD")
    away.add_argument("end", metavar="TO", type=day, help="the last day away, YYYY-MM-DD")
    back = leaf(tenders, "back", cmd_tender_back,
                "cancel the tender's time off that starts on FROM")
    back.add_argument("email", metavar="EMAIL")
    back.add_argument("start", metavar="FROM", type=day,
                      help="the first day of the time off, YYYY-MM-DD")
    link = leaf(tenders, "link", cmd_tender_link, "the tender's signed personal link")
    link.add_argument("email", metavar="EMAIL")
    link.add_argument("--base-url", metavar="URL", default=None,
                      help="the site's address (default $PUBSCHED_BASE_URL)")
    invite = leaf(tenders, "invite", cmd_tender_invite,
                  "email a tender (or every active one) their personal links")
    invite.add_argument("email", metavar="EMAIL", nargs="?", default=None)
    invite.add_argument("--all", action="store_true", help="every active tender, once each")
    invite.add_argument("--base-url", metavar="URL", default=None,
                        help="the site's address (default $PUBSCHED_BASE_URL)")

    operator = commands.add_parser("operator", help="add, list, remove operator accounts, "
                                   "set a password (the web admin's logins)")
    operators = operator.add_subparsers(dest="operator_command", metavar="ACTION",
                                        required=True)
    op_add = leaf(operators, "add", cmd_operator_add,
                  "add an operator account (an email once, in any case; the password from "
                  "stdin, or asked twice on a terminal)")
    op_add.add_argument("email", metavar="EMAIL")
    op_add.add_argument("--password-stdin", action="store_true",
                        help="read the password from the first line of standard input")
    op_password = leaf(operators, "password", cmd_operator_password,
                       "give an account a new password (its sessions end; the password "
                       "from stdin, or asked twice on a terminal)")
    op_password.add_argument("email", metavar="EMAIL")
    op_password.add_argument("--password-stdin", action="store_true",
                             help="read the password from the first line of standard input")
    json_flag(leaf(operators, "list", cmd_operator_list, "every operator account"))
    leaf(operators, "remove", cmd_operator_remove, "remove an operator account (their "
         "sessions end at their next request)").add_argument("email", metavar="EMAIL")

    flag = leaf(commands, "flag", cmd_flag,
                "turn the v2 engine on or off (refused outside the idle gap unless --force)")
    flag.add_argument("name", choices=["v2"], metavar="v2")
    flag.add_argument("value", choices=["on", "off"], metavar="on|off")
    flag.add_argument("--force", action="store_true",
                      help="flip outside the idle gap (never without a passed rehearsal)")

    cutover = commands.add_parser("cutover", help="the cutover's idle-gap check, its rehearsal")
    checks = cutover.add_subparsers(dest="cutover_command", metavar="ACTION", required=True)
    leaf(checks, "check", cmd_cutover_check,
         "is this the idle gap (exit 0), or why not (exit 3); has a rehearsal passed")
    leaf(checks, "rehearse", cmd_cutover_rehearse,
         "the dress rehearsal: a whole week on v2 on a throwaway copy, mail to the operator")

    week_parser = commands.add_parser("week", help="act on one week (WEEK: its Monday)")
    actions = week_parser.add_subparsers(dest="week_command", metavar="ACTION", required=True)
    for action in CLI_ACTIONS:
        command = leaf(actions, action.name, cmd_week_action, action.help, action=action.name)
        command.add_argument("week", metavar="WEEK", type=week)
        for option in action.options:
            if option.cli_arg is None:  # not asked on the command line (e.g. the holder)
                continue
            spelling: dict[str, Any] = {"metavar": option.cli_metavar,
                                        "help": option.cli_help}
            if option.kind == INSTANT:
                spelling["type"] = instant
            elif option.kind == WALL:
                spelling["type"] = wall
            if option.cli_choices:
                spelling["choices"] = list(option.cli_choices)
            if option.cli_arg.startswith("--"):
                spelling["required"] = option.required
            command.add_argument(option.cli_arg, **spelling)
    show = leaf(actions, "show", cmd_week_show, "the week: state, shifts, submissions, ...")
    show.add_argument("week", metavar="WEEK", type=week)
    json_flag(show)
    add_shift_commands(commands, actions, common)  # shift ...; week shift add|remove
    for name, handler, text in (
            ("assign", cmd_week_assign,
             "pin a tender on a shift of the generated roster (kept by regenerate)"),
            ("unassign", cmd_week_unassign,
             "take a tender off a shift (regenerate will not put them back there)")):
        edit = leaf(actions, name, handler, text)
        edit.add_argument("week", metavar="WEEK", type=week)
        edit.add_argument("shift_id", metavar="SHIFT_ID", type=whole)
        edit.add_argument("email", metavar="EMAIL")

    json_flag(leaf(commands, "weeks", cmd_weeks, "every week with its state"))

    cover = commands.add_parser("cover", help="cover requests: a tender who can't work a "
                                "shift of a sent week asks, another takes it")
    covers = cover.add_subparsers(dest="cover_command", metavar="ACTION", required=True)
    ask = leaf(covers, "ask", cmd_cover_ask,
               "EMAIL can't work that shift of a sent week: ask for cover (the tenders who "
               "could take it are emailed an offer)")
    ask.add_argument("week", metavar="WEEK", type=week)
    ask.add_argument("shift_id", metavar="SHIFT_ID", type=whole)
    ask.add_argument("email", metavar="EMAIL")
    ask.add_argument("--note", metavar="TEXT", default=None,
                     help="a word from the asker, shown in the offer")
    take = leaf(covers, "take", cmd_cover_take,
                "EMAIL takes the shift (as their offer's \"I'll take it\" link does)")
    take.add_argument("cover_id", metavar="COVER_ID", type=whole)
    take.add_argument("email", metavar="EMAIL")
    leaf(covers, "cancel", cmd_cover_cancel,
         "call the request off: the asker keeps the shift"
         ).add_argument("cover_id", metavar="COVER_ID", type=whole)
    listed = leaf(covers, "list", cmd_cover_list, "every cover request (of one week)")
    listed.add_argument("--week", metavar="WEEK", type=week, default=None,
                        help="only this week's (its Monday)")
    json_flag(listed)

    mail = commands.add_parser("mail", help="mail of unknown fate: handed to the mail "
                               "server with no answer; resend one")
    mails = mail.add_subparsers(dest="mail_command", metavar="ACTION", required=True)
    json_flag(leaf(mails, "unknown", cmd_mail_unknown,
                   "every email of unknown fate (any kind): it may have arrived, so nothing "
                   "sends it again on its own"))
    leaf(mails, "resend", cmd_mail_resend,
         "send that email again now (the recipient may get it twice)"
         ).add_argument("mail_id", metavar="ID", type=whole)

    report = commands.add_parser("report", help="reports: each tender's hours on the roster")
    reports = report.add_subparsers(dest="report", metavar="REPORT", required=True)
    hours = leaf(reports, "hours", cmd_report_hours,
                 "each tender's shifts and hours in sent weeks between two dates, and of "
                 "those the ones still to come at --now")
    hours.add_argument("--from", dest="start", metavar="YYYY-MM-DD", type=day, required=True,
                       help="the first day (a shift counts on the day it starts)")
    hours.add_argument("--to", dest="end", metavar="YYYY-MM-DD", type=day, required=True,
                       help="the last day, included")
    shape = hours.add_mutually_exclusive_group()
    shape.add_argument("--csv", action="store_true",
                       help="CSV for a spreadsheet: name,email,shifts,hours,shifts_to_come,"
                            "hours_to_come,active")
    shape.add_argument("--json", action="store_true", help="print JSON")

    avail = leaf(commands, "avail", cmd_avail, "submit availability as that tender")
    avail.add_argument("week", metavar="WEEK", type=week)
    avail.add_argument("email", metavar="EMAIL")
    avail.add_argument("shift_ids", metavar="SHIFT_ID", type=whole, nargs="+")
    avail.add_argument("--max", metavar="N", type=whole, default=None,
                       help="at most N shifts this week")
    avail.add_argument("--usual", action="store_true",
                       help="also save this as the tender's usual (the form's \"save this "
                            "as my usual\")")

    leaf(commands, "tick", cmd_tick,
         "the every-minute cron's work, once (legacy crons with the flag off)")
    secret = commands.add_parser("secret", help="make a key for PUBSCHED_SECRET")
    leaf(secret.add_subparsers(dest="secret_command", metavar="ACTION", required=True), "new",
         cmd_secret_new, "print a new random key for PUBSCHED_SECRET (rotation: the old one "
         "goes to PUBSCHED_SECRET_PREVIOUS)", checks_db_url=False)
    leaf(commands, "demo", cmd_demo,
         "a whole week's lifecycle on a temporary SQLite database, narrated",
         checks_db_url=False)
    serve = leaf(commands, "serve", cmd_serve, "the web admin and the every-minute ticker",
                 checks_db_url=False, acts_as_cli=False)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=whole, default=8000)
    serve.add_argument("--no-tick", action="store_true",
                       help="no ticker in this process: `pubsched tick` runs every minute "
                       "elsewhere (deploy/pubsched-tick.timer, cron)")
    serve.add_argument("--metrics-port", type=whole, default=None, metavar="PORT",
                       help="also serve /metrics on 127.0.0.1:PORT, without a login, for "
                       "a Prometheus on this machine")
    return parser
