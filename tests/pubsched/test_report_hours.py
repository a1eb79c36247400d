"""``pubsched report hours`` (issue 19): each tender's shifts and hours in sent weeks
between two dates (on PostgreSQL too where marked): only sent weeks count, a shift counts on
the day it starts, a night across a clock change as long as it was worked; the CLI's table,
CSV and JSON; bad dates exit 2. Issue 29: the shifts still to come at ``--now`` beside
them (item 3), inactive tenders marked, and no cell a spreadsheet would run as a formula
(item 14)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime

import pytest

from pubsched.db.instants import instant
from pubsched.engines import actions
from pubsched.engines.flags import set_v2
from pubsched.people.hours import hours_worked, spreadsheet_cell
from pubsched.people.tenders import deactivate
from pubsched.pub import Pub
from pubsched.verdicts import BadInput
from pubsched.week.runs import shifts
from pubsched.week.submissions import submit
from support.pub_cli import Cli
from support.pub_engines import EMAILS, NEXT, WEEK, moment
from support.smtp_server import SmtpTestServer

pytestmark = pytest.mark.pub_setup("engines")
FALL_BACK = "2026-10-26"  # its Saturday night, 31 Oct, New York's clocks go back: 9 hours


def run_week(pub: Pub, week: str, *, send: bool = True) -> dict[str, int]:
    """Every tender offers every shift; the roster is made (and sent): who got how many."""
    at = moment(pub, week, "opens_at")
    assert actions.perform(pub, "open", week, now=at)
    ids = [s.id for s in shifts(pub, week)]
    for email in EMAILS:
        assert submit(pub, week, email, ids, now=at)
    for step in ("close", "generate", *(("approve", "send") if send else ())):
        assert actions.perform(pub, step, week, now=at), step
    rows = pub.query("SELECT t.email, COUNT(*) AS n FROM pub_assignments a JOIN pub_tenders t "
                     "ON t.id = a.tender_id WHERE a.week_of = %s GROUP BY t.email", [week])
    return {str(r["email"]): int(r["n"]) for r in rows}


def test_only_sent_weeks_count_and_a_shift_counts_on_the_day_it_starts(
        pub: Pub, smtp: SmtpTestServer) -> None:
    set_v2(pub, True)
    worked = run_week(pub, WEEK)
    run_week(pub, NEXT, send=False)  # made, not sent: the tenders were never told
    lines = {h.email: h for h in hours_worked(pub, date(2026, 12, 14), date(2026, 12, 27),
                                              now=moment(pub, NEXT, "opens_at"))}
    assert {e: h.shifts for e, h in lines.items() if h.shifts} == worked
    assert all(h.hours == 8 * h.shifts for h in lines.values())  # 18:00-02:00 in December
    assert set(lines) == set(EMAILS)  # every active tender, those with nothing too
    # the Saturday night ends on Sunday: it counts on Saturday, so a range ending Saturday
    # has it, and one starting Sunday does not
    saturday = hours_worked(pub, date(2026, 12, 19), date(2026, 12, 19))
    assert sum(h.shifts for h in saturday) == 2
    assert sum(h.shifts for h in hours_worked(pub, date(2026, 12, 20), date(2026, 12, 20))) == 0


@pytest.mark.both_databases("lengths from PostgreSQL's own time type across a clock change")
def test_a_night_across_the_clock_change_counts_its_real_length(
        pub: Pub, smtp: SmtpTestServer) -> None:
    set_v2(pub, True)
    run_week(pub, FALL_BACK)
    saturday = hours_worked(pub, date(2026, 10, 31), date(2026, 10, 31))
    assert sorted(h.hours for h in saturday if h.shifts) == [9.0, 9.0]  # 22:00-07:00 UTC


def test_the_range_runs_forwards(pub: Pub) -> None:
    with pytest.raises(BadInput, match="is before the first, 2026-12-20"):
        hours_worked(pub, date(2026, 12, 20), date(2026, 12, 14))


@pytest.mark.both_databases("the report's queries")
def test_the_cli_prints_a_table_csv_and_json(db_url: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = Cli(db_url, capsys)
    run.ok("tender", "add", "Ann Bell", "ann@pub.example")
    run.ok("tender", "add", "Bo O'Neil", "bo@pub.example")
    week = "2026-12-14"
    run.ok("week", "open", week, "--now", "2026-12-07T15:00:00Z")
    ids = [str(s["id"]) for s in run.json("week", "show", week)["shifts"]]
    run.ok("avail", week, "ann@pub.example", ids[0], "--now", "2026-12-07T16:00:00Z")
    for step in ("close", "generate", "approve"):
        run.ok("week", step, week)
    run.ok("week", "send", week)  # no SMTP host: the log mailer
    days = ("--from", "2026-12-14", "--to", "2026-12-20")
    after = ("--now", "2026-12-21T12:00:00Z")  # the week is over: nothing to come
    csv = run.ok("report", "hours", *days, "--csv", *after).out
    assert csv.splitlines() == [
        "name,email,shifts,hours,shifts_to_come,hours_to_come,active",
        "Ann Bell,ann@pub.example,1,8,0,0,yes", "Bo O'Neil,bo@pub.example,0,0,0,0,yes"]
    assert run.json("report", "hours", *days, *after) == [
        {"name": "Ann Bell", "email": "ann@pub.example", "active": True, "shifts": 1,
         "hours": 8.0, "shifts_to_come": 0, "hours_to_come": 0.0},
        {"name": "Bo O'Neil", "email": "bo@pub.example", "active": True, "shifts": 0,
         "hours": 0.0, "shifts_to_come": 0, "hours_to_come": 0.0}]
    # the report run before the week: Ann's shift is on the roster, and still to come
    before = run.ok("report", "hours", *days, "--csv", "--now", "2026-12-10T12:00:00Z").out
    assert before.splitlines()[1] == "Ann Bell,ann@pub.example,1,8,1,8,yes"
    run.ok("tender", "deactivate", "ann@pub.example", *after)  # left after her shift
    table = run.ok("report", "hours", *days, *after).out
    assert "Ann Bell (inactive)" in table and "hours" in table.splitlines()[0]
    assert "to come" in table.splitlines()[0]
    assert run.json("report", "hours", *days, *after)[0]["active"] is False
    for bad in (["--from", "2026-12-20", "--to", "2026-12-14"], ["--from", "2026-13-01",
                "--to", "2026-12-14"], ["--from", "2026-12-14"], ["--to", "2026-12-14"],
                ["--from", "2026-12-14", "--to", "2026-12-20", "--csv", "--json"]):
        assert run("report", "hours", *bad).code == 2, bad


def test_shifts_not_ended_at_now_are_to_come_and_an_inactive_tender_is_marked(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """Issue 29, item 3: a range reaching past today counted next week's shifts as worked.
    They are still counted (on the roster) and, beside them, told apart as to come; a
    shift under way at ``now`` is to come (not worked yet)."""
    set_v2(pub, True)
    run_week(pub, WEEK)
    days = (date(2026, 12, 14), date(2026, 12, 20))
    rows = pub.query("SELECT t.email, s.starts_at, s.ends_at FROM pub_assignments a "
                     "JOIN pub_shifts s ON s.id = a.shift_id JOIN pub_tenders t "
                     "ON t.id = a.tender_id WHERE a.week_of = %s", [WEEK])
    starts = sorted({instant(r["starts_at"]) for r in rows})
    middle = starts[len(starts) // 2]  # the moment a shift begins: it is under way
    for now in (datetime(2026, 12, 1, tzinfo=UTC), middle, datetime(2026, 12, 22, tzinfo=UTC)):
        lines = {h.email: h for h in hours_worked(pub, *days, now=now)}
        for email, line in lines.items():
            mine = [r for r in rows if r["email"] == email]
            coming = [r for r in mine if instant(r["ends_at"]) > now]
            assert (line.shifts, line.shifts_to_come) == (len(mine), len(coming)), (now, email)
            assert line.hours == 8 * len(mine) and line.hours_to_come == 8 * len(coming)
    assert 0 < sum(h.shifts_to_come for h in hours_worked(pub, *days, now=middle)) < len(rows)
    busy = next(str(r["email"]) for r in rows)
    idle = sorted(set(EMAILS) - {str(r["email"]) for r in rows})
    assert deactivate(pub, busy).applied
    for email in idle:
        assert deactivate(pub, email).applied
    lines = {h.email: h for h in hours_worked(pub, *days, now=middle)}
    assert lines[busy].active is False and all(h.active for e, h in lines.items() if e != busy)
    assert not set(idle) & set(lines)  # inactive with nothing in the range: left out


HOSTILE = ("=cmd|' /C calc'!A0", "@SUM(1+1)", "+1+1", "-1+1")


def test_no_cell_of_the_csv_is_a_formula(db_url: str, pub: Pub,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29, item 14: names a spreadsheet would run (OWASP's CSV injection: a cell
    starting with = + - @, a tab or a carriage return) come out as text, behind a single
    quote, and the csv quoting still holds (the name with a comma-free quote stays one
    cell); a tab or carriage return can only be in a name written before names were
    checked, so those two are put in the database by hand."""
    run = Cli(db_url, capsys)
    for i, name in enumerate(HOSTILE):
        run.ok("tender", "add", "--", name, f"t{i}@pub.example")  # "--": -1+1 is no option
    run.ok("tender", "add", "Plain", "=1+2@pub.example")  # an address may start with =
    run.ok("tender", "add", "Tab", "tab@pub.example")
    run.ok("tender", "add", "Return", "cr@pub.example")
    with pub.atomic() as tx:
        for name, email in (("\t=1+1", "tab@pub.example"), ("\r=1+1", "cr@pub.example")):
            tx.execute("UPDATE pub_tenders SET name = %s WHERE email = %s", [name, email])
    out = run.ok("report", "hours", "--from", "2026-12-14", "--to", "2026-12-20", "--csv").out
    cells = list(csv.reader(io.StringIO(out, newline="")))
    assert cells[0][:4] == ["name", "email", "shifts", "hours"]
    names = {row[1]: row[0] for row in cells[1:]}
    for i, name in enumerate(HOSTILE):
        assert names[f"t{i}@pub.example"] == "'" + name
    assert names["tab@pub.example"] == "'\t=1+1" and names["cr@pub.example"] == "'\r=1+1"
    assert "'=1+2@pub.example" in names
    for row in cells:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    assert '"\'\r=1+1"' in out  # still quoted: the carriage return does not end the row
    assert len(cells) == 1 + len(HOSTILE) + 3 + len(EMAILS)


def test_a_cell_is_neutralised_only_when_a_spreadsheet_would_run_it() -> None:
    for text in (*HOSTILE, "\tx", "\rx"):
        assert spreadsheet_cell(text) == "'" + text
    for text in ("Ann Bell", "O'Neil", "1", "8.5", "", "a=b", " =1+1"):
        assert spreadsheet_cell(text) == text
