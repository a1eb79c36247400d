"""What the pages say, in the operator's (and the tender's) words (issue 29, item 6),
in-process through the app, on SQLite: each case of the issue's list, read where a person
reads it. The looks (which button is coloured, what is drawn at 375 and 1280 px) are also
in test_browser_words.py."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from pubsched.db.instants import instant
from pubsched.engines import v2
from pubsched.engines.flags import set_v2
from pubsched.people import operators, tenders
from pubsched.pub import Pub
from pubsched.rehearsal import record
from pubsched.web.app import create_app
from pubsched.web.auth import AdminPassword
from pubsched.web.settings import WebSettings
from pubsched.week import submissions
from pubsched.week.runs import shifts
from pubsched.week.view import week_show
from support.pub_cli import Cli
from support.pub_web import FAST_HASH, login, people, web_settings
from support.pubs import NOW, WEEK

pytestmark = pytest.mark.pub_setup("web")
OPERATOR_PASSWORD = "a long operator password"


def flash(page: str) -> str:
    found = re.search(r'<div class="flash flash-(\w+)"[^>]*>\s*(.*?)\s*</div>', page, re.S)
    assert found, "no flash on the page"
    return f"{found.group(1)}: {html.unescape(found.group(2))}"


def client_at(pub: Pub, now: Any = NOW, settings: WebSettings | None = None) -> TestClient:
    app = create_app(pub, settings or web_settings(), clock=lambda: now)
    return TestClient(app, base_url="https://testserver")


@pytest.fixture
def operator(pub: Pub) -> Iterator[TestClient]:
    with client_at(pub) as client:
        assert login(client).status_code == 303
        yield client


def visible(page: str) -> str:
    """The page's text as read (tags and their attributes left out)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


# -- the cutover page --------------------------------------------------------------------


def test_a_pub_that_began_on_v2_is_told_there_is_nothing_to_cut_over(
        operator: TestClient, pub: Pub) -> None:
    operator.post("/admin/open", data={"week": WEEK})  # a week in flight, on v2 from the start
    page = operator.get("/admin/cutover").text
    assert "This pub runs the current engine" in page and "nothing to do" in page
    for gone in ("Idle gap", "none passed yet", "PUB_SCHEDULER_V2", "Switch v2", 'id="flip"',
                 "Dress rehearsal"):
        assert gone not in page, gone


def test_a_pub_cut_over_from_legacy_still_has_its_cutover_page(
        operator: TestClient, pub: Pub) -> None:
    """Cut over (a passed rehearsal on record): the page as before, but rolling back is
    not the page's next step, so it is not the coloured button."""
    made = record.insert(pub, week=WEEK, scratch="scratch", now=NOW, by="web")
    assert record.finish(pub, made.id, record.PASSED, NOW)
    page = operator.get("/admin/cutover").text
    assert "Idle gap" in page and "This pub runs the current engine" not in page
    flip = re.search(r'<button[^>]*id="flip"[^>]*>', page)
    assert flip and "primary" not in flip.group(0) and "Switch v2 off" in page
    set_v2(pub, False, now=NOW)  # rolled back: the legacy engine, and the switch back is next
    page = operator.get("/admin/cutover").text
    flip = re.search(r'<button[^>]*id="flip"[^>]*>', page)
    assert flip and "primary" in flip.group(0) and "Switch v2 on" in page


def test_a_legacy_week_means_the_pub_did_not_begin_on_v2(operator: TestClient, pub: Pub
                                                         ) -> None:
    """A week the legacy engine opened (no v2 state) before v2 was turned on: a cutover."""
    set_v2(pub, False, now=NOW)
    operator.post("/admin/open", data={"week": WEEK})
    set_v2(pub, True, now=NOW)  # as a forced flip over a week in flight would
    assert "Idle gap" in operator.get("/admin/cutover").text


# -- messages ------------------------------------------------------------------------------


