"""The roster by hand (issue 18): ``week assign`` / ``week unassign`` on SQLite and
PostgreSQL, through the CLI in-process: exit codes, the warning line, ``week show --json``
(``pinned``, ``missing``), regenerate keeping pins and exclusions, the skills the picker
honours, and bad input or a refusal writing nothing (every table compared)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import pytest

from pubsched import cli
from pubsched import db as pubdb
from support.pubs import NEXT, NOW_ISO, WEEK

TABLES = ("pub_tenders", "pub_schedule_runs", "pub_shifts", "pub_availability",
          "pub_availability_shifts", "pub_assignments", "pub_roster_edits", "rowstate_events")
ANA, BEN, CLEO, DEE = (f"{n}@pub.example" for n in ("ana", "ben", "cleo", "dee"))


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


class Cli:
    def __init__(self, url: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.url, self.capsys = url, capsys

    def __call__(self, *argv: str) -> Ran:
        self.capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            cli.main(["--db", self.url, *argv])
        captured = self.capsys.readouterr()
        assert isinstance(exited.value.code, int)
        return Ran(exited.value.code, captured.out, captured.err)

    def ok(self, *argv: str) -> Ran:
        ran = self(*argv)
        assert ran.code == 0, ran
        return ran

    def show(self, week: str = WEEK) -> dict[str, Any]:
        shown: dict[str, Any] = json.loads(self.ok("week", "show", week, "--json").out)
        return shown

    def on(self, shift: int) -> list[str]:
        return next(s["assigned"] for s in self.show()["shifts"] if s["id"] == shift)

    def sql(self, statement: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        store = pubdb.open_store(self.url)
        try:
            with store.atomic() as tx:
                return tx.execute(statement, params or [])
        finally:
            store.close()

    def snapshot(self) -> dict[str, list[str]]:
        return {t: sorted(map(repr, self.sql(f"SELECT * FROM {t}"))) for t in TABLES}


@pytest.fixture
def run(db_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in list(os.environ):
        if name.startswith("PUBSCHED_"):
            monkeypatch.delenv(name)
    runner = Cli(db_url, capsys)
    runner.ok("init")
    for email in (ANA, BEN, CLEO, DEE):
        runner.ok("tender", "add", email.split("@")[0].title(), email)
    return runner


def collecting(run: Cli, v2: bool = True) -> list[int]:
    run.ok("flag", "v2", "on" if v2 else "off", "--force")
    run.ok("week", "open", WEEK, "--now", NOW_ISO)
    return [int(s["id"]) for s in run.show()["shifts"]]


def assigned(run: Cli, v2: bool = True) -> list[int]:
    """A week in ASSIGNED: Thu, Fri, Sat (2 slots each); Ana and Ben gave Thu and Fri,
    Cleo Sat; Dee gave nothing."""
    thu, fri, sat = ids = collecting(run, v2)
    run.ok("avail", WEEK, ANA, str(thu), str(fri))
    run.ok("avail", WEEK, BEN, str(thu), str(fri))
    run.ok("avail", WEEK, CLEO, str(sat))
    run.ok("week", "close", WEEK)
    run.ok("week", "generate", WEEK)
    return ids


@pytest.mark.both_databases("the pin's upsert and the regenerate that keeps it")
def test_assign_pins_a_tender_and_regenerate_keeps_the_pin(run: Cli) -> None:
    thu, _fri, sat = assigned(run)
    assert run.on(sat) == [CLEO]
    pinned = run("week", "assign", WEEK, str(sat), DEE)
    assert pinned.code == 0, pinned
    assert pinned.out.strip() == f"pinned Dee on {run.show()['shifts'][2]['label']}"
    warning = pinned.err.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("pubsched: warning: Dee")
    assert "did not say they can work" in warning[0]
    shown = {s["id"]: s for s in run.show()["shifts"]}
    assert shown[sat]["assigned"] == [CLEO, DEE] and shown[sat]["pinned"] == [DEE]
    assert shown[thu]["pinned"] == [] and shown[thu]["missing"] == []
    run.ok("week", "generate", WEEK)  # regenerate in place: the pin stays, without availability
    assert run.on(sat) == [CLEO, DEE]
    assert run.show()["shifts"][2]["pinned"] == [DEE]


def test_assign_with_availability_gives_no_warning_and_is_idempotent(run: Cli) -> None:
    thu, _fri, _sat = assigned(run)
    run.ok("week", "unassign", WEEK, str(thu), ANA)
    again = run.ok("week", "assign", WEEK, str(thu), ANA)
    assert again.err == ""
    before = run.sql("SELECT * FROM pub_assignments ORDER BY shift_id, tender_id")
    twice = run.ok("week", "assign", WEEK, str(thu), ANA)  # already pinned: nothing new
    assert twice.err == "" and run.on(thu).count(ANA) == 1
    assert run.sql("SELECT * FROM pub_assignments ORDER BY shift_id, tender_id") == before


@pytest.mark.both_databases("the unassign's delete")
def test_unassign_takes_off_and_regenerate_does_not_put_back(run: Cli) -> None:
    thu, fri, _sat = assigned(run)
    assert run.on(thu) == [ANA, BEN] and run.on(fri) == [ANA, BEN]
    took = run.ok("week", "unassign", WEEK, str(thu), ANA)
    assert "regenerate will not put them back there" in took.out and took.err == ""
    assert run.on(thu) == [BEN]
    assert run.show()["shifts"][0]["excluded"] == [ANA]
    run.ok("week", "generate", WEEK)
    assert run.on(thu) == [BEN] and run.on(fri) == [ANA, BEN]
    kinds = run.sql("SELECT kind FROM pub_roster_edits")
    assert [r["kind"] for r in kinds] == ["exclude"]
    # assign again lifts the exclusion (the row becomes a pin)
    run.ok("week", "assign", WEEK, str(thu), ANA)
    assert [r["kind"] for r in run.sql("SELECT kind FROM pub_roster_edits")] == ["pin"]
    run.ok("week", "generate", WEEK)
    assert run.on(thu) == [ANA, BEN]


def test_unassigning_a_pin_removes_it(run: Cli) -> None:
    _thu, _fri, sat = assigned(run)
    run.ok("week", "assign", WEEK, str(sat), DEE)
    run.ok("week", "unassign", WEEK, str(sat), DEE)
    assert run.show()["shifts"][2]["pinned"] == [] and run.on(sat) == [CLEO]
    run.ok("week", "generate", WEEK)
    assert run.on(sat) == [CLEO]


def test_a_full_shift_and_a_second_shift_that_night_are_refused(run: Cli) -> None:
    thu, _fri, _sat = assigned(run)
    before = run.snapshot()
    full = run("week", "assign", WEEK, str(thu), DEE)
    assert full.code == 3 and full.out == ""
    assert full.err.startswith("pubsched: refused (SLOT_FULL): ") and "full (2 of 2)" in full.err
    assert run.snapshot() == before
    # Two shifts on one night: the second on Thursday is a shift of its own.
    run.sql("INSERT INTO pub_shifts (week_of, night, label, starts_at, ends_at, slots) "
            "SELECT week_of, night, 'Thu late', ends_at, ends_at, 1 FROM pub_shifts "
            "WHERE id = %s", [thu])
    late = int(run.sql("SELECT id FROM pub_shifts WHERE label = 'Thu late'")[0]["id"])
    before = run.snapshot()
    night = run("week", "assign", WEEK, str(late), ANA)
    assert night.code == 3 and night.err.startswith("pubsched: refused (SAME_NIGHT): ")
    assert "already works that night" in night.err and len(night.err.splitlines()) == 1
    assert run.snapshot() == before


@pytest.mark.parametrize("argv", [
    ("assign", WEEK, "{sat}", "nobody@pub.example"),      # no such tender
    ("assign", WEEK, "999999", ANA),                      # no such shift
    ("assign", NEXT, "{sat}", ANA),                      # no such week
    ("assign", WEEK, "{other}", ANA),                     # a shift of another week
    ("assign", WEEK, "sat", ANA),                         # not a number
    ("assign", "2026-12-08", "{sat}", ANA),               # not a Monday
    ("unassign", WEEK, "{sat}", "nobody@pub.example"),
    ("unassign", WEEK, "999999", ANA),
])
def test_bad_input_is_exit_2_with_nothing_written(run: Cli, argv: tuple[str, ...]) -> None:
    _thu, _fri, sat = assigned(run)
    run.sql("INSERT INTO pub_schedule_runs (week_of) VALUES (%s)", ["2026-12-21"])
    run.sql("INSERT INTO pub_shifts (week_of, night, label, starts_at, ends_at, slots) "
            "VALUES ('2026-12-21', '2026-12-24', 'elsewhere', '2026-12-24T23:00:00Z', "
            "'2026-12-25T07:00:00Z', 2)")
    other = int(run.sql("SELECT id FROM pub_shifts WHERE label = 'elsewhere'")[0]["id"])
    before = run.snapshot()
    ran = run("week", *(a.format(sat=sat, other=other) for a in argv))
    assert ran.code == 2, ran
    assert "Traceback" not in ran.err and "error" in ran.err.strip().splitlines()[-1]
    assert run.snapshot() == before


def test_an_inactive_tender_cannot_be_pinned(run: Cli) -> None:
    _thu, _fri, sat = assigned(run)
    run.ok("tender", "deactivate", DEE)
    before = run.snapshot()
    ran = run("week", "assign", WEEK, str(sat), DEE)
    assert ran.code == 2 and "not an active tender" in ran.err
    assert run.snapshot() == before


def test_unassigning_someone_not_on_the_shift_is_refused(run: Cli) -> None:
    _thu, _fri, sat = assigned(run)
    before = run.snapshot()
    ran = run("week", "unassign", WEEK, str(sat), ANA)
    assert ran.code == 3 and ran.err.startswith("pubsched: refused (NOT_ON_SHIFT): Ana")
    assert run.snapshot() == before


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "legacy"])
def test_edits_are_refused_outside_assigned(run: Cli, v2: bool) -> None:
    thu, _fri, sat = collecting(run, v2)
    run.ok("avail", WEEK, CLEO, str(sat))
    before = run.snapshot()
    early = run("week", "assign", WEEK, str(sat), DEE)
    assert early.code == 3 and "(STATE_MISMATCH)" in early.err
    assert "close it and generate the roster first" in early.err
    assert run.snapshot() == before
    run.ok("week", "close", WEEK)
    run.ok("week", "generate", WEEK)
    run.ok("week", "assign", WEEK, str(sat), DEE)  # ASSIGNED: allowed with either engine
    run.ok("week", "approve", WEEK)
    before = run.snapshot()
    for argv in (("assign", WEEK, str(thu), DEE), ("unassign", WEEK, str(sat), CLEO)):
        late = run("week", *argv)
        assert late.code == 3 and "(STATE_MISMATCH)" in late.err
        assert "approved: un-approve it first" in late.err
    assert run.snapshot() == before
    run.ok("week", "unapprove", WEEK)
    run.ok("week", "unassign", WEEK, str(sat), CLEO)
    assert run.on(sat) == [DEE]


def test_a_reopen_keeps_the_edits(run: Cli) -> None:
    thu, _fri, sat = assigned(run)
    run.ok("week", "assign", WEEK, str(sat), DEE)
    run.ok("week", "unassign", WEEK, str(thu), ANA)
    run.ok("week", "reopen", WEEK)
    run.ok("avail", WEEK, DEE, str(thu))  # Dee now offers Thu as well
    run.ok("week", "close", WEEK)
    run.ok("week", "generate", WEEK)
    assert ANA not in run.on(thu) and DEE in run.on(sat)
    assert run.show()["shifts"][2]["pinned"] == [DEE]


def test_skills_a_shift_needs_are_met_or_reported_missing(run: Cli) -> None:
    thu, fri, sat = collecting(run)
    run.sql("UPDATE pub_shifts SET needs = %s WHERE id = %s", ['["keys"]', thu])
    run.sql("UPDATE pub_shifts SET needs = %s WHERE id = %s", ['["cellar"]', sat])
    run.sql("UPDATE pub_tenders SET skills = %s WHERE email = %s", ['["keys"]', DEE])
    for email in (ANA, BEN, CLEO):
        run.ok("avail", WEEK, email, str(thu), str(sat))
    run.ok("avail", WEEK, DEE, str(thu))
    run.ok("week", "close", WEEK)
    run.ok("week", "generate", WEEK)
    shown = {s["id"]: s for s in run.show()["shifts"]}
    assert DEE in shown[thu]["assigned"] and shown[thu]["missing"] == []
    # Nobody has cellar: its reserved slot stays empty rather than go to someone without it.
    assert len(shown[sat]["assigned"]) == 1 and shown[sat]["missing"] == ["cellar"]
    assert shown[fri]["missing"] == []
    # Taking Dee off Thursday: the keys are missing there now, and stay missing on regenerate.
    run.ok("week", "unassign", WEEK, str(thu), DEE)
    assert next(s for s in run.show()["shifts"] if s["id"] == thu)["missing"] == ["keys"]
    run.ok("week", "generate", WEEK)
    thursday = next(s for s in run.show()["shifts"] if s["id"] == thu)
    assert thursday["missing"] == ["keys"] and len(thursday["assigned"]) == 1
