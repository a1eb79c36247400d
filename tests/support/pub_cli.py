"""The operator CLI in-process for the tender tests (test_tender_commands.py,
test_invite.py): one call's exit code and output, and every row of every table to compare
before and after a command ("nothing written")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from pubsched import cli
from pubsched import db as pubdb

TABLES = ("pub_tenders", "pub_schedule_runs", "pub_shifts", "pub_availability",
          "pub_availability_shifts", "pub_assignments", "pub_deliveries", "pub_flags",
          "pub_mail_log", "rowstate_events")


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def line(self) -> str:
        """stderr, which must be one line (a script's log)."""
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        return lines[0]


class Cli:
    """``pubsched --db URL ...`` in-process."""

    def __init__(self, url: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.url = url
        self.capsys = capsys

    def __call__(self, *argv: str) -> Ran:
        self.capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            cli.main(["--db", self.url, *argv])
        captured = self.capsys.readouterr()
        code = exited.value.code
        assert isinstance(code, int)
        assert "Traceback" not in captured.err, captured.err
        return Ran(code, captured.out, captured.err)

    def ok(self, *argv: str) -> Ran:
        ran = self(*argv)
        assert ran.code == 0, ran
        return ran

    def tenders(self) -> dict[str, dict[str, Any]]:
        """``tender list --json`` by email."""
        return {t["email"]: t for t in self.ok("tender", "list", "--json").json()}


def snapshot(url: str) -> dict[str, list[Any]]:
    store = pubdb.open_store(url)
    try:
        with store.atomic() as tx:
            return {t: sorted(map(repr, tx.execute(f"SELECT * FROM {t}"))) for t in TABLES}
    finally:
        store.close()


OPERATOR = "ops@pub.example"


def use_env(monkeypatch: pytest.MonkeyPatch, server: Any, **extra: str) -> None:
    """The process environment the CLI reads: ``server`` (a SmtpTestServer) for mail, the
    operator's address, ``extra``; no other PUBSCHED_ setting of the machine's."""
    import os

    for name in list(os.environ):
        if name.startswith("PUBSCHED_"):
            monkeypatch.delenv(name)
    for name, value in server.env(PUBSCHED_MAIL_FROM="schedule@pub.example",
                                  PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                  PUBSCHED_SMTP_TIMEOUT="5", **extra).items():
        monkeypatch.setenv(name, value)
