"""A week's own shifts (issue 18): ``pubsched week shift add|remove`` before the roster
(DRAFT, COLLECTING, CLOSED, COLLECTING after a reopen), refused from ASSIGNED on (exit 3)
until a reopen, bad input exit 2 with nothing written; a removal drops the ticks for the
shift and the tenders' form says so. On SQLite (PostgreSQL where marked), with either engine; the
week page's forms and the tender's note through the web app in-process."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from pubsched.engines import v2
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.verdicts import Verdict
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from pubsched.week import shifts as week_shifts
from pubsched.week import template
from pubsched.week.view import tender_form, week_show
from support.pub_cli import Cli, snapshot
from support.pub_web import login, people, web_settings
from support.pubs import NOW, NOW_ISO, WEEK, make_pub

CLOSE = "2026-12-02T15:00:00Z"  # Wed 2 Dec, 10:00 New York, before the form's deadline
TENDERS = (("Ana", "ana@pub.example"), ("Ben", "ben@pub.example"))


@pytest.fixture(params=["v2", "legacy"])
def run(request: pytest.FixtureRequest, db_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The CLI on a migrated database with two tenders, the engine the param names."""
    for name in list(os.environ):
        if name.startswith("PUBSCHED_"):
            monkeypatch.delenv(name)
    cli = Cli(db_url, capsys)
    cli.ok("init")
    cli.ok("flag", "v2", "on" if request.param == "v2" else "off", "--force")
    for name, email in TENDERS:
        cli.ok("tender", "add", name, email)
    return cli


def shown(run: Cli) -> dict[str, Any]:
    week: dict[str, Any] = run.json("week", "show", WEEK)
    return week


def labels(run: Cli) -> list[str]:
    return [s["label"] for s in shown(run)["shifts"]]


def add(run: Cli, label: str, date: str, *more: str) -> Any:
    return run("week", "shift", "add", WEEK, label, "--date", date, "--start", "19:00",
               "--end", "23:00", *more)


def test_one_off_shifts_are_added_in_draft_collecting_and_closed(run: Cli) -> None:
    run.ok("week", "create", WEEK)
    added = add(run, "Quiz night", "2026-12-08", "--slots", "3", "--needs", "Quiz")
    assert added.code == 0 and "to the week of 2026-12-07 only" in added.out
    run.ok("week", "open", WEEK, "--now", NOW_ISO)
    assert add(run, "Carols", "2026-12-13").code == 0
    run.ok("week", "close", WEEK, "--now", CLOSE)
    assert add(run, "Darts", "2026-12-07").code == 0  # the Monday is in the week
    assert labels(run) == ["Darts", "Quiz night", "Thursday night", "Friday night",
                           "Saturday night", "Carols"]
    quiz = shown(run)["shifts"][1]
    assert (quiz["slots"], quiz["needs"]) == (3, ["quiz"])
    assert quiz["starts_at"] == "2026-12-09T00:00:00Z"  # Tue 19:00 New York
    assert len(run.json("shift", "list")) == 3  # the pub's week is not changed


@pytest.mark.both_databases("a week's own shifts added and removed, on each engine")
def test_from_assigned_on_it_is_refused_until_a_reopen(run: Cli) -> None:
    run.ok("week", "open", WEEK, "--now", NOW_ISO)
    first = shown(run)["shifts"][0]["id"]
    run.ok("avail", WEEK, "ana@pub.example", str(first), "--now", NOW_ISO)
    run.ok("week", "close", WEEK, "--now", CLOSE)
    run.ok("week", "generate", WEEK, "--now", CLOSE)
    before = snapshot(run.url)
    for ran in (add(run, "Late", "2026-12-08"),
                run("week", "shift", "remove", WEEK, str(first))):
        assert ran.code == 3, ran
        assert ran.err.startswith("pubsched: refused (STATE_MISMATCH):")
        assert "ASSIGNED" in ran.err and "week reopen" in ran.err
    assert snapshot(run.url) == before
    run.ok("week", "reopen", WEEK, "--now", CLOSE)
    assert add(run, "Late", "2026-12-08").code == 0
    assert shown(run)["shifts"][1]["assigned"] == ["ana@pub.example"]
    run.ok("week", "shift", "remove", WEEK, str(first))  # its kept assignment goes with it
    assert first not in {s["id"] for s in shown(run)["shifts"]}
    assert [e for s in shown(run)["shifts"] for e in s["assigned"]] == []


