"""``pubsched report hours`` (issue 19): each tender's shifts and hours in sent weeks
between two dates (on PostgreSQL too where marked): only sent weeks count, a shift counts on
the day it starts, a night across a clock change as long as it was worked; the CLI's table,
CSV and JSON; bad dates exit 2."""

from __future__ import annotations

from datetime import date

import pytest

from pubsched.engines import actions
from pubsched.engines.flags import set_v2
from pubsched.people.hours import hours_worked
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
    lines = {h.email: h for h in hours_worked(pub, date(2026, 12, 14), date(2026, 12, 27))}
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
    with pytest.raises(BadInput, match="to a later date"):
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
    csv = run.ok("report", "hours", "--from", "2026-12-14", "--to", "2026-12-20", "--csv").out
    assert csv.splitlines() == ["name,email,shifts,hours", "Ann Bell,ann@pub.example,1,8",
                                "Bo O'Neil,bo@pub.example,0,0"]
    assert run.json("report", "hours", "--from", "2026-12-14", "--to", "2026-12-20") == [
        {"name": "Ann Bell", "email": "ann@pub.example", "shifts": 1, "hours": 8.0},
        {"name": "Bo O'Neil", "email": "bo@pub.example", "shifts": 0, "hours": 0.0}]
    table = run.ok("report", "hours", "--from", "2026-12-14", "--to", "2026-12-20").out
    assert "Ann Bell" in table and "hours" in table.splitlines()[0]
    for bad in (["--from", "2026-12-20", "--to", "2026-12-14"], ["--from", "2026-13-01",
                "--to", "2026-12-14"], ["--from", "2026-12-14"], ["--to", "2026-12-14"],
                ["--from", "2026-12-14", "--to", "2026-12-20", "--csv", "--json"]):
        assert run("report", "hours", *bad).code == 2, bad
