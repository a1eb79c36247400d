"""The operator CLI in-process, for the tests of one feature's commands: exit code, stdout
and stderr of one ``pubsched --db URL ...`` call, and every row of every table (to assert
that bad input wrote nothing)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import pytest

from pubsched import cli
from pubsched import db as pubdb

OPERATOR = "ops@pub.example"


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

    def json(self, *argv: str) -> Any:
        return self.ok(*argv, "--json").json()

    def tenders(self) -> dict[str, dict[str, Any]]:
        """``tender list --json`` by email."""
        return {t["email"]: t for t in self.json("tender", "list")}


_TABLES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table' "
              "AND name NOT LIKE 'sqlite_%%' ORDER BY name",  # %% : rowstate's placeholders
    "postgresql": "SELECT table_name AS name FROM information_schema.tables "
                  "WHERE table_schema = current_schema() ORDER BY table_name",
}


def snapshot(url: str, tables: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    """Every row of every table of the database (or of ``tables``), to compare before and
    after a command: a table a later migration adds is covered without naming it here."""
    store = pubdb.open_store(url)
    try:
        with store.atomic() as tx:
            names = tables or tuple(r["name"] for r in tx.execute(_TABLES[store.dialect]))
            return {t: sorted(map(repr, tx.execute(f"SELECT * FROM {t}"))) for t in names}
    finally:
        store.close()


def one_line(err: str) -> str:
    """stderr, which must be one line and no traceback (a script's log reads it)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def use_env(monkeypatch: pytest.MonkeyPatch, server: Any, **extra: str) -> None:
    """The process environment the CLI reads: ``server`` (a SmtpTestServer) for mail, the
    operator's address, ``extra``; no other PUBSCHED_ setting of the machine's."""
    for name in list(os.environ):
        if name.startswith("PUBSCHED_"):
            monkeypatch.delenv(name)
    for name, value in server.env(PUBSCHED_MAIL_FROM="schedule@pub.example",
                                  PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                  PUBSCHED_SMTP_TIMEOUT="5", **extra).items():
        monkeypatch.setenv(name, value)