def test_a_removal_drops_the_ticks_and_the_form_says_so(run: Cli, db_url: str) -> None:
    run.ok("week", "open", WEEK, "--now", NOW_ISO)
    ids = [s["id"] for s in shown(run)["shifts"]]
    run.ok("avail", WEEK, "ana@pub.example", *map(str, ids), "--now", NOW_ISO)
    run.ok("avail", WEEK, "ben@pub.example", str(ids[0]), "--now", NOW_ISO)
    removed = run.ok("week", "shift", "remove", WEEK, str(ids[2]), "--now", NOW_ISO)
    assert "1 tender(s) had ticked it" in removed.out
    subs = {s["email"]: s["shift_ids"] for s in shown(run)["submissions"]}
    assert subs == {"ana@pub.example": ids[:2], "ben@pub.example": [ids[0]]}
    assert labels(run) == ["Thursday night", "Friday night"]
    pub = make_pub(db_url)
    try:
        by = {t.email: t for t in tenders.all_tenders(pub)}
        ana = tender_form(pub, by["ana@pub.example"])
        ben = tender_form(pub, by["ben@pub.example"])
    finally:
        pub.close()
    assert [r["label"] for r in ana["removed"]] == ["Saturday night"]
    assert ben["removed"] == []  # Ben had not ticked it: nothing to tell him


@pytest.mark.both_databases("the removed shifts' query")
def test_a_week_whose_nights_are_all_removed_is_not_refilled(run: Cli) -> None:
    run.ok("week", "create", WEEK)
    for shift in shown(run)["shifts"]:
        run.ok("week", "shift", "remove", WEEK, str(shift["id"]))
    run.ok("week", "open", WEEK, "--now", NOW_ISO)
    assert labels(run) == []


BAD = [
    ("add", "Out", "--date", "2026-12-14", "--start", "19:00", "--end", "23:00"),
    ("add", "Before", "--date", "2026-12-06", "--start", "19:00", "--end", "23:00"),
    ("add", "Bad date", "--date", "2026-12-32", "--start", "19:00", "--end", "23:00"),
    ("add", "Bad date", "--date", "8 Dec", "--start", "19:00", "--end", "23:00"),
    ("add", "X", "--date", "2026-12-08", "--start", "25:00", "--end", "23:00"),
    ("add", "X", "--date", "2026-12-08", "--start", "19:00", "--end", "23:00", "--slots", "0"),
    ("add", "", "--date", "2026-12-08", "--start", "19:00", "--end", "23:00"),
    ("add", "X", "--date", "2026-12-08", "--start", "19:00", "--end", "23:00",
     "--needs", "a,b"),
    ("add", "Twin", "--date", "2026-12-10", "--start", "18:00", "--end", "23:00"),
    ("remove", "999"),
]


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(a)[:50] for a in BAD])
def test_bad_input_exits_2_and_writes_nothing(run: Cli, argv: tuple[str, ...]) -> None:
    run.ok("week", "create", WEEK)
    before = snapshot(run.url)
    action, *rest = argv
    ran = run("week", "shift", action, WEEK, *rest)
    assert ran.code == 2, ran
    assert ran.err.startswith("pubsched: error:") and ran.err.count("\n") == 1
    assert snapshot(run.url) == before


def test_an_unknown_week_or_another_weeks_shift_is_bad_input(run: Cli) -> None:
    run.ok("week", "create", WEEK)
    run.ok("week", "create", "2026-12-14")
    other = run.json("week", "show", "2026-12-14")["shifts"][0]["id"]
    before = snapshot(run.url)
    for ran in (run("week", "shift", "remove", WEEK, str(other)),
                run("week", "shift", "remove", "2026-12-21", "1"),
                run("week", "shift", "add", "2026-12-21", "X", "--date", "2026-12-22",
                    "--start", "19:00", "--end", "23:00"),
                run("week", "shift", "add", "2026-12-08", "X", "--date", "2026-12-08",
                    "--start", "19:00", "--end", "23:00")):
        assert ran.code == 2, ran
    assert snapshot(run.url) == before


