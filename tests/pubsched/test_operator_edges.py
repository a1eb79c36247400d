"""The operator's commands at their edges (issue 17): instants and weeks at the calendar's
first and last days, a refused open, a half-written open, the database errors and a
database from other code. Each runs the CLI in-process (``cli.run``) on SQLite and on a
real PostgreSQL, and "nothing written" compares every table before and after."""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pubsched import cli
from pubsched import db as pubdb
from pubsched.verdicts import BadInput
from pubsched.week.runs import week_key
from pubsched.week.time import BadSettings, BadWeek, WeekTimeError, as_utc, run_times, week_of
from support.pub_cli import one_line, snapshot
from support.pubs import NEXT, NOW_ISO, WEEK

ENV = {"PUBSCHED_MAIL_FROM": "schedule@pub.example", "PUBSCHED_OPERATOR_EMAIL": "ops@pub.example"}


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


def pubsched(url: str, *argv: str) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["--db", url, *argv], environ=ENV, stdout=out, stderr=err)
    return Ran(code, out.getvalue(), err.getvalue())


def ok(url: str, *argv: str) -> Ran:
    ran = pubsched(url, *argv)
    assert ran.code == 0, ran
    return ran






# -- 19: the calendar's edges --------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["tick", "--now", "0001-01-01T00:00:00+14:00"],
    ["tick", "--now", "9999-12-31T23:59:59-12:00"],
    ["week", "open", "9999-12-27"],
    ["week", "open", "0001-01-01"],
    ["week", "open", "2026-12-07", "--now", "0001-01-01T00:00:00+14:00"],
])
def test_instants_and_weeks_at_the_calendars_edges_are_bad_input_with_nothing_written(
        db_url: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    ok(db_url, "init")
    before = snapshot(db_url)
    ran = pubsched(db_url, *argv)
    assert ran.code == 2, ran
    assert "Traceback" not in ran.err + capsys.readouterr().err
    assert snapshot(db_url) == before
    assert ok(db_url, "weeks").out.strip().startswith("no weeks yet")


def test_the_edges_are_refused_by_the_week_rules_themselves() -> None:
    for week in ("9999-12-27", "0001-01-01"):
        with pytest.raises(BadWeek):
            week_of(week)
        with pytest.raises(BadInput):
            week_key(week)
    with pytest.raises(WeekTimeError):
        as_utc(datetime(1, 1, 1, tzinfo=UTC))
    with pytest.raises(BadSettings):  # an override's exact instant at the edge
        run_times(WEEK, "America/New_York", override={"send_window_end": "9999-12-31T23:00-05:00"})
    assert week_of("9999-11-15").isoformat() == "9999-11-15"  # the last week that is whole


# -- 13 and 18: the legacy open is one unit of work ----------------------------------------


def shift_count(url: str, week: str) -> int:
    store = pubdb.open_store(url)
    try:
        with store.atomic() as tx:
            return len(tx.execute("SELECT id FROM pub_shifts WHERE week_of = %s", [week]))
    finally:
        store.close()


@pytest.mark.both_databases("each engine's query for the other open week")
@pytest.mark.parametrize("engine", ["off", "on"])
def test_a_refused_open_writes_nothing_and_names_the_open_week(db_url: str,
                                                               engine: str) -> None:
    ok(db_url, "init")
    ok(db_url, "flag", "v2", engine)
    ok(db_url, "week", "open", WEEK, "--now", NOW_ISO)
    before = snapshot(db_url)
    ran = pubsched(db_url, "week", "open", NEXT, "--now", NOW_ISO)
    assert ran.code == 3, ran
    line = one_line(ran.err)
    assert "refused (INVARIANT)" in line and "(the week of 7 Dec)" in line
    assert snapshot(db_url) == before  # no DRAFT week, no shifts, no event
    assert NEXT not in ok(db_url, "weeks").out


def test_a_week_left_without_shifts_gets_them_on_the_next_legacy_open(db_url: str) -> None:
    """The state a crash between the old open's two transactions left: the run row, no
    shifts. The next open creates them (and a new open writes both in one unit)."""
    ok(db_url, "init")
    ok(db_url, "flag", "v2", "off")
    store = pubdb.open_store(db_url)
    try:
        with store.atomic() as tx:
            tx.execute("INSERT INTO pub_schedule_runs (week_of, status) VALUES (%s, 'pending')",
                       [WEEK])
    finally:
        store.close()
    assert shift_count(db_url, WEEK) == 0
    ok(db_url, "week", "open", WEEK, "--now", NOW_ISO)
    assert shift_count(db_url, WEEK) == 3


# -- 8: the legacy engine writes no v2 state; v2 adopts a NULL row lazily -------------------


def run_row(url: str, week: str) -> dict[str, Any]:
    store = pubdb.open_store(url)
    try:
        with store.atomic() as tx:
            rows = tx.execute("SELECT * FROM pub_schedule_runs WHERE week_of = %s", [week])
            events = tx.execute("SELECT edge, from_state, to_state FROM rowstate_events")
    finally:
        store.close()
    assert len(rows) == 1
    return {**rows[0], "events": [tuple(e.values()) for e in events]}


def test_a_week_the_legacy_engine_creates_has_no_v2_state_nor_event(db_url: str) -> None:
    ok(db_url, "init")
    ok(db_url, "flag", "v2", "off")
    ok(db_url, "week", "open", WEEK, "--now", NOW_ISO)
    row = run_row(db_url, WEEK)
    assert (row["v2_state"], row["opened_at"] is not None, row["events"]) == (None, True, [])


@pytest.mark.both_databases("a row as the legacy engine left it, adopted by v2")
def test_v2_adopts_a_week_not_yet_adopted_from_its_legacy_status(db_url: str) -> None:
    """A legacy row (``v2_state`` NULL, status pending: DRAFT to v2) after the cutover: the
    flip gives it its due times, v2 opens it and seeds its state with that first move."""
    ok(db_url, "init")
    ok(db_url, "flag", "v2", "off")
    store = pubdb.open_store(db_url)
    try:
        with store.atomic() as tx:
            tx.execute("INSERT INTO pub_schedule_runs (week_of, status) VALUES (%s, 'pending')",
                       [WEEK])
    finally:
        store.close()
    ok(db_url, "tender", "add", "Ana", "ana@pub.example")  # someone to rehearse with
    ok(db_url, "cutover", "rehearse")  # a database with weeks: the rehearsal first (#17.7)
    ok(db_url, "flag", "v2", "on")
    row = run_row(db_url, WEEK)
    assert (row["v2_state"], row["deadline_at"] is not None) == (None, True)
    assert "is open until" in ok(db_url, "week", "open", WEEK, "--now", NOW_ISO).out
    row = run_row(db_url, WEEK)
    assert row["v2_state"] == "COLLECTING"
    assert [e[1:] for e in row["events"]] == [("DRAFT", "COLLECTING")]
    assert shift_count(db_url, WEEK) == 3


# -- 12: an extension past the generate time ------------------------------------------------


@pytest.mark.parametrize("engine", ["off", "on"])
def test_extend_moves_the_deadline_past_the_generate_time_and_the_later_times_follow(
        db_url: str, engine: str) -> None:
    ok(db_url, "init")
    ok(db_url, "flag", "v2", engine)
    ok(db_url, "week", "open", WEEK, "--now", NOW_ISO)
    # Thu 2026-12-03 15:00 New York: after the generate time (10:00) and the send window's
    # start (12:00)
    ran = ok(db_url, "week", "extend", WEEK, "--deadline", "2026-12-03T20:00:00Z")
    assert "open until Thu 3 Dec, 15:00 EST" in ran.out  # 20:00 UTC, said in the pub's zone
    shown = json_show(db_url)
    assert shown["deadline_at"].startswith("2026-12-03T20:00:00")
    # past the week's first shift (Thu 2026-12-10 18:00 New York): bad input, nothing written
    before = snapshot(db_url)
    ran = pubsched(db_url, "week", "extend", WEEK, "--deadline", "2026-12-10T23:30:00Z")
    assert ran.code == 2, ran
    assert "first shift" in one_line(ran.err)
    assert snapshot(db_url) == before


@pytest.mark.parametrize("engine", ["off", "on"])
def test_an_extension_past_the_send_window_moves_it_on_both_engines(
        db_url: str, engine: str) -> None:
    """The week's stored moments stay in order after an extension past the send window's
    end (Fri 18:00 New York): the 'approved but not sent' nudge is judged by the row's
    send_window_at, so a stale one would nudge the moment the week is approved."""
    ok(db_url, "init")
    ok(db_url, "flag", "v2", engine)
    ok(db_url, "week", "open", WEEK, "--now", NOW_ISO)
    ok(db_url, "week", "extend", WEEK, "--deadline", "2026-12-05T20:00:00Z")  # Sat 15:00
    shown = json_show(db_url)
    deadline, generate, window = (shown[k] for k in ("deadline_at", "generate_at",
                                                     "send_window_at"))
    assert deadline.startswith("2026-12-05T20:00:00")
    assert deadline <= generate < window, shown


def json_show(url: str) -> dict[str, Any]:
    import json

    shown: dict[str, Any] = json.loads(ok(url, "week", "show", WEEK, "--json").out)
    return shown


def test_the_moments_an_override_leaves_alone_follow_a_moved_deadline() -> None:
    times = run_times(WEEK, "America/New_York", override={"deadline_at": "2026-12-03T15:00"})
    local = {name: getattr(times, name).astimezone(times.deadline_at.tzinfo)
             for name in ("deadline_at", "generate_at", "send_window_start", "send_window_end")}
    assert local["generate_at"] == local["deadline_at"] + (
        run_times(WEEK, "America/New_York").generate_at
        - run_times(WEEK, "America/New_York").deadline_at)  # the default 14 hours after
    assert times.deadline_at < times.generate_at < times.send_window_start < times.send_window_end
    with pytest.raises(BadSettings):  # a moment the override sets itself is never moved
        run_times(WEEK, "America/New_York", override={"deadline_at": "2026-12-03T15:00",
                                                      "send_window_start": "2026-12-03T12:00"})


# -- 20: SQLite's own errors are one line ---------------------------------------------------


@pytest.mark.parametrize("argv", [["init"], ["weeks"], ["tender", "add", "Ana", "ana@pub.example"]])
def test_a_file_that_is_not_a_database_is_one_database_error_line(
        tmp_path: Path, argv: list[str]) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n")
    ran = pubsched(f"sqlite:///{path}", *argv)
    assert ran.code == 1, ran
    line = one_line(ran.err)
    assert line.startswith("pubsched: database error: ") and "not a database" in line
    assert path.read_text() == "these are my notes, not a database\n"


def test_init_into_a_missing_directory_makes_it_private(tmp_path: Path) -> None:
    """``init`` makes the database's missing folder, readable by its owner only (issue 29,
    item 8); every other command says to run it first, and makes nothing."""
    path = tmp_path / "no" / "such" / "dir" / "x.db"
    ran = pubsched(f"sqlite:///{path}", "tender", "list")
    assert ran.code == 2, ran
    assert one_line(ran.err).endswith("run `pubsched init` first")
    assert not (tmp_path / "no").exists()
    ran = pubsched(f"sqlite:///{path}", "init")
    assert ran.code == 0, ran
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600


# -- 21: a database from changed or newer migrations is refused as init refuses it ----------


def record(url: str, sql: str) -> None:
    store = pubdb.open_store(url)
    try:
        with store.atomic() as tx:
            tx.execute(sql)
    finally:
        store.close()


@pytest.mark.both_databases("each dialect's migrator reads its record")
@pytest.mark.parametrize(("drift", "says"), [
    ("UPDATE pubsched_migrations SET checksum = 'edited' WHERE version = '0033'",
     "was changed after it was applied"),
    ("INSERT INTO pubsched_migrations (version, name, checksum, applied_at) "
     "VALUES ('9001', 'from_newer_code', 'x', '2026-12-01T00:00:00Z')",
     "does not know"),
])
@pytest.mark.parametrize("argv", [["weeks"], ["week", "open", WEEK], ["tick"],
                                  ["tender", "add", "Ana", "ana@pub.example"]])
def test_commands_refuse_a_database_whose_migrations_init_refuses(
        db_url: str, drift: str, says: str, argv: list[str]) -> None:
    ok(db_url, "init")
    record(db_url, drift)
    refused = pubsched(db_url, "init")
    assert refused.code == 1 and says in one_line(refused.err)
    before = snapshot(db_url)
    ran = pubsched(db_url, *argv)
    assert ran.code == refused.code, ran
    line = one_line(ran.err)
    assert line.startswith("pubsched: database error: ") and says in line
    assert snapshot(db_url) == before
