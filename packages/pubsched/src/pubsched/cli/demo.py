"""``pubsched demo`` (and ``make demo``): a whole week's lifecycle, narrated, on a temporary
SQLite database, with every email shown.

The demo is a rehearsal typed by a pretend operator: each step is a real ``pubsched``
command run in-process through :func:`pubsched.cli.run`, printed as it would be typed, with
its output and exit code. So the newcomer sees the commands they will use, and the demo is
a smoke test of the whole stack (migrations, both front-end paths, the picker, the held
submissions, the send lease, SMTP). A step whose exit code is not the one the story expects
stops the demo with exit 1.

The mail goes through the real send path: an SMTP server (aiosmtpd, a dev dependency) on
127.0.0.1 in this process, which keeps what it receives so the demo can print it; without
aiosmtpd, the log mailer (what pubsched does with no SMTP host), whose messages are caught
from the log. The steps act at instants a few minutes apart from ``--now`` (default: the
real clock), on the week after next, as an operator preparing it would.

The command line is handed in (``run_demo(out, run=...)``: the ``demo`` command passes the
dispatcher it was called by, :func:`pubsched.cli.run_demo` binds :func:`pubsched.cli.run`), so
this module imports nothing of the CLI but its context's types, and the CLI's dispatcher
may reach the demo without the demo reaching back.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email import message_from_bytes, message_from_string, policy
from email.message import EmailMessage
from pathlib import Path
from typing import IO, Any

from .context import Runner

WEB_ADDRESS = "http://127.0.0.1:8000/"
OPERATOR = "operator@pub.example"
# name, email, maximum a week, skills (Ana holds the keys; Eli is new and answers no form,
# so he is free to cover when someone falls ill after the send)
TENDERS = (("Ana Alvarez", "ana@pub.example", None, ("keys",)),
           ("Ben Brook", "ben@pub.example", None, ()),
           ("Cleo Chen", "cleo@pub.example", "1", ()),
           ("Dev Dara", "dev@pub.example", None, ()),
           ("Eli Ennis", "eli@pub.example", None, ()))


class DemoFailed(Exception):
    """A step ended with another exit code than the story expects."""


# -- where the mail goes -------------------------------------------------------------------


@dataclass
class Inbox:
    """What the demo's mail server (or the log mailer) was handed, as parsed messages."""

    messages: list[EmailMessage] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # PUBSCHED_SMTP_* when a server runs
    how: str = ""

    def take(self) -> list[EmailMessage]:
        taken, self.messages[:] = list(self.messages), []
        return taken


