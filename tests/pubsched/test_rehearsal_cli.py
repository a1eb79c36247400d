"""``pubsched cutover rehearse`` and the refusal it lifts (#17.7), on SQLite and a real
PostgreSQL, through the real CLI in-process and a loopback SMTP server: one line per step
as it goes, exit 0 passed, 1 a step failed (which and why), 2 no operator address (nothing
written); ``flag v2 on`` over weeks exit 3 REHEARSAL_REQUIRED, ``--force`` too, until one
passed; ``cutover check`` says whether one has."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest

from pubsched import cli
from pubsched.rehearsal import STEPS
from support.pub_cli import one_line, snapshot
from support.pubs import WEEK
from support.smtp_server import SmtpTestServer

OPERATOR = "ops@pub.example"


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


class Cli:
    def __init__(self, url: str, env: dict[str, str]) -> None:
        self.url, self.env = url, env

    def __call__(self, *argv: str, **env: str) -> Ran:
        out, err = io.StringIO(), io.StringIO()
        code = cli.run(["--db", self.url, *argv], environ={**self.env, **env},
                       stdout=out, stderr=err)
        return Ran(code, out.getvalue(), err.getvalue())

    def ok(self, *argv: str) -> Ran:
        ran = self(*argv)
        assert ran.code == 0, ran
        return ran


@pytest.fixture
def run(db_url: str, smtp: SmtpTestServer) -> Cli:
    """A database with weeks on the legacy engine and three tenders (a legacy install)."""
    runner = Cli(db_url, smtp.env(PUBSCHED_MAIL_FROM="schedule@pub.example",
                                  PUBSCHED_OPERATOR_EMAIL=OPERATOR, PUBSCHED_SMTP_TIMEOUT="5"))
    runner.ok("init")
    runner.ok("flag", "v2", "off")
    for name in ("ann", "bob", "cy"):
        runner.ok("tender", "add", name.title(), f"{name}@pub.example")
    runner.ok("week", "create", WEEK)
    return runner






def test_rehearse_prints_each_step_and_lifts_the_refusal(run: Cli, smtp: SmtpTestServer) -> None:
    assert "none has passed" in run.ok("cutover", "check").out
    for force in ((), ("--force",)):
        refused = run("flag", "v2", "on", *force)
        assert refused.code == 3 and "REHEARSAL_REQUIRED" in one_line(refused.err), force
        assert "pubsched cutover rehearse" in refused.err
    ran = run.ok("cutover", "rehearse")
    lines = ran.out.splitlines()
    assert lines[0].startswith("rehearsal 1: the week of ") and OPERATOR in lines[0]
    steps = lines[1:-1]
    assert [line.split(" ", 1)[0] for line in steps] == [
        f"{i}/{len(STEPS)}" for i in range(1, len(STEPS) + 1)]
    assert steps[0].split(": ")[0].startswith("1/9 open the form for the week of ")
    assert all(": done (" in line for line in steps), steps
    assert lines[-1].startswith("rehearsal passed")
    assert ran.err == ""
    assert {to for m in smtp.received for to in m.rcpt_tos} == {OPERATOR}
    assert len(smtp.accepted) == 3
    assert "rehearsal: passed " in run.ok("cutover", "check").out
    assert "PUB_SCHEDULER_V2 on" in run.ok("flag", "v2", "on").out


def test_a_failing_step_exits_1_naming_it_and_the_flag_stays_refused(
        run: Cli, smtp: SmtpTestServer) -> None:
    smtp.stop()  # the operator's mail server is down
    ran = run("cutover", "rehearse")
    assert ran.code == 1, ran
    assert "9/9 send the schedule (to the operator only): FAILED (" in ran.out
    assert one_line(ran.err).startswith("pubsched: failed: rehearsal failed at send: ")
    smtp.start()
    assert "REHEARSAL_REQUIRED" in one_line(run("flag", "v2", "on", "--force").err)
    assert "none has passed" in run.ok("cutover", "check").out


def test_no_operator_address_exits_2_and_writes_nothing(run: Cli, db_url: str) -> None:
    before = snapshot(db_url)
    ran = run("cutover", "rehearse", PUBSCHED_OPERATOR_EMAIL="")
    assert ran.code == 2 and "set PUBSCHED_OPERATOR_EMAIL" in one_line(ran.err)
    assert ran.out == "" and snapshot(db_url) == before