def test_messages_name_days_people_and_shifts_as_the_operator_does(
        operator: TestClient, pub: Pub, db_url: str, capsys: pytest.CaptureFixture[str]
        ) -> None:
    nope = operator.get("/admin/weeks/2026-13-01")
    assert nope.status_code == 404
    said = visible(nope.text)
    assert "there is no day 2026-13-01 on the calendar" in said and "week_of" not in said
    tuesday = visible(operator.get("/admin/weeks/2026-12-08").text)
    assert "2026-12-08 is a Tuesday; its week is 2026-12-07" in tuesday
    backwards = visible(operator.get("/admin/hours?from=2026-12-20&to=2026-12-14").text)
    assert "the last day, 2026-12-14, is before the first, 2026-12-20" in backwards
    assert "--to" not in backwards
    # a shift removed and a tender pinned: by label and name, no id, no <address>
    operator.post("/admin/open", data={"week": WEEK})
    thu, fri, sat = (s.id for s in shifts(pub, WEEK))
    gone = operator.post(f"/admin/weeks/{WEEK}/shifts/{fri}/remove", follow_redirects=True)
    assert flash(gone.text).startswith("ok: removed Friday night (Fri 11 Dec 18:00) from")
    assert f"shift {fri}" not in flash(gone.text)
    team = people(pub)
    for who in ("Alice", "Bob"):
        assert submissions.submit(pub, WEEK, team[who].email, [thu, sat], now=NOW)
    assert v2.close(pub, WEEK, now=NOW) and v2.generate(pub, WEEK, now=NOW)
    pinned = operator.post(f"/admin/weeks/{WEEK}/roster/unassign", data={
        "shift": str(sat), "email": team["Alice"].email}, follow_redirects=True)
    assert flash(pinned.text).startswith("ok: took Alice off Saturday night"), flash(pinned.text)
    pinned = operator.post(f"/admin/weeks/{WEEK}/roster/assign", data={
        "shift": str(sat), "email": team["Carol"].email}, follow_redirects=True)
    said = flash(pinned.text)
    assert said.startswith("ok: pinned Carol on Saturday night") and "<" not in said, said
    # the CLI says the same
    run = Cli(db_url, capsys)
    assert run.ok("tender", "add", "Finn Ryan", "finn@swan.test").out.strip() == (
        "added Finn Ryan (finn@swan.test)")
    bad = run("week", "show", "2026-13-01")
    assert bad.code == 2 and "there is no day 2026-13-01 on the calendar" in bad.err
    assert "week_of" not in bad.err
    backwards_cli = run("report", "hours", "--from", "2026-12-20", "--to", "2026-12-14")
    assert backwards_cli.code == 2 and "is before the first" in backwards_cli.err


# -- the login page ------------------------------------------------------------------------


def test_the_login_page_tells_a_visitor_nothing_about_the_setup(pub: Pub) -> None:
    closed = WebSettings(AdminPassword(None, FAST_HASH))
    for settings in (web_settings(), closed):
        with client_at(pub, settings=settings) as visitor:
            page = visitor.get("/admin/login").text
            assert "PUBSCHED_" not in page and "Quick start" not in page, page
            assert "or admin" not in page and "operator add" not in page
            refused = visitor.post("/admin/login", data={"email": "admin",
                                                          "password": "wrong wrong wrong"})
            assert "PUBSCHED_" not in refused.text


# -- a tender's maximum ----------------------------------------------------------------------


def test_a_tender_with_a_maximum_of_three_reads_three(operator: TestClient, pub: Pub) -> None:
    alice = people(pub)["Alice"]
    assert tenders.edit(pub, alice.email, max_shifts=3).applied
    operator.post("/admin/open", data={"week": WEEK})
    with client_at(pub) as tender:
        form = visible(tender.get(alice.form(pub)).text)
        assert "no limit" not in form
        assert "(empty: 3, the most the pub gives you a week)" in form
        ids = [str(s.id) for s in shifts(pub, WEEK)]
        tender.post(alice.form(pub), data={"week": WEEK, "shift": ids, "max": ""})
        mine = visible(tender.get(alice.form(pub)).text)
        assert "Maximum: 3 (the most the pub gives you a week)" in mine
        assert "no limit" not in mine
        tender.post(alice.form(pub), data={"week": WEEK, "shift": ids, "max": "5"})
        assert "Maximum: 3 (you said 5; the pub gives you at most 3 a week)" in visible(
            tender.get(alice.form(pub)).text)
    week = operator.get(f"/admin/weeks/{WEEK}").text
    row = week[week.index(f'title="{alice.email}">Alice</td>'):]
    assert re.search(r'data-label="Maximum">3 \(said 5; their maximum is 3\)</td>', row[:800])
    bob = people(pub)["Bob"]  # no maximum of his own, none given: no limit, as before
    assert submissions.submit(pub, WEEK, bob.email, [int(i) for i in ids], now=NOW)
    week = operator.get(f"/admin/weeks/{WEEK}").text
    row = week[week.index(f'title="{bob.email}">Bob</td>'):]
    assert 'data-label="Maximum">no limit</td>' in row[:800]


