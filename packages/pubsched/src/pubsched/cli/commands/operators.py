"""``pubsched operator add|list|password|remove``: the accounts that log in to the web
admin.

``add`` and ``password`` never take the password as an argument (it would sit in the
shell's history and in every process listing): ``--password-stdin`` reads one line from
standard input (for scripts:
``printf '%s\\n' "$PW" | pubsched operator add ann@pub.example --password-stdin``), and on
a terminal it is asked twice, unechoed. A password that is too short, two answers
that differ or no password at all is bad input (exit 2) with nothing written.

``password`` sets an account's password without asking for the old one: this is where a
forgotten one is replaced (whoever can run this can read the database anyway). Every
session of the account ends.

``remove`` of the last account is allowed here, and said: the CLI is where a locked-out
web admin is recovered (``operator add``), so refusing would protect nothing."""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import datetime

from ...verdicts import BadInput
from ..context import EXIT_APPLIED, Context, report
from ..output import listing


def _password(ctx: Context, from_stdin: bool) -> str:
    """The new password: a line of stdin, or asked twice on a terminal."""
    stdin = ctx.stdin if ctx.stdin is not None else sys.stdin
    if from_stdin:
        line = stdin.readline()
        if not line:
            raise BadInput("--password-stdin: standard input was empty")
        return line[:-1] if line.endswith("\n") else line
    isatty = getattr(stdin, "isatty", None)
    if not (isatty and isatty()):
        raise BadInput("no password: pass --password-stdin and write it to standard input, "
                       "or run this on a terminal to be asked")
    first = getpass.getpass("Password (at least 12 characters): ")
    second = getpass.getpass("The same password again: ")
    if first != second:
        raise BadInput("the two passwords differ: nothing was saved")
    return first


def cmd_operator_add(ctx: Context, args: argparse.Namespace) -> int:
    from ...people import operators

    address = operators.check_operator_email(args.email)  # before asking for a password
    password = operators.check_password(_password(ctx, args.password_stdin))
    return report(ctx, operators.add(ctx.pub(), address, password, now=ctx.now))


def cmd_operator_password(ctx: Context, args: argparse.Namespace) -> int:
    from ...people import operators

    pub = ctx.pub()
    if operators.find(pub, args.email) is None:  # before asking for a password
        raise BadInput(f"no operator account with email {args.email!r}")
    password = operators.check_password(_password(ctx, args.password_stdin))
    return report(ctx, operators.set_password(pub, args.email, password))


def cmd_operator_list(ctx: Context, args: argparse.Namespace) -> int:
    from ...people import operators

    pub = ctx.pub()
    found = [o.as_json() for o in operators.all_operators(pub)]

    def local(value: str | None) -> str:  # the table in the pub's own time
        if value is None:
            return "never"
        here = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(pub.config.tz)
        return f"{here:%a %d %b %Y, %H:%M} {here.tzname()}"

    return listing(ctx, args.json, found, "no operator accounts yet: add one with "
                   "`pubsched operator add EMAIL`", ("id", "email", "added", "last login"),
                   lambda o: (str(o["id"]), o["email"], local(o["created_at"]),
                              local(o["last_login_at"])))


def cmd_operator_remove(ctx: Context, args: argparse.Namespace) -> int:
    from ...people import operators

    verdict = operators.remove(ctx.pub(), args.email)
    code = report(ctx, verdict)
    if code == EXIT_APPLIED and verdict.detail.get("left") == 0:
        ctx.say("warning: no operator accounts are left: the web admin opens only with "
                "PUBSCHED_ADMIN_PASSWORD (as `admin`) until `pubsched operator add EMAIL`")
    return code