def test_a_one_off_shift_in_the_spring_gap_moves_whole_with_a_note(run: Cli) -> None:
    """02:30 on Sun 8 Mar 2026 does not exist in New York (it is 03:30 EDT), so 02:30-03:15
    moves whole: 03:30-04:15 EDT, its 45 minutes kept, and the operator is told."""
    run.ok("week", "create", "2026-03-02")
    ran = run("week", "shift", "add", "2026-03-02", "Gap", "--date", "2026-03-08",
              "--start", "02:30", "--end", "03:15")
    assert ran.code == 0, ran
    assert "Note: 02:30 does not exist on Sun 8 Mar 2026" in ran.out, ran
    shown = run.json("week", "show", "2026-03-02")
    (gap,) = [s for s in shown["shifts"] if s["label"] == "Gap"]
    assert (gap["starts_at"], gap["ends_at"]) == ("2026-03-08T07:30:00Z", "2026-03-08T08:15:00Z")
    assert "45 minutes kept" in gap["clock_note"]


def test_week_create_over_the_spring_gap_makes_the_week_and_says_so(run: Cli) -> None:
    """Issue 29, item 20: a template shift Sunday 02:30-03:00 (New York) made ``week create``
    of the week of 2 Mar 2026 exit 2 for every shift. The week is made, every shift in it;
    that night's moves whole (03:30-04:00 EDT, its 30 minutes kept); the CLI says so."""
    run.ok("shift", "add", "Small hours", "--day", "sun", "--start", "02:30", "--end", "03:00",
           "--slots", "1")
    made = run("week", "create", "2026-03-02")
    assert made.code == 0, made
    assert "The week of 2 Mar is created as a draft with 4 shifts" in made.out, made
    assert ("Note: Small hours: 02:30 does not exist on Sun 8 Mar 2026, America/New_York "
            "(the clocks go forward an hour), so it reads as 03:30 EDT") in made.out, made
    shown = run.json("week", "show", "2026-03-02")
    small = [s for s in shown["shifts"] if s["label"] == "Small hours"]
    assert [(s["starts_at"], s["ends_at"]) for s in small] == [
        ("2026-03-08T07:30:00Z", "2026-03-08T08:00:00Z")]
    assert "30 minutes kept" in small[0]["clock_note"]
    # the Saturday night over the change ends at 03:00 EDT (02:00 does not exist): noted
    saturday = next(s for s in shown["shifts"] if s["label"] == "Saturday night")
    assert "02:00 does not exist" in saturday["clock_note"]
    assert [s["clock_note"] for s in shown["shifts"][:2]] == [None, None]  # Thu, Fri
    # the week after: nothing to say
    run.ok("week", "create", "2026-03-09")
    later = run.json("week", "show", "2026-03-09")
    assert all(s["clock_note"] is None for s in later["shifts"])


# -- racing a generate (PostgreSQL: two connections really at once) -------------------------


def test_an_added_shift_lands_wholly_before_a_racing_generate_or_is_refused(
        pg_db_url: str) -> None:
    """The edit holds the week (no live lease, one of the states) for its unit: a generate
    that claims first makes the add refused; an add that holds first makes the generate's
    claim wait, and the roster it makes then counts the new shift's 3 slots. Never an add
    applied that the roster did not see."""
    pubs = [make_pub(pg_db_url), make_pub(pg_db_url)]
    try:
        for n in range(6):
            week = (date(2026, 12, 7) + timedelta(weeks=n)).isoformat()
            at = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(weeks=n)
            assert v2.open_form(pubs[0], week, now=at) and v2.close(pubs[0], week, now=at)
            out = race(
                generate=lambda: v2.generate(pubs[0], week, now=at),  # noqa: B023 (joined)
                add=lambda: week_shifts.add_shift(pubs[1], week, "Late", week, "20:00",  # noqa: B023
                                                  "23:00", slots=3))
            assert out["generate"].applied
            pair = (out["add"].applied, int(out["generate"].detail["unfilled"]))
            assert pair in {(True, 9), (False, 6)}, (out["add"], out["generate"])
            if not out["add"].applied:
                assert out["add"].reason in ("LEASE_HELD", "STATE_MISMATCH")
            assert len(weeks.shifts(pubs[0], week)) == (4 if out["add"].applied else 3)
    finally:
        for pub in pubs:
            pub.close()


