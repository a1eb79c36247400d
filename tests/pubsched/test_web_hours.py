"""``/admin/hours`` (issue 19): the hours report on the web, the same lines as ``pubsched
report hours``, its CSV download, bad days refused with words; in-process on both
databases, and in Chromium at 1280 and 375 px. Issue 29: the shifts still to come told
apart, inactive tenders marked, the title no longer "worked" (item 3); no cell of the
download a spreadsheet would run (item 14)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from pubsched.engines import v2
from pubsched.people import tenders
from pubsched.people.hours import as_csv, hours_worked
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week.runs import ensure_week, shifts
from pubsched.week.submissions import submit
from support.browser import PHONE, desktop, fits, phone, served, shot
from support.pub_web import PASSWORD, login, people, web_settings
from support.pubs import NOW, WEEK

pytestmark = pytest.mark.pub_setup("web")


def sent_week(pub: Pub) -> None:
    """WEEK sent: Alice on every shift she can get, Bob on one."""
    ensure_week(pub, WEEK, now=NOW)
    assert v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in shifts(pub, WEEK)]
    team = people(pub)
    assert submit(pub, WEEK, team["Alice"].email, ids, now=NOW)
    assert submit(pub, WEEK, team["Bob"].email, ids[:1], now=NOW)
    for step in (v2.close, v2.generate, v2.approve, v2.send):
        assert step(pub, WEEK, now=NOW), step


@pytest.fixture
def operator(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client:
        assert login(client).status_code == 303
        yield client


@pytest.mark.both_databases("the page's own queries")
def test_the_page_shows_the_reports_lines_and_the_download_is_its_csv(
        operator: TestClient, pub: Pub) -> None:
    sent_week(pub)
    query = "from=2026-12-07&to=2026-12-13"
    page = operator.get(f"/admin/hours?{query}")
    assert page.status_code == 200
    lines = hours_worked(pub, date(2026, 12, 7), date(2026, 12, 13), now=NOW)
    for line in lines:
        assert f'data-tender="{line.email}"' in page.text and line.name in page.text
    assert f'href="/admin/hours.csv?{query.replace("&", "&amp;")}"' in page.text
    got = operator.get(f"/admin/hours.csv?{query}")
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/csv")
    assert 'filename="hours-2026-12-07-to-2026-12-13.csv"' in got.headers[
        "content-disposition"]
    assert got.text == as_csv(lines) and got.text.startswith("name,email,shifts,hours,")


def test_shifts_to_come_are_told_apart_and_an_inactive_tender_is_marked(pub: Pub) -> None:
    """The week is sent on NOW, before it begins: every shift on it is still to come, so
    the page says so beside the hours, and its title does not call them worked; once the
    week is over, none is. Bob, deactivated, is still listed for his shift, marked."""
    sent_week(pub)
    team = people(pub)
    assert tenders.deactivate(pub, team["Bob"].email).applied
    query = "from=2026-12-07&to=2026-12-13"
    for now, coming in ((NOW, True), (NOW + timedelta(days=15), False)):
        app = create_app(pub, web_settings(), clock=lambda now=now: now)
        with TestClient(app, base_url="https://testserver") as client:
            assert login(client).status_code == 303
            page = client.get(f"/admin/hours?{query}").text
            download = client.get(f"/admin/hours.csv?{query}").text
        assert "Hours on the roster" in page and "worked" not in page.split("<h1>")[1][:40]
        assert "to come" in page
        rows = {r["email"]: r for r in csv.DictReader(io.StringIO(download, newline=""))}
        alice, bob = rows[team["Alice"].email], rows[team["Bob"].email]
        assert int(alice["shifts"]) > 0 and bob["shifts"] == "1"
        assert alice["shifts_to_come"] == (alice["shifts"] if coming else "0")
        assert alice["hours_to_come"] == (alice["hours"] if coming else "0")
        assert (alice["active"], bob["active"]) == ("yes", "no")
        row = page.split(f'data-tender="{team["Bob"].email}"')[1].split("</tr>")[0]
        assert "inactive" in row
        assert "(inactive)" not in page.split(f'data-tender="{team["Alice"].email}"')[1].split(
            "</tr>")[0]


HOSTILE = ("=cmd|' /C calc'!A0", "@SUM(1+1)", "+1+1", "-1+1")


def test_the_download_has_no_formula_in_it(operator: TestClient, pub: Pub) -> None:
    """Issue 29, item 14: the web's download is the CLI's text, neutralised the same way."""
    for i, name in enumerate(HOSTILE):
        tenders.add(pub, name, f"h{i}@example.com")
    got = operator.get("/admin/hours.csv?from=2026-12-07&to=2026-12-13")
    assert got.status_code == 200
    names = {r["email"]: r["name"] for r in csv.DictReader(io.StringIO(got.text, newline=""))}
    for i, name in enumerate(HOSTILE):
        assert names[f"h{i}@example.com"] == "'" + name
    for row in csv.reader(io.StringIO(got.text, newline="")):
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row)


def test_by_default_it_is_this_month_so_far_and_bad_days_are_refused_in_words(
        operator: TestClient) -> None:
    page = operator.get("/admin/hours").text  # NOW is 30 Nov 2026, New York
    assert 'value="2026-11-01"' in page and 'value="2026-11-30"' in page
    for query in ("from=2026-12-13&to=2026-12-07", "from=13-12-2026&to=2026-12-20"):
        refused = operator.get(f"/admin/hours?{query}")
        assert refused.status_code == 400 and "Traceback" not in refused.text
        assert "flash-refused" in refused.text
        assert operator.get(f"/admin/hours.csv?{query}").status_code == 400


def test_the_report_needs_the_operator(pub: Pub) -> None:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client:
        for path in ("/admin/hours", "/admin/hours.csv"):
            assert client.get(path, follow_redirects=False).status_code == 303


def test_the_report_in_a_browser_on_a_desktop_and_a_phone(pub: Pub, browser: Any) -> None:
    sent_week(pub)
    assert tenders.deactivate(pub, people(pub)["Bob"].email).applied
    app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
    with served(app) as url:
        for name, page in (("desktop", desktop(browser)), ("phone", phone(browser))):
            page.goto(url + "/admin/login")
            page.fill("#password", PASSWORD)
            page.keyboard.press("Enter")
            page.wait_for_url(url + "/admin/")
            page.click("text=Hours")
            page.fill("#from", "2026-12-07")
            page.fill("#to", "2026-12-13")
            page.click("form[action='/admin/hours'] button")
            page.wait_for_url("**from=2026-12-07**")
            alice = page.locator('tr[data-tender="alice@example.com"]')
            assert alice.locator("td").nth(1).inner_text() != "0"
            bob = page.locator('tr[data-tender="bob@example.com"] .mark-inactive')
            assert bob.is_visible() and bob.inner_text() == "(inactive)"
            if name == "phone":
                assert fits(page) <= PHONE["width"], "the report scrolls sideways"
            with page.expect_download() as download:
                page.click("#download")
            assert download.value.suggested_filename == "hours-2026-12-07-to-2026-12-13.csv"
            shot(page, f"hours-{name}")
            page.context.close()
