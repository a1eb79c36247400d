"""The real pages in headless Chromium (Playwright, sync) against uvicorn on loopback, a
SQLite database and the real SMTP test server: what a person sees and does.

The browser, the server and the screenshots are support.browser's (skipped without
Chromium, failed under ``PUBSCHED_REQUIRE_BROWSER=1``); the README's pictures (docs/) are
taken by scripts/readme_shots.py from a seeded pub.

Kept to a few tests sharing one browser and one server: the suite's time matters.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from icalendar import Calendar

from pubsched.mail.settings import load_mail_settings
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week.view import week_show
from support.browser import PHONE, desktop, fits, phone, served, shot
from support.pub_web import PASSWORD, Tender, people, web_settings
from support.pubs import NOW, WEEK, make_pub
from support.smtp_server import SmtpTestServer


@dataclass
class Site:
    url: str
    pub: Pub
    smtp: SmtpTestServer
    team: dict[str, Tender]

    def shot(self, page: Any, name: str) -> Path:
        return shot(page, name)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("browser")
    with SmtpTestServer() as smtp:
        mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                           PUBSCHED_OPERATOR_EMAIL="ops@example.com",
                                           PUBSCHED_SMTP_TIMEOUT="5"))
        pub = make_pub(f"sqlite:///{folder}/browser.db", mail, web=True)
        app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
        try:
            with served(app) as url:
                yield Site(url, pub, smtp, people(pub))
        finally:
            pub.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    made = desktop(browser)
    try:
        yield made
    finally:
        made.context.close()


def phone_page(browser: Any) -> Any:
    return phone(browser)


def log_in(page: Any, site: Site) -> None:
    page.goto(f"{site.url}/admin/")
    page.fill("#password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{site.url}/admin/")


def button(page: Any, edge: str) -> Any:
    return page.locator(f'button[data-edge="{edge}"]')


def test_wrong_password_then_a_whole_week(browser: Any, page: Any, site: Site) -> None:
    page.goto(f"{site.url}/admin/")
    assert "/admin/login" in page.url
    page.fill("#password", "not the password")
    page.click("text=Log in")
    assert page.locator("text=Wrong password.").is_visible()
    site.shot(page, "login-refused")
    log_in(page, site)

    # open the week from the weeks page
    page.fill("#week", WEEK)
    page.click("form[action='/admin/open'] button")
    page.wait_for_url(f"{site.url}/admin/weeks/{WEEK}")
    assert page.locator("#state").get_attribute("data-state") == "COLLECTING"
    assert page.locator("#state").inner_text() == "Taking availability"  # in words
    assert page.locator("#status .now").inner_text().startswith("Taking availability until ")
    assert [b.get_attribute("data-edge") for b in page.locator("button[data-edge]").all()] == \
        ["extend", "close"]

    # two tenders answer through their links: Alice on a desktop, Bob on a phone
    alice, bob = site.team["Alice"], site.team["Bob"]
    tender = page.context.new_page()
    tender.goto(site.url + alice.form(site.pub))
    boxes = tender.locator("input[name=shift]")
    for i in (0, 1):
        boxes.nth(i).check()
    tender.fill("#max", "2")
    tender.click("button.primary")
    tender.wait_for_url("**?saved=1")  # the POST's redirect: is_visible() does not wait
    assert tender.locator("text=Saved.").is_visible()
    tender.close()

    bob_page = phone_page(browser)
    try:
        bob_page.goto(site.url + bob.form(site.pub))
        width = bob_page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the form scrolls sideways on a phone ({width} px)"
        # keyboard only: Tab to each checkbox, Space to tick, Enter to send
        boxes = bob_page.locator("input[name=shift]")
        bob_page.focus("input[name=shift] >> nth=0")
        for i in range(boxes.count()):
            if i in (1, 2):
                bob_page.keyboard.press("Space")
            bob_page.keyboard.press("Tab")
        bob_page.keyboard.type("2")  # the focus is on the maximum now
        assert bob_page.evaluate("document.activeElement.id") == "max"
        bob_page.keyboard.press("Enter")
        bob_page.wait_for_url("**?saved=1")
        assert bob_page.locator("text=Saved.").is_visible()
        assert bob_page.locator("input[name=shift]:checked").count() == 2
        site.shot(bob_page, "tender-form-phone")
    finally:
        bob_page.context.close()

    # the operator closes, generates, approves, and double-clicks send
    page.reload()
    submitted = page.locator("td[title='alice@example.com']")  # by name (#17.22)
    assert submitted.first.is_visible() and submitted.first.inner_text() == "Alice"
    for edge in ("close", "generate", "approve"):
        button(page, edge).click()
        page.wait_for_load_state()
        assert page.locator(".flash-ok").is_visible(), page.locator(".flash").inner_text()
        if edge == "close":  # the tender's page now says so, and when the schedule comes
            closed = phone_page(browser)
            closed.goto(site.url + alice.form(site.pub))
            assert closed.locator("text=is closed").is_visible()
            assert closed.locator("text=The schedule is expected by").is_visible()
            assert closed.locator("input[name=shift]").count() == 0
            site.shot(closed, "tender-form-closed-phone")
            closed.context.close()
    assert page.locator("#state").get_attribute("data-state") == "APPROVED"
    button(page, "send").dblclick()
    page.wait_for_selector("#state[data-state=SENT]")
    assert page.locator("#status .now").inner_text().startswith("Sent: ")
    assert page.locator("pre.mermaid svg").count() == 0  # folded: drawn when opened
    page.click("#lifecycle summary")
    page.wait_for_selector("body[data-diagram=drawn]")
    shown = week_show(site.pub, WEEK)
    assigned = sorted({e for s in shown["shifts"] for e in s["assigned"]})
    assert assigned and [d["status"] for d in shown["deliveries"]] == ["sent"] * len(assigned)
    for email in assigned:
        assert len(site.smtp.accepted_for(email)) == 1, email  # one email, double click
    assert len([h for h in shown["history"] if h["edge"] == "send"]) == 1
    # the lifecycle drawn, the week's state highlighted
    assert page.locator("pre.mermaid svg").count() == 1
    assert page.locator("pre.mermaid svg g.current").count() >= 1
    assert page.locator("button[data-edge]").count() == 0
    site.shot(page, "week-page")

    # the calendar feed: Alice's assigned shifts of the sent week
    feed = page.request.get(site.url + alice.calendar(site.pub))
    assert feed.ok and feed.headers["content-type"].startswith("text/calendar")
    events = Calendar.from_ical(feed.body()).walk("VEVENT")
    mine = [s for s in shown["shifts"] if alice.email in s["assigned"]]
    assert len(events) == len(mine) >= 1
    assert all(str(e["SUMMARY"]).startswith("Shift at The pub") for e in events)

    # once sent, no form is open until the next week's
    closed = page.context.new_page()
    closed.goto(site.url + site.team["Carol"].form(site.pub))
    assert closed.locator("text=No form is open").is_visible()
    closed.close()

    # the week page on a phone too: nothing wider than the screen but its own scrollers
    page.set_viewport_size(PHONE)
    page.goto(f"{site.url}/admin/weeks/{WEEK}")
    assert page.locator("ul.roster-list").is_visible()  # who works each shift, in a list
    page.click("#lifecycle summary")
    page.wait_for_selector("body[data-diagram=drawn]")
    site.shot(page, "week-page-phone")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.set_viewport_size({"width": 1280, "height": 900})

    # the other admin pages, as artifacts to look at
    for path, name in (("/admin/", "weeks"), ("/admin/tenders", "tenders"),
                       ("/admin/cutover", "cutover")):
        page.goto(site.url + path)
        assert page.locator("h1").is_visible()
        site.shot(page, name)

    # the list of weeks in words, and as one card per week on a phone
    page.goto(site.url + "/admin/")
    listed = page.locator("table.cards tbody tr").first
    assert listed.locator("td").nth(1).inner_text() == "Sent"
    page.set_viewport_size(PHONE)
    assert fits(page) <= PHONE["width"], "the weeks list scrolls sideways on a phone"
    label = listed.locator("td").first.evaluate(
        "td => getComputedStyle(td, '::before').content")
    assert label == '"Week of"'  # each cell says what it is, the heading row being hidden
    site.shot(page, "weeks-phone")
    page.set_viewport_size({"width": 1280, "height": 900})


def test_bad_links_lead_nowhere(page: Any, site: Site) -> None:
    alice = site.team["Alice"]
    token = alice.form(site.pub).removeprefix("/t/")
    # a tender's link on an admin URL: the login page, nothing of the admin
    page.goto(f"{site.url}/admin/{token}")
    assert "/admin/login" in page.url and page.locator("#password").is_visible()
    page.goto(f"{site.url}/admin/weeks/{WEEK}?t={token}")
    assert "/admin/login" in page.url
    # a tampered link
    page.goto(f"{site.url}/t/{token[:-2]}xy")
    assert page.locator("text=This link does not work").is_visible()
    site.shot(page, "tampered-link")
    # a revoked link: the old one is dead, the new one works
    tenders.revoke_links(site.pub, alice.email)
    page.goto(f"{site.url}/t/{token}")
    assert page.locator("text=This link does not work").is_visible()
    page.goto(site.url + alice.form(site.pub))
    assert page.locator("text=Hi Alice").is_visible()
