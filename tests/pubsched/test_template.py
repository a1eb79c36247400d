"""The pub's week (issue 18): ``pubsched shift add|list|edit|remove`` and ``week create``
reading the template from the database, on SQLite (PostgreSQL where marked). Bad values exit 2 with
every table as it was; a template change reaches only the weeks created after it."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

import pytest

from pubsched.db import open_store
from pubsched.week.template import read
from pubsched.week.time import DEFAULT_TEMPLATE
from support.pub_cli import Cli, snapshot
from support.pubs import NEXT, WEEK

SEEDED = [
    {"id": 1, "label": "Thursday night", "day": "thu", "start": "18:00", "end": "02:00",
     "slots": 2, "needs": []},
    {"id": 2, "label": "Friday night", "day": "fri", "start": "18:00", "end": "02:00",
     "slots": 2, "needs": []},
    {"id": 3, "label": "Saturday night", "day": "sat", "start": "18:00", "end": "02:00",
     "slots": 2, "needs": []},
]


@pytest.fixture
def run(db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> Cli:
    for name in list(os.environ):
        if name.startswith("PUBSCHED_"):
            monkeypatch.delenv(name)
    return Cli(db_url, capsys)


def week_shifts(run: Cli, week: str) -> list[dict[str, Any]]:
    shifts: list[dict[str, Any]] = run.json("week", "show", week)["shifts"]
    return shifts


def hours(shift: dict[str, Any]) -> float:
    start = datetime.fromisoformat(shift["starts_at"])
    end = datetime.fromisoformat(shift["ends_at"])
    return (end - start) / timedelta(hours=1)


def test_a_new_database_starts_with_the_three_shifts_fixed_in_code(run: Cli) -> None:
    assert run.json("shift", "list") == SEEDED
    store = open_store(run.url)
    try:
        with store.atomic() as tx:
            assert tuple(t.as_weekly() for t in read(tx)) == DEFAULT_TEMPLATE
    finally:
        store.close()
    created = run.ok("week", "create", WEEK)
    assert "3 shifts" in created.out
    shown = week_shifts(run, WEEK)
    assert [s["label"] for s in shown] == ["Thursday night", "Friday night", "Saturday night"]
    assert [s["needs"] for s in shown] == [[], [], []]
    assert [hours(s) for s in shown] == [8, 8, 8]
    assert [s["when"] for s in shown] == ["Thu 10 Dec 18:00-02:00", "Fri 11 Dec 18:00-02:00",
                                          "Sat 12 Dec 18:00-02:00"]
    assert "Thu 10 Dec 18:00-02:00" in run.ok("week", "show", WEEK).out  # the roster table


def test_shift_add_lists_in_week_order_with_its_skills(run: Cli) -> None:
    added = run.ok("shift", "add", "Sunday lunch", "--day", "sun", "--start", "12:00",
                   "--end", "16:00", "--slots", "3", "--needs", "Bar", "--needs", "bar",
                   "--needs", "cellar")
    assert "added Sunday lunch" in added.out
    run.ok("shift", "add", "Quiz", "--day", "Monday", "--start", "19:30", "--end", "23:00")
    listed = run.json("shift", "list")
    assert [t["label"] for t in listed] == ["Quiz", "Thursday night", "Friday night",
                                            "Saturday night", "Sunday lunch"]
    assert listed[0] == {"id": 5, "label": "Quiz", "day": "mon", "start": "19:30",
                         "end": "23:00", "slots": 2, "needs": []}
    assert listed[-1]["needs"] == ["bar", "cellar"] and listed[-1]["slots"] == 3
    text = run.ok("shift", "list").out
    assert "Sunday lunch" in text and "bar, cellar" in text


BAD = [
    ("shift", "add", "X", "--day", "someday", "--start", "18:00", "--end", "22:00"),
    ("shift", "add", "X", "--day", "fri", "--start", "25:00", "--end", "22:00"),
    ("shift", "add", "X", "--day", "fri", "--start", "18:00", "--end", "7pm"),
    ("shift", "add", "X", "--day", "fri", "--start", "12:00", "--end", "22:00", "--slots", "0"),
    ("shift", "add", "X", "--day", "fri", "--start", "12:00", "--end", "22:00", "--slots", "21"),
    ("shift", "add", "", "--day", "fri", "--start", "12:00", "--end", "22:00"),
    ("shift", "add", "   ", "--day", "fri", "--start", "12:00", "--end", "22:00"),
    ("shift", "add", "x" * 41, "--day", "fri", "--start", "12:00", "--end", "22:00"),
    ("shift", "add", "X", "--day", "fri", "--start", "12:00", "--end", "22:00",
     "--needs", "bar,door"),
    ("shift", "add", "X", "--day", "fri", "--start", "12:00", "--end", "22:00",
     "--needs", "bar staff"),
    ("shift", "add", "Twin", "--day", "fri", "--start", "18:00", "--end", "23:00"),
    ("shift", "edit", "99", "--slots", "3"),
    ("shift", "edit", "1"),
    ("shift", "edit", "1", "--day", "fri"),  # Friday 18:00 is shift 2's
    ("shift", "edit", "1", "--slots", "0"),
    ("shift", "edit", "1", "--label", ""),
    ("shift", "edit", "1", "--needs", "bar", "--no-needs"),
    ("shift", "remove", "99"),
]


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(a)[:60] for a in BAD])
def test_bad_values_exit_2_and_write_nothing(run: Cli, argv: tuple[str, ...]) -> None:
    before = snapshot(run.url)
    ran = run(*argv)
    assert ran.code == 2, ran
    assert ran.err.startswith("pubsched: error:") and "Traceback" not in ran.err
    assert ran.err.count("\n") == 1
    assert snapshot(run.url) == before


@pytest.mark.both_databases("the template's updates")
def test_shift_edit_changes_only_what_is_given(run: Cli) -> None:
    run.ok("shift", "add", "Late bar", "--day", "fri", "--start", "22:00", "--end", "03:00",
           "--needs", "bar")
    edited = run.ok("shift", "edit", "4", "--slots", "4", "--no-needs", "--label", "Late")
    assert "the pub's week now has Late" in edited.out
    run.ok("shift", "edit", "1", "--start", "17:30", "--needs", "door")
    listed = {t["id"]: t for t in run.json("shift", "list")}
    assert listed[4] == {"id": 4, "label": "Late", "day": "fri", "start": "22:00",
                         "end": "03:00", "slots": 4, "needs": []}
    assert listed[1]["start"] == "17:30" and listed[1]["needs"] == ["door"]
    assert listed[1]["label"] == "Thursday night" and listed[1]["end"] == "02:00"


@pytest.mark.both_databases("the template's insert and delete, and weeks made from it")
def test_template_changes_reach_only_weeks_created_afterwards(run: Cli) -> None:
    run.ok("week", "create", WEEK)
    before = week_shifts(run, WEEK)
    run.ok("shift", "edit", "2", "--slots", "5", "--needs", "cellar", "--label", "Big Friday")
    run.ok("shift", "remove", "3")
    run.ok("shift", "add", "Sunday", "--day", "sun", "--start", "12:00", "--end", "12:00",
           "--needs", "kitchen")
    assert week_shifts(run, WEEK) == before  # a week keeps the shifts it was created with
    assert [s["label"] for s in before][2] == "Saturday night"  # removed, still here
    created = run.ok("week", "create", NEXT)
    assert "3 shifts" in created.out
    later = week_shifts(run, NEXT)
    assert [(s["label"], s["slots"], s["needs"]) for s in later] == [
        ("Thursday night", 2, []), ("Big Friday", 5, ["cellar"]), ("Sunday", 2, ["kitchen"])]
    assert hours(later[2]) == 24  # an end at the start: the next day


def test_week_open_creates_from_the_template_too(run: Cli) -> None:
    run.ok("shift", "remove", "1")
    run.ok("shift", "remove", "2")
    run.ok("week", "open", WEEK, "--now", "2026-11-30T15:00:00Z")
    assert [s["label"] for s in week_shifts(run, WEEK)] == ["Saturday night"]
