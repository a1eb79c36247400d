"""Operator accounts in headless Chromium (Playwright, sync) against uvicorn on loopback and
a SQLite database: the login by email, the operators page (add with the password twice,
remove), changing one's own password (another browser's session is out at its next
click), who moved the week in its history, at 1280 px and on a 375 px phone.

Screenshots go to ``PUBSCHED_ARTIFACTS`` (default ``test-artifacts/``)/screenshots, named
``operators-*`` (support.browser; skipped loudly without Chromium)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pubsched.people import operators
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week.view import week_show
from support.browser import desktop, fits, phone, served, shot
from support.pub_web import FAST_HASH, PASSWORD, web_settings
from support.pubs import NOW, WEEK, make_pub

ANN, GOOD = "ann@pub.example", "correct horse battery"
NEW = "a brand new passphrase"


@dataclass
class Site:
    url: str
    pub: Pub

    def shot(self, page: Any, name: str) -> Path:
        return shot(page, f"operators-{name}")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    pub = make_pub(f"sqlite:///{tmp_path}/browser.db", web=True)
    app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
    try:
        with served(app) as url:
            yield Site(url, pub)
    finally:
        pub.close()


def new_page(browser: Any, on_phone: bool) -> Any:
    return phone(browser) if on_phone else desktop(browser)


def log_in(page: Any, site: Site, email: str, password: str) -> None:
    page.goto(f"{site.url}/admin/")
    assert "/admin/login" in page.url
    page.fill("#email", email)
    page.fill("#password", password)
    page.keyboard.press("Enter")


@pytest.mark.parametrize("on_phone", [False, True], ids=["desktop", "phone"])
def test_login_by_email_the_operators_page_and_who_moved_the_week(
        browser: Any, site: Site, on_phone: bool) -> None:
    size = "phone" if on_phone else "desktop"
    width = 375 if on_phone else 1280
    assert operators.add(site.pub, ANN, GOOD, hasher=FAST_HASH, now=NOW)
    page = new_page(browser, on_phone)
    try:
        log_in(page, site, ANN, "not the password")
        page.wait_for_selector("text=Wrong email or password.")
        assert page.input_value("#email") == ANN  # kept, only the password to type again
        site.shot(page, f"login-refused-{size}")
        page.fill("#password", GOOD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{site.url}/admin/")
        assert page.locator("header.top").get_by_text(ANN).is_visible()

        page.goto(f"{site.url}/admin/operators")
        assert page.locator("td", has_text=ANN).first.is_visible()
        page.fill("#new-email", "bob@pub.example")
        page.fill("#new-password", GOOD)
        page.fill("#new-password-again", GOOD + "?")
        page.click("text=Add operator")
        page.wait_for_selector(".flash-refused")
        assert "the two passwords differ" in page.inner_text(".flash-refused")
        assert [o.email for o in operators.all_operators(site.pub)] == [ANN]
        page.fill("#new-email", "bob@pub.example")
        page.fill("#new-password", GOOD)
        page.fill("#new-password-again", GOOD)
        page.click("text=Add operator")
        page.wait_for_selector(".flash-ok")
        assert page.locator("td", has_text="bob@pub.example").first.is_visible()
        assert fits(page) <= width, "the operators page scrolls sideways"
        site.shot(page, f"page-{size}")
        page.click('button[aria-label="Remove bob@pub.example"]')
        page.wait_for_selector(".flash-ok")
        assert "removed operator bob@pub.example" in page.inner_text(".flash-ok")
        assert [o.email for o in operators.all_operators(site.pub)] == [ANN]

        # a new password: typed wrong first, then right; a second browser logged in as
        # Ann is out at its next click, this one stays in
        elsewhere = new_page(browser, on_phone)
        try:
            log_in(elsewhere, site, ANN, GOOD)
            elsewhere.wait_for_url(f"{site.url}/admin/")
            page.fill("#current-password", "not my password")
            page.fill("#changed-password", NEW)
            page.fill("#changed-password-again", NEW)
            page.click("text=Change my password")
            page.wait_for_selector(".flash-refused")
            assert "not your current password" in page.inner_text(".flash-refused")
            page.fill("#current-password", GOOD)
            page.fill("#changed-password", NEW)
            page.fill("#changed-password-again", NEW)
            page.click("text=Change my password")
            page.wait_for_selector(".flash-ok")
            assert "Your password is changed" in page.inner_text(".flash-ok")
            assert fits(page) <= width, "the operators page scrolls sideways"
            site.shot(page, f"password-changed-{size}")
            elsewhere.goto(f"{site.url}/admin/operators")
            assert "/admin/login" in elsewhere.url
        finally:
            elsewhere.context.close()
        page.goto(f"{site.url}/admin/operators")
        assert "/admin/operators" in page.url

        # a move made here names the operator in the week's history
        page.goto(f"{site.url}/admin/")
        page.fill("#week", WEEK)
        page.locator("form[action='/admin/open'] button").click()
        page.wait_for_url(f"{site.url}/admin/weeks/{WEEK}")
        assert [h["by"] for h in week_show(site.pub, WEEK)["history"]][-1] == f"operator:{ANN}"
        by = page.locator("table.list td", has_text=f"operator:{ANN}")
        by.first.scroll_into_view_if_needed()
        assert by.first.is_visible()
        site.shot(page, f"week-history-{size}")

        # removed (from the CLI, say): the next click meets the login page
        assert operators.remove(site.pub, ANN)
        page.goto(f"{site.url}/admin/operators")
        assert "/admin/login" in page.url
    finally:
        page.context.close()


def test_the_quick_start_admin_logs_in_by_the_email_admin(browser: Any, site: Site) -> None:
    page = new_page(browser, True)
    try:
        page.goto(f"{site.url}/admin/")
        assert page.locator("#email").is_visible() and fits(page) <= 375
        site.shot(page, "login-phone")
        log_in(page, site, "admin", PASSWORD)
        page.wait_for_url(f"{site.url}/admin/")
        assert page.locator("header.top").get_by_text("admin", exact=True).is_visible()
        page.goto(f"{site.url}/admin/operators")
        assert page.get_by_text("No operator accounts yet").is_visible() and fits(page) <= 375
        site.shot(page, "empty-phone")
    finally:
        page.context.close()
