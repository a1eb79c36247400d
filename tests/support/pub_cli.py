"""The operator CLI in-process, for the tests of one feature's commands: exit code, stdout
and stderr of one ``pubsched --db URL ...`` call, and every row of the tables it may touch
(to assert that bad input wrote nothing)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from pubsched import cli
from pubsched import db as pubdb

TABLES = ("pub_shift_template", "pub_schedule_runs", "pub_shifts", "pub_availability",
          "pub_availability_shifts", "pub_assignments", "pub_removed_shifts",
          "rowstate_events")


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


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
        return Ran(code, captured.out, captured.err)

    def ok(self, *argv: str) -> Ran:
        ran = self(*argv)
        assert ran.code == 0, ran
        return ran

    def json(self, *argv: str) -> Any:
        return self.ok(*argv, "--json").json()


def snapshot(url: str, tables: tuple[str, ...] = TABLES) -> dict[str, list[str]]:
    """Every row of every table named, to compare before and after a command."""
    store = pubdb.open_store(url)
    try:
        with store.atomic() as tx:
            return {t: sorted(map(repr, tx.execute(f"SELECT * FROM {t}"))) for t in tables}
    finally:
        store.close()
