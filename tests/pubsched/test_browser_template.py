"""The pub's week in headless Chromium (Playwright, sync) against uvicorn on loopback and a
SQLite database: the operator manages the template at 1280 px and at 375 px (list, add,
edit, remove; nothing scrolls sideways on a phone), the week page's one-off shift form and
remove buttons, and the note a tender then finds on their form. One Chromium per session
(tests/pubsched/conftest.py's ``browser``, support.browser); screenshots under
``test-artifacts/screenshots/pubweek-*.png``, to be looked at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pubsched.engines import v2
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from pubsched.week import template
from pubsched.week.submissions import submit
from pubsched.week.view import week_show
from support.browser import desktop, fits, phone, served, shot
from support.pub_web import PASSWORD, people, web_settings
from support.pubs import NOW, WEEK, make_pub


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, Pub]]:
    pub = make_pub(f"sqlite:///{tmp_path}/browser.db", web=True)
    try:
        with served(create_app(pub, web_settings(insecure=True), clock=lambda: NOW)) as url:
            yield url, pub
    finally:
        pub.close()


def log_in(page: Any, url: str) -> None:
    page.goto(f"{url}/admin/")
    page.fill("#password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{url}/admin/")


def no_sideways_scroll(page: Any) -> None:
    width = fits(page)
    assert width <= page.viewport_size["width"], f"the page scrolls sideways ({width} px)"


def add_shift(page: Any, label: str, day: str, start: str, end: str, slots: str,
              needs: str) -> None:
    page.fill("#add-label", label)
    page.select_option("#add-day", day)
    page.fill("#add-start", start)
    page.fill("#add-end", end)
    page.fill("#add-slots", slots)
    page.fill("#add-needs", needs)
    press(page, page.get_by_role("button", name="Add the shift"))


def press(page: Any, target: Any) -> None:
    """Click a button that posts its form, and wait for the page the post leads to."""
    with page.expect_navigation():
        target.click()


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_operator_manages_the_pubs_week(browser: Any, site: tuple[str, Pub],
                                            viewport: str) -> None:
    url, pub = site
    page = desktop(browser) if viewport == "desktop" else phone(browser)
    try:
        log_in(page, url)
        page.click("nav >> text=Pub's week")
        page.wait_for_url(f"{url}/admin/template")
        assert page.locator("article.tshift h3").all_inner_texts() == [
            "Thursday night", "Friday night", "Saturday night"]
        no_sideways_scroll(page)
        shot(page, f"pubweek-template-{viewport}")

        add_shift(page, "Sunday lunch", "sun", "12:00", "16:00", "3", "Kitchen bar")
        assert "added Sunday lunch" in page.locator(".flash").inner_text()
        add_shift(page, "Twin", "thu", "18:00", "23:00", "2", "")  # the server's check
        assert "has a shift on Thursday at 18:00 already" in page.locator(
            ".flash").inner_text()

        friday = page.locator("article[data-shift='2']")
        friday.locator("summary").click()
        friday.locator("input[name=label]").fill("Big Friday")
        friday.locator("input[name=slots]").fill("4")
        friday.locator("input[name=needs]").fill("cellar")
        no_sideways_scroll(page)
        shot(page, f"pubweek-template-edit-{viewport}")
        press(page, friday.locator("button", has_text="Save"))
        assert "the pub's week now has Big Friday" in page.locator(".flash").inner_text()

        press(page, page.locator("article[data-shift='3'] >> text=Remove"))
        assert "removed Saturday night" in page.locator(".flash").inner_text()
        assert page.locator("article.tshift h3").all_inner_texts() == [
            "Thursday night", "Big Friday", "Sunday lunch"]
        no_sideways_scroll(page)
        shot(page, f"pubweek-template-after-{viewport}")
        listed = [t.as_json() for t in template.listing(pub)]
        assert [(t["label"], t["day"], t["slots"], t["needs"]) for t in listed] == [
            ("Thursday night", "thu", 2, []), ("Big Friday", "fri", 4, ["cellar"]),
            ("Sunday lunch", "sun", 3, ["kitchen", "bar"])]

        # a new week is made of it; on its page, a one-off shift and a closed night
        page.goto(f"{url}/admin/")
        page.fill("#draft-week", WEEK)
        page.click("text=Create as draft")
        page.wait_for_url(f"{url}/admin/weeks/{WEEK}")
        page.fill("#own-label", "Quiz night")
        page.fill("#own-date", "2026-12-08")
        page.fill("#own-start", "19:00")
        page.fill("#own-end", "23:00")
        press(page, page.get_by_role("button", name="Add a one-off shift"))
        assert "Quiz night" in page.locator(".flash").inner_text()
        v2.open_form(pub, WEEK, now=NOW)  # Alice ticks Big Friday, then it is closed
        friday_id = next(s.id for s in weeks.shifts(pub, WEEK) if s.label == "Big Friday")
        alice = people(pub)["Alice"]
        tenders.edit(pub, alice.email, skills=["cellar"])  # Big Friday needs it to be ticked
        assert submit(pub, WEEK, alice.email, [friday_id], now=NOW)
        page.reload()
        press(page, page.locator("ul.own-shifts li", has_text="Big Friday").locator("button"))
        assert "1 tender(s) had ticked it" in page.locator(".flash").inner_text()
        no_sideways_scroll(page)
        shot(page, f"pubweek-week-own-shifts-{viewport}")
        assert [s["label"] for s in week_show(pub, WEEK)["shifts"]] == [
            "Quiz night", "Thursday night", "Sunday lunch"]
        page.goto(url + alice.form(pub))
        note = page.locator("p.removed").inner_text()
        assert note == ("The operator removed Big Friday, Fri 11 Dec 18:00 (closed); your "
                        "other answers are kept.")
        no_sideways_scroll(page)
        shot(page, f"pubweek-tender-removed-{viewport}")
    finally:
        page.context.close()