# -- the week page's buttons and times -----------------------------------------------------


def close_button(page: str) -> str:
    found = re.search(r'<form[^>]*/do/close"[^>]*>.*?</form>', page, re.S)
    assert found, "no Close the form button"
    return found.group(0)


def test_closing_before_the_deadline_is_a_plain_button_that_asks_first(pub: Pub) -> None:
    with client_at(pub) as operator:
        assert login(operator).status_code == 303
        operator.post("/admin/open", data={"week": WEEK})
    deadline = instant(week_show(pub, WEEK)["deadline_at"])
    assert deadline > NOW
    with client_at(pub) as operator:
        assert login(operator).status_code == 303
        early = close_button(operator.get(f"/admin/weeks/{WEEK}").text)
        assert 'class="primary"' not in early
        asked = re.search(r'data-confirm="([^"]*)"', early)
        assert asked and "before its deadline" in html.unescape(asked.group(1))
        assert "cannot answer any more" in html.unescape(asked.group(1))
    with client_at(pub, deadline + timedelta(minutes=1)) as operator:
        assert login(operator).status_code == 303
        due = close_button(operator.get(f"/admin/weeks/{WEEK}").text)
        assert 'class="primary"' in due and "data-confirm" not in due


def test_roster_made_says_when_it_was_made(operator: TestClient, pub: Pub) -> None:
    operator.post("/admin/open", data={"week": WEEK})
    page = operator.get(f"/admin/weeks/{WEEK}").text
    assert "Roster to be made" in page and "Roster made<" not in page
    assert v2.close(pub, WEEK, now=NOW) and v2.generate(pub, WEEK, now=NOW)
    shown = week_show(pub, WEEK)
    made = [h for h in shown["history"] if h["edge"] == "generate"][-1]["at"]
    page = operator.get(f"/admin/weeks/{WEEK}").text
    found = re.search(r'<dt>Roster made</dt><dd id="roster-made">([^<]*)</dd>', page)
    assert found, "no Roster made"
    when = instant(made).astimezone(pub.config.tz)  # the history's own clock, the database's
    assert found.group(1) == f"{when:%a} {when.day} {when:%b %Y, %H:%M} {when.tzname()}"


# -- operators, links ---------------------------------------------------------------------------


def test_the_last_operator_has_no_remove_button(pub: Pub) -> None:
    closed = WebSettings(AdminPassword(None, FAST_HASH))
    assert operators.add(pub, "ann@pub.example", OPERATOR_PASSWORD, hasher=FAST_HASH)
    with client_at(pub, settings=closed) as ann:
        assert login(ann, OPERATOR_PASSWORD, "ann@pub.example").status_code == 303
        page = ann.get("/admin/operators").text
        assert "/remove" not in page and ">Remove<" not in page
        assert "The only account: add another before removing it." in page
        assert operators.add(pub, "bo@pub.example", OPERATOR_PASSWORD, hasher=FAST_HASH)
        assert ann.get("/admin/operators").text.count(">Remove</button>") == 2
    # with the admin password set, the server lets the last account go: drawn
    assert operators.remove(pub, "bo@pub.example").applied
    with client_at(pub) as admin:
        assert login(admin).status_code == 303
        assert admin.get("/admin/operators").text.count(">Remove</button>") == 1


def test_revoking_says_the_calendar_stops_and_nobody_is_mailed_and_both_are_true(
        operator: TestClient, pub: Pub) -> None:
    alice = people(pub)["Alice"]
    old_calendar, old_form = alice.calendar(pub), alice.form(pub)
    assert operator.get(old_calendar).status_code == 200
    mailed = pub.query("SELECT COUNT(*) AS n FROM pub_mail")[0]["n"]
    page = operator.post(f"/admin/tenders/{alice.id}/revoke", follow_redirects=True).text
    said = flash(page)
    assert "calendar feed" in said and "stop working now" in said
    assert "Alice is not mailed about it" in said
    assert operator.get(old_calendar).status_code == 404  # the feed stops
    assert operator.get(old_form).status_code == 404
    assert pub.query("SELECT COUNT(*) AS n FROM pub_mail")[0]["n"] == mailed  # not mailed
    asked = re.search(r'action="/admin/tenders/\d+/revoke"[^>]*data-confirm="([^"]*)"', page)
    assert asked and "calendar feed" in html.unescape(asked.group(1))