class _Keep:
    """aiosmtpd handler: accept and keep every message."""

    def __init__(self, inbox: Inbox) -> None:
        self._inbox = inbox

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        raw = envelope.original_content or envelope.content or b""
        data = raw if isinstance(raw, bytes) else str(raw).encode()
        parsed = message_from_bytes(data.replace(b"\r\n", b"\n"), policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        self._inbox.messages.append(parsed)
        return "250 OK"


class _LogCatcher(logging.Handler):
    """The log mailer's messages (logger ``pubsched.mail``), parsed back."""

    def __init__(self, inbox: Inbox) -> None:
        super().__init__(logging.INFO)
        self._inbox = inbox

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if isinstance(args, tuple) and len(args) == 3:
            parsed = message_from_string(str(args[2]), policy=policy.default)
            if isinstance(parsed, EmailMessage):
                self._inbox.messages.append(parsed)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def mail_catcher() -> Iterator[Inbox]:
    """An SMTP server on loopback when aiosmtpd is installed, else the log mailer."""
    inbox = Inbox()
    try:
        from aiosmtpd.controller import Controller
    except ImportError:
        inbox.how = "the log mailer (no SMTP host; aiosmtpd is not installed)"
        logger = logging.getLogger("pubsched.mail")
        catcher, level = _LogCatcher(inbox), logger.level
        logger.addHandler(catcher)
        logger.setLevel(logging.INFO)
        try:
            yield inbox
        finally:
            logger.removeHandler(catcher)
            logger.setLevel(level)
        return
    port = _free_port()
    controller = Controller(_Keep(inbox), hostname="127.0.0.1", port=port)
    controller.start()
    inbox.how = f"an SMTP server on 127.0.0.1:{port}, in this process"
    inbox.env = {"PUBSCHED_SMTP_HOST": "127.0.0.1", "PUBSCHED_SMTP_PORT": str(port)}
    try:
        yield inbox
    finally:
        controller.stop()


# -- the story -----------------------------------------------------------------------------


class Narrator:
    """Runs each step as a ``pubsched`` command and prints it, its output and exit code."""

    def __init__(self, out: IO[str], env: dict[str, str], start: datetime,
                 run: Runner) -> None:
        self.out = out
        self._run = run
        self.env = env
        self.at = start
        self.chapter = 0

    def tell(self, text: str) -> None:
        self.chapter += 1
        print(f"\n{self.chapter}. {text}", file=self.out)

    def note(self, text: str) -> None:
        print(f"   {text}", file=self.out)

    def run(self, *argv: str, expect: int = 0, now: bool = True, quiet: bool = False) -> str:
        """One command; its stdout (also printed unless ``quiet``)."""
        if now:
            self.at += timedelta(minutes=7)
            argv = (*argv, "--now", self.at.isoformat().replace("+00:00", "Z"))
        out, err = io.StringIO(), io.StringIO()
        code = self._run(list(argv), environ=self.env, stdout=out, stderr=err)
        if not quiet:
            print(f"   $ pubsched {' '.join(_quoted(a) for a in argv)}", file=self.out)
            for line in (out.getvalue() + err.getvalue()).rstrip("\n").splitlines():
                print(f"     {line}", file=self.out)
            if code:
                print(f"     (exit {code})", file=self.out)
        if code != expect:
            raise DemoFailed(f"`pubsched {' '.join(argv)}` exited {code}, expected {expect}: "
                             f"{err.getvalue().strip() or out.getvalue().strip()}")
        return out.getvalue()

    def show_mail(self, messages: Sequence[EmailMessage]) -> None:
        for n, message in enumerate(messages, 1):
            print(f"\n   -- email {n} of {len(messages)} " + "-" * 50, file=self.out)
            for header in ("From", "To", "Subject", "Date"):
                print(f"   {header}: {message[header]}", file=self.out)
            body = message.get_body(preferencelist=("plain",))
            text = body.get_content() if body is not None else ""
            for line in str(text).rstrip().splitlines():
                print(f"   | {line}", file=self.out)
            for part in message.iter_attachments():
                print(f"   [attached: {part.get_filename()} ({part.get_content_type()})]",
                      file=self.out)


def _quoted(arg: str) -> str:
    return f'"{arg}"' if not arg or any(c in arg for c in " '") else arg


def _week_after_next(at: datetime) -> str:
    """The Monday of the week after next: the week an operator prepares now (its form
    opens the Monday before it)."""
    monday = at.astimezone(UTC).date() - timedelta(days=at.astimezone(UTC).weekday())
    return (monday + timedelta(days=14)).isoformat()


def story(n: Narrator, db_url: str, inbox: Inbox) -> None:
    week = _week_after_next(n.at)
    n.tell("A new pub: create the database. A database with no weeks starts on the v2 "
           "state machine; the cutover check says this is the idle gap.")
    n.run("init", now=False)
    n.run("cutover", "check")

    n.tell("The pub's week: the shifts every new week gets. It starts with Thursday to "
           "Saturday nights; this pub also opens for Sunday lunch, which needs someone "
           "with the keys.")
    n.run("shift", "list", now=False)
    n.run("shift", "add", "Sunday lunch", "--day", "sun", "--start", "12:00", "--end",
          "17:00", "--slots", "2", "--needs", "keys", now=False)

    n.tell("The tenders, with what they can do. An email is one tender, in any case: "
           "adding Ana again is refused.")
    for name, email, limit, skills in TENDERS:
        n.run("tender", "add", name, email, *(("--max-shifts", limit) if limit else ()),
              *(arg for skill in skills for arg in ("--skill", skill)), now=False)
    n.run("tender", "add", "Ana again", "ANA@pub.example", expect=3, now=False)

    n.tell(f"Open the availability form for the week of {week}. No email goes out: each "
           "tender has a personal link (`tender invite --all` mails it to them).")
    n.run("week", "open", week)
    n.run("tender", "link", "ana@pub.example", now=False)
    shown = json.loads(n.run("week", "show", week, "--json", quiet=True))
    ids = [str(s["id"]) for s in shown["shifts"]]
    n.note("the week's shifts: " + ", ".join(f"{s['id']} = {s['label']} ({s['when']})"
                                             for s in shown["shifts"]))

    n.tell("Tenders say which shifts they can work (through their link; here, the CLI).")
    n.run("avail", week, "ana@pub.example", ids[0], ids[1], ids[3])
    n.run("avail", week, "ben@pub.example", ids[1], ids[2], ids[3], "--max", "2")
    n.run("avail", week, "cleo@pub.example", *ids[:3])

    deadline = datetime.fromisoformat(str(shown["deadline_at"]).replace("Z", "+00:00"))
    later = (deadline + timedelta(hours=12)).isoformat().replace("+00:00", "Z")
    n.tell("Not everyone has answered: extend the deadline.")
    n.run("week", "extend", week, "--deadline", later)

    n.tell("Close the form. A submission now is refused: submissions are held writes that "
           "only commit while the form is open.")
    n.run("week", "close", week)
    n.run("avail", week, "dev@pub.example", ids[0], expect=3)

    n.tell("Make the roster: the fair picker fills every fillable slot, a key-holder on "
           "Sunday lunch, spreading the load.")
    n.run("week", "generate", week)

    n.tell("Dev asks to be included: reopen (the roster is kept), take the late answer, "
           "close again and make the roster again.")
    n.run("week", "reopen", week)
    n.run("avail", week, "dev@pub.example", ids[0], ids[2])
    n.run("week", "close", week)
    n.run("week", "generate", week)

    n.tell("Ben rings: he can't do Sunday lunch after all. Take him off it, and put Dev on "
           "(pinned: he did not offer it, so a warning says so). The roster made again "
           "keeps both: Dev stays, Ben is not put back.")
    n.run("week", "unassign", week, ids[3], "ben@pub.example")
    n.run("week", "assign", week, ids[3], "dev@pub.example")
    n.run("week", "generate", week)

    n.tell("Review and approve (reversible until sent), then send the schedule email.")
    n.run("week", "approve", week)
    n.run("week", "send", week)
    mail = inbox.take()
    n.note(f"{len(mail)} email(s) went out through {inbox.how}:")
    n.show_mail(mail)

    n.tell("Sent is final: a second send is refused, and nobody gets the email twice.")
    n.run("week", "send", week, expect=3)
    if inbox.take():
        raise DemoFailed("a refused send handed a message to the mailer")

    cover_story(n, week, inbox)

    n.tell("The week as the operator sees it: the roster as it is now, the cover, the "
           "deliveries, the history.")
    n.run("week", "show", week, now=False)
    n.run("weeks", now=False)

    print(f"\nThe demo's database is kept at {db_url}. To look at it in the web admin:\n"
          f"   PUBSCHED_DB={db_url} PUBSCHED_ADMIN_PASSWORD=demo-password "
          f"PUBSCHED_INSECURE_COOKIES=1 {_script()} serve\n"
          f"then open {WEB_ADDRESS}admin/weeks/{week} and log in as admin with the password "
          "'demo-password'.",
          file=n.out)


def cover_story(n: Narrator, week: str, inbox: Inbox) -> None:
    """After the send: a tender asks for cover, another takes it from their offer."""
    shown = json.loads(n.run("week", "show", week, "--json", now=False, quiet=True))
    shift = next(s for s in shown["shifts"] if s["assigned"])
    asker = shift["assigned"][0]
    n.tell(f"After the send, {shown['names'].get(asker, asker)} falls ill: they ask for "
           f"cover for {shift['label']}. The week stays sent; the tenders free that night, "
           "under their maximum and with the skills the shift needs are offered it (least "
           "recently covering first), and the operator is told.")
    n.run("cover", "ask", week, str(shift["id"]), asker, "--note", "Down with flu, sorry!")
    [cover] = json.loads(n.run("cover", "list", "--json", now=False, quiet=True))
    offers = inbox.take()
    takers = [str(m["X-Pubsched-Intended-For"]) for m in offers
              if "can you cover" in str(m["Subject"])]
    if not takers:
        raise DemoFailed("nobody was offered the cover request")
    taker = takers[0]
    n.note(f"{len(offers)} email(s): an offer to each who could take it, and a note to the "
           "operator. The first offer:")
    n.show_mail(offers[:1])

    n.tell("The first to press \"I'll take it\" gets the shift (here, the CLI does what "
           "the link's button does): in one unit of work the request is taken and the "
           "roster moves from one to the other. Both get their calendars changed (the "
           "asker's event cancelled, the taker's added), and the operator is told.")
    n.run("cover", "take", str(cover["id"]), taker)
    mail = inbox.take()
    n.show_mail(mail)
    other = next(e for _, e, _, _ in TENDERS if e not in (asker, taker))
    n.tell("Someone else tries to take it a moment later: told it was taken, nothing "
           "changes.")
    n.run("cover", "take", str(cover["id"]), other, expect=3)
    n.run("cover", "list", now=False)


def _script() -> str:
    """How to call ``pubsched`` from here: by name when it is on PATH, else by its path
    (``make demo`` runs it from .venv/bin, which is seldom on PATH)."""
    if shutil.which("pubsched"):
        return "pubsched"
    beside = Path(sys.executable).parent / "pubsched"
    if not beside.exists():
        return "pubsched"
    try:
        return str(beside.relative_to(Path.cwd()))
    except ValueError:
        return str(beside)


def run_demo(out: IO[str], *, run: Runner, now: datetime | None = None,
             directory: str | None = None) -> int:
    """The narrated week; exit 0 when every step did what the story says, 1 otherwise."""
    start = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    folder = directory or tempfile.mkdtemp(prefix="pubsched-demo-")
    db_url = f"sqlite:///{os.path.join(folder, 'demo.db')}"
    with mail_catcher() as inbox:
        env = {"PUBSCHED_DB": db_url, "PUBSCHED_TZ": "America/New_York",
               "PUBSCHED_MAIL_FROM": "schedule@pub.example",
               "PUBSCHED_PUB_NAME": "The Crown", "USER": "demo",
               "PUBSCHED_PUB_ADDRESS": "1 Market Street, Springfield",
               "PUBSCHED_OPERATOR_EMAIL": OPERATOR, **inbox.env}
        print(f"pubsched demo: one week of a pub's schedule, start to finish.\n"
              f"database: {db_url}\nmail: {inbox.how}", file=out)
        try:
            story(Narrator(out, env, start, run), db_url, inbox)
        except DemoFailed as exc:
            print(f"\ndemo failed: {exc}", file=out)
            return 1
    return 0