def race(**calls: Callable[[], Verdict]) -> dict[str, Verdict]:
    """Each call in a thread of its own, released together; their verdicts by name."""
    barrier = threading.Barrier(len(calls))
    out: dict[str, Verdict] = {}

    def one(name: str, call: Callable[[], Verdict]) -> None:
        barrier.wait()
        out[name] = call()

    threads = [threading.Thread(target=one, args=item) for item in calls.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert set(out) == set(calls), "a racer did not finish"
    return out


# -- the web ---------------------------------------------------------------------------------


@pytest.fixture
def operator(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client:
        assert login(client).status_code == 303
        yield client


def flash(page: str) -> str:
    found = re.search(r'<div class="flash flash-(\w+)"[^>]*>\s*(.*?)\s*</div>', page, re.S)
    assert found, "no flash"
    return f"{found.group(1)}: {found.group(2)}"


@pytest.mark.pub_setup("web")
def test_the_week_page_shows_what_the_clocks_did(operator: TestClient, pub: Pub) -> None:
    """The week of the spring change: the page names the shift the gap moved, and why."""
    template.add(pub, "Small hours", "sun", "02:30", "03:00", slots=1)
    assert weeks.create_week(pub, "2026-03-02", now=NOW).applied
    page = operator.get("/admin/weeks/2026-03-02").text
    notes = re.search(r'<aside class="flash flash-note" id="clock-notes".*?</aside>', page, re.S)
    assert notes, "no note of the clocks"
    assert "The clocks change this week." in notes.group(0)
    assert ("Small hours: 02:30 does not exist on Sun 8 Mar 2026, America/New_York (the "
            "clocks go forward an hour), so it reads as 03:30 EDT. It runs 03:30 EDT to "
            "04:00 EDT, its 30 minutes kept.") in notes.group(0)
    assert weeks.create_week(pub, WEEK, now=NOW).applied
    assert 'id="clock-notes"' not in operator.get(f"/admin/weeks/{WEEK}").text


@pytest.mark.pub_setup("web")
def test_the_week_page_adds_and_removes_while_allowed(operator: TestClient, pub: Pub) -> None:
    v2.open_form(pub, WEEK, now=NOW)
    page = operator.get(f"/admin/weeks/{WEEK}").text
    assert "Add a one-off shift" in page
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    alice = people(pub)["Alice"]
    operator.post(alice.form(pub), data={"week": WEEK, "shift": [str(ids[1])]})
    done = operator.post(f"/admin/weeks/{WEEK}/shifts/add", data={
        "label": "Quiz night", "date": "2026-12-08", "start": "19:00", "end": "23:00",
        "slots": "2", "needs": "Quiz, bar"}, follow_redirects=True)
    assert flash(done.text).startswith("ok: added Quiz night (Tue 8 Dec 19:00-23:00, 2 slots) to")
    bad = operator.post(f"/admin/weeks/{WEEK}/shifts/add", data={
        "label": "Next week", "date": "2026-12-15", "start": "19:00", "end": "23:00",
        "slots": "2"}, follow_redirects=True)
    assert flash(bad.text).startswith("refused: 2026-12-15 is not in the week")
    quiz = week_show(pub, WEEK)["shifts"][0]
    assert (quiz["label"], quiz["needs"]) == ("Quiz night", ["quiz", "bar"])
    gone = operator.post(f"/admin/weeks/{WEEK}/shifts/{ids[1]}/remove", follow_redirects=True)
    assert flash(gone.text).startswith("ok: removed Friday night (Fri 11 Dec 18:00) from the week")
    form = operator.get(alice.form(pub)).text
    assert "The operator removed Friday night, Fri 11 Dec 18:00 (closed)" in form
    v2.close(pub, WEEK, now=NOW)
    v2.generate(pub, WEEK, now=NOW)
    page = operator.get(f"/admin/weeks/{WEEK}").text
    assert "Add a one-off shift" not in page and "/shifts/" not in page
    late = operator.post(f"/admin/weeks/{WEEK}/shifts/{ids[0]}/remove", follow_redirects=True)
    assert flash(late.text).startswith("refused:") and "ASSIGNED" in late.text
    assert ids[0] in {s.id for s in weeks.shifts(pub, WEEK)}
