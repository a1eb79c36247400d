"""The week page's grid as the operator reads it (issue 17 #22), on SQLite:
every tender who offered a shift is a column headed by their name, and the unfilled count
appears only once there is a roster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from pubsched.week.view import week_show
from support.pub_web import login, people, seen, web_settings
from support.pubs import NOW, WEEK

pytestmark = pytest.mark.pub_setup("web")


@pytest.fixture
def operator(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client:
        assert login(client).status_code == 303
        yield client


def test_the_grid_names_every_tender_and_counts_unfilled_only_with_a_roster(
        operator: TestClient, pub: Pub) -> None:
    team = people(pub)
    operator.post("/admin/open", data={"week": WEEK})
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    reply = operator.post(team["Alice"].form(pub), data={
        "week": WEEK, "shift": [str(i) for i in ids[:2]], "max": "2"}, follow_redirects=True)
    assert reply.status_code == 200
    page = operator.get(f"/admin/weeks/{WEEK}").text
    grid = page[page.index('id="h-grid"'):page.index('id="h-subs"')]
    assert ">Alice</th>" in grid and ">alice@example.com</th>" not in grid
    assert "slot(s) unfilled" not in grid and "No roster yet" in grid
    assert week_show(pub, WEEK)["rostered"] is False
    for action in ("close", "generate"):
        page = operator.get(f"/admin/weeks/{WEEK}").text
        operator.post(f"/admin/weeks/{WEEK}/do/{action}", data={"seen": seen(page)})
    page = operator.get(f"/admin/weeks/{WEEK}").text
    grid = page[page.index('id="h-grid"'):page.index('id="h-subs"')]
    shown = week_show(pub, WEEK)
    assert shown["rostered"] is True
    assert f"{shown['unfilled']} slot(s) unfilled" in grid and "No roster yet" not in grid
    assert ">Alice</th>" in grid


def test_opening_a_week_at_the_calendars_edge_is_bad_input_with_nothing_written(
        operator: TestClient, pub: Pub) -> None:
    """Issue 17 #19 on the web: the page's refusal with the reason (as for any week that
    is not a Monday), not a 500, and no week."""
    for week in ("9999-12-27", "0001-01-01"):
        reply = operator.post("/admin/open", data={"week": week}, follow_redirects=False)
        assert reply.status_code == 303, reply.text
        page = operator.get(reply.headers["location"])
        assert page.status_code == 200 and "too near the calendar" in page.text
    assert pub.query("SELECT week_of FROM pub_schedule_runs") == []
    assert pub.query("SELECT id FROM pub_shifts") == []
