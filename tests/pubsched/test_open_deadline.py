"""Issue 29, item 2: the form's deadline chosen in sight, and no form reminder racing the
open. ``pubsched week open WEEK --deadline ISO`` (the pub's local time, or an instant with
an offset; one still to come, before the week's first shift, or exit 2 with the database
untouched), with either engine; the week page's open shows the deadline prefilled with the
default and takes another; the weeks page's open takes one too; no form reminder in the
hour after the open. The CLI in-process, the web through its app in-process."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from pubsched.db.instants import instant
from pubsched.engines import v2
from pubsched.pub import Pub
from pubsched.tick.run import tick
from pubsched.web.app import create_app
from pubsched.week.view import week_show
from support.pub_cli import Cli, snapshot
from support.pub_reminders import reminded
from support.pub_web import login, seen, web_settings
from support.pubs import NOW, NOW_ISO, WEEK, crew
from support.smtp_server import SmtpTestServer

# NOW is Mon 30 Nov 10:00 New York; the week's default deadline is Wed 2 Dec 20:00 EST
DEFAULT = "2026-12-03T01:00:00Z"


@pytest.fixture(params=["v2", "legacy"])
def run(request: pytest.FixtureRequest, db_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The CLI on a migrated database, the engine the param names."""
    for name in list(os.environ):
        if name.startswith("PUBSCHED_"):
            monkeypatch.delenv(name)
    cli = Cli(db_url, capsys)
    cli.ok("init")
    cli.ok("flag", "v2", "on" if request.param == "v2" else "off", "--force")
    return cli


def test_open_with_a_deadline_in_the_pub_s_local_time(run: Cli) -> None:
    opened = run.ok("week", "open", WEEK, "--deadline", "2026-12-04T18:30", "--now", NOW_ISO)
    assert "open until Fri 4 Dec, 18:30 EST" in opened.out, opened
    shown = run.json("week", "show", WEEK)
    assert (shown["state"], shown["deadline_at"]) == ("COLLECTING", "2026-12-04T23:30:00Z")
    # the generate time follows a deadline past it, the send window after it
    assert shown["generate_at"] >= shown["deadline_at"]
    assert shown["send_window_at"] > shown["generate_at"]


def test_open_with_an_instant_and_without_a_deadline(run: Cli) -> None:
    run.ok("week", "open", WEEK, "--deadline", "2026-12-01T20:00:00Z", "--now", NOW_ISO)
    assert run.json("week", "show", WEEK)["deadline_at"] == "2026-12-01T20:00:00Z"
    run.ok("week", "close", WEEK, "--now", NOW_ISO)
    run.ok("week", "open", "2026-12-14", "--now", NOW_ISO)  # no --deadline: the default
    assert run.json("week", "show", "2026-12-14")["deadline_at"] == "2026-12-10T01:00:00Z"


@pytest.mark.parametrize(("deadline", "words"), [
    ("2026-11-30T09:59", "has passed"),  # 10:00 New York is NOW
    ("2026-11-30T15:00:00Z", "has passed"),  # NOW itself
    ("2026-12-10T18:00", "after the week's first shift starts"),  # Thursday's shift
    ("2026-12-11T09:00", "after the week's first shift starts"),
    ("Friday", "not a date and time"),
    ("2026-13-01T10:00", "not a date and time"),
])
def test_a_deadline_gone_or_past_the_shifts_is_exit_2_and_writes_nothing(
        run: Cli, deadline: str, words: str) -> None:
    before = snapshot(run.url)
    ran = run("week", "open", WEEK, "--deadline", deadline, "--now", NOW_ISO)
    assert ran.code == 2, ran
    assert words in ran.err, ran
    assert snapshot(run.url) == before


def test_an_early_deadline_before_the_planned_opening_opens_now(run: Cli) -> None:
    """Opened a week early (the form was due Mon 30 Nov 10:00), answers wanted by Sun 29
    Nov 12:00: the opening is now, so the moments keep their order."""
    early = "2026-11-23T15:00:00Z"  # Mon 23 Nov 10:00 New York
    run.ok("week", "open", WEEK, "--deadline", "2026-11-29T12:00", "--now", early)
    assert run.json("week", "show", WEEK)["deadline_at"] == "2026-11-29T17:00:00Z"


# -- no reminder racing the open --------------------------------------------------------------


def test_no_form_reminder_in_the_hour_after_the_open(pub: Pub, smtp: SmtpTestServer) -> None:
    """The operator's evening: the form opened 3 h 20 min before its deadline (inside the
    24 hours of the form reminder). Nothing 25 s after, nor 59 min after; at the hour,
    every tender who has not answered, once."""
    crew(pub, ("ann", None), ("bob", None))
    deadline = NOW + timedelta(hours=3, minutes=20)
    assert v2.open_form(pub, WEEK, now=NOW, deadline=deadline)
    for after in (timedelta(seconds=25), timedelta(minutes=59)):
        tick(pub, NOW + after)
        assert reminded(smtp, "form") == []
    tick(pub, NOW + timedelta(hours=1))
    assert reminded(smtp, "form") == ["ann@pub.test", "bob@pub.test"]
    tick(pub, NOW + timedelta(hours=2))
    assert reminded(smtp, "form") == ["ann@pub.test", "bob@pub.test"]


# -- the web ----------------------------------------------------------------------------------


@pytest.fixture
def web(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client:
        assert login(client).status_code == 303
        yield client


@pytest.mark.pub_setup("web")
def test_the_week_page_opens_with_the_deadline_in_sight(web: TestClient, pub: Pub) -> None:
    assert web.post("/admin/create", data={"week": WEEK}).status_code in (200, 303)
    page = web.get(f"/admin/weeks/{WEEK}").text
    field = re.search(r'<input id="open-deadline" name="deadline" type="datetime-local"'
                      r'[^>]*value="([^"]+)"', page)
    assert field and field.group(1) == "2026-12-02T20:00"  # the default, New York time
    assert "The form closes (America/New_York, EST)" in page
    done = web.post(f"/admin/weeks/{WEEK}/do/open",
                    data={"seen": seen(page), "deadline": "2026-12-03T21:00"},
                    follow_redirects=True)
    assert "flash-ok" in done.text and "open until Thu 3 Dec, 21:00 EST" in done.text, done.text
    assert week_show(pub, WEEK)["deadline_at"] == "2026-12-04T02:00:00Z"
    (row,) = pub.query("SELECT form_moved_at FROM pub_schedule_runs WHERE week_of = %s",
                       [WEEK])
    assert instant(row["form_moved_at"]) == NOW  # the form reminders' quiet hour from here


@pytest.mark.pub_setup("web")
def test_the_weeks_page_opens_with_a_deadline_or_the_default(web: TestClient,
                                                             pub: Pub) -> None:
    page = web.get("/admin/").text
    assert 'id="open-deadline" name="deadline" type="datetime-local"' in page
    gone = web.post("/admin/open", data={"week": WEEK, "deadline": "2026-11-29T20:00"},
                    follow_redirects=True)
    assert "flash-refused" in gone.text and "has passed" in gone.text, gone.text
    assert pub.runs.get(WEEK) is None  # nothing written
    web.post("/admin/open", data={"week": WEEK, "deadline": ""}, follow_redirects=True)
    assert week_show(pub, WEEK)["deadline_at"] == DEFAULT
