"""The tender pages in headless Chromium (Playwright) against uvicorn on loopback, a SQLite
database and the real SMTP test server: the operator manages tenders on a desktop and on
a 375 px phone. Screenshots go to ``PUBSCHED_ARTIFACTS`` (default ``test-artifacts/``),
as test_browser.py's do; the browser and the server are support.browser's (skipped
without Chromium, a failure with ``PUBSCHED_REQUIRE_BROWSER=1``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pubsched.mail.settings import load_mail_settings
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.web.app import create_app
from support.browser import ARTIFACTS, PHONE, desktop, served
from support.browser import phone as phone_page
from support.pub_web import PASSWORD, web_settings
from support.pubs import NOW, make_pub
from support.smtp_server import SmtpTestServer


@dataclass
class Site:
    url: str
    pub: Pub
    smtp: SmtpTestServer

    def shot(self, page: Any, name: str, *, full_page: bool = True) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("browser_tenders")
    with SmtpTestServer() as smtp:
        mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                           PUBSCHED_SMTP_TIMEOUT="5"))
        pub = make_pub(f"sqlite:///{folder}/tenders.db", mail, web=True)
        app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
        try:
            with served(app) as url:
                yield Site(url, pub, smtp)
        finally:
            pub.close()


def new_page(browser: Any, *, phone: bool) -> Any:
    return phone_page(browser) if phone else desktop(browser)


def log_in(page: Any, site: Site) -> None:
    page.goto(f"{site.url}/admin/tenders")
    page.fill("#password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{site.url}/admin/tenders")


def flash(page: Any) -> str:
    return str(page.locator(".flash").inner_text()).strip()


def row(page: Any, email: str) -> Any:
    return page.locator(f'tr[data-tender="{email}"]')


def submit(page: Any, locator: Any) -> None:
    """Click a button that posts and wait for the page the redirect leads to."""
    with page.expect_navigation():
        locator.click()


def test_the_operator_manages_tenders_on_a_desktop(browser: Any, site: Site) -> None:
    page = new_page(browser, phone=False)
    try:
        log_in(page, site)
        assert page.locator("h1").inner_text() == "Tenders"
        site.shot(page, "tenders-desktop")

        # add a tender with skills
        page.fill("#add-name", "Dan Dare")
        page.fill("#add-email", "dan@example.com")
        page.fill("#add-max", "2")
        page.fill("#add-skills", "Bar, cellar")
        submit(page, page.locator("form[action='/admin/tenders/add'] button"))
        assert flash(page).startswith("Dan Dare is added.")
        dan = row(page, "dan@example.com")
        assert dan.locator(".skill").all_inner_texts() == ["bar", "cellar"]
        assert dan.locator("input[data-link=form]").count() == 1

        # a second add of the same address: drawn again, what was typed kept
        page.fill("#add-name", "Dan Again")
        page.fill("#add-email", "DAN@example.com")
        submit(page, page.locator("form[action='/admin/tenders/add'] button"))
        assert "already a tender" in page.locator("#add-problem").inner_text()
        assert page.input_value("#add-name") == "Dan Again"
        site.shot(page, "tenders-add-refused")

        # edit Dan: a new address, no maximum, other skills; the link stays the same
        link = dan.locator("input[data-link=form]").input_value()
        with page.expect_navigation():
            dan.locator("a", has_text="Edit").click()
        assert page.input_value("#edit-email") == "dan@example.com"
        assert page.input_value("#edit-skills") == "bar cellar"
        site.shot(page, "tender-edit-desktop")
        page.fill("#edit-email", "dan.dare@example.com")
        page.fill("#edit-max", "")
        page.fill("#edit-skills", "firstaid")
        submit(page, page.locator("button", has_text="Save"))
        assert flash(page) == "Dan Dare's details are saved"
        dan = row(page, "dan.dare@example.com")
        assert dan.locator("td[data-label='Most shifts']").inner_text() == "no maximum"
        assert dan.locator("input[data-link=form]").input_value() == link

        # invite Dan: one email with his link
        submit(page, dan.locator("button", has_text="Invite"))
        assert flash(page) == "Invitation sent to dan.dare@example.com"
        [mail] = site.smtp.accepted_for("dan.dare@example.com")
        assert link in mail.message.get_body(("plain",)).get_content()

        # deactivate Bob (the confirm is accepted): no links; then reactivate
        bob = row(page, "bob@example.com")
        submit(page, bob.locator("button", has_text="Deactivate"))
        assert flash(page).startswith("Bob is deactivated")
        bob = row(page, "bob@example.com")
        assert bob.locator("input[data-link]").count() == 0
        assert bob.locator("button", has_text="Invite").count() == 0
        site.shot(page, "tenders-bob-inactive")
        submit(page, bob.locator("button", has_text="Reactivate"))
        assert flash(page).startswith("Bob is active again")
        assert row(page, "bob@example.com").locator("input[data-link]").count() == 2

        # invite everyone active, once each
        site.smtp.clear_received()
        submit(page, page.locator("#invite-all"))
        assert flash(page) == "Invitations sent to 4 tender(s)"
        assert sorted(m.rcpt_tos[0] for m in site.smtp.accepted) == [
            "alice@example.com", "bob@example.com", "carol@example.com",
            "dan.dare@example.com"]
        site.shot(page, "tenders-desktop-after")
    finally:
        page.context.close()


def test_the_tender_pages_work_on_a_phone(browser: Any, site: Site) -> None:
    page = new_page(browser, phone=True)
    try:
        log_in(page, site)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the tenders page scrolls sideways ({width} px)"
        assert not page.locator("table.tenders thead").is_visible()  # cards, not columns
        carol = row(page, "carol@example.com")
        box = carol.bounding_box()
        assert box is not None and box["width"] <= PHONE["width"]
        invite = carol.locator("button", has_text="Invite")
        target = invite.bounding_box()
        assert target is not None and target["height"] >= 40  # a finger can hit it
        site.shot(page, "tenders-phone")
        page.evaluate("window.scrollTo(0, 0)")
        site.shot(page, "tenders-phone-top", full_page=False)
        carol.scroll_into_view_if_needed()
        site.shot(page, "tenders-phone-card", full_page=False)

        page.fill("#add-name", "Fay")
        page.fill("#add-email", "fay@example.com")
        page.fill("#add-skills", "bar")
        submit(page, page.locator("form[action='/admin/tenders/add'] button"))
        assert flash(page).startswith("Fay is added.")
        fay = tenders.get(site.pub, "fay@example.com")
        assert fay.skills == ("bar",)

        with page.expect_navigation():
            row(page, "fay@example.com").locator("a", has_text="Edit").click()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        site.shot(page, "tender-edit-phone")
        page.fill("#edit-max", "1")
        submit(page, page.locator("button", has_text="Save"))
        assert flash(page) == "Fay's details are saved"
        assert tenders.get(site.pub, "fay@example.com").max_shifts == 1

        submit(page, row(page, "fay@example.com").locator("button", has_text="Deactivate"))
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        site.shot(page, "tenders-phone-after")
    finally:
        page.context.close()
