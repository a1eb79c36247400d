"""Deactivating a tender who works shifts to come on a sent roster, in headless Chromium
against uvicorn on loopback (issue 29, item 1): at 1280 px and at 375 px the Deactivate
button answers with a page naming the shifts, whose "Deactivate and ask for cover" does
it. Screenshots go to ``PUBSCHED_ARTIFACTS`` (support.browser)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from pubsched import covers
from pubsched.mail.settings import load_mail_settings
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.web.app import create_app
from support.browser import desktop, fits, served, shot
from support.browser import phone as phone_page
from support.pub_covers import email, sent_week
from support.pub_web import PASSWORD, web_settings
from support.pubs import NOW, make_pub
from support.smtp_server import SmtpTestServer

LATER = NOW + timedelta(days=1)  # after the send, before any shift


@dataclass
class Site:
    url: str
    pub: Pub


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("browser_leaving")
    with SmtpTestServer() as smtp:
        mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                           PUBSCHED_SMTP_TIMEOUT="5"))
        pub = make_pub(f"sqlite:///{folder}/leaving.db", mail, web=True)
        sent_week(pub)
        app = create_app(pub, web_settings(insecure=True), clock=lambda: LATER)
        try:
            with served(app) as url:
                yield Site(url, pub)
        finally:
            pub.close()


@pytest.mark.parametrize(("width", "who", "shifts"), [
    (1280, "dan", ["Fri 11 Dec, 18:00 - 02:00, New York time (EST)",
                   "Sat 12 Dec, 18:00 - 02:00, New York time (EST)"]),
    (375, "cat", ["Fri 11 Dec, 18:00 - 02:00, New York time (EST)"])])
def test_deactivate_names_the_shifts_and_asks_for_cover(browser: Any, site: Site, width: int,
                                                        who: str, shifts: list[str]) -> None:
    page = desktop(browser) if width > 375 else phone_page(browser)
    try:
        page.goto(f"{site.url}/admin/tenders")
        page.fill("#password", PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{site.url}/admin/tenders")
        name = who.title()
        row = page.locator(f'tr[data-tender="{email(who)}"]')
        with page.expect_navigation():
            row.get_by_role("button", name=f"Deactivate {name}").click()
        assert page.locator("h1").inner_text() == f"Deactivate {name}?"
        assert page.locator("#shifts li").all_inner_texts() == shifts
        assert fits(page) <= width  # nothing wider than the screen
        shot(page, f"deactivate-confirm-{width}")
        assert tenders.get(site.pub, email(who)).active  # nothing changed yet
        with page.expect_navigation():
            page.locator("#deactivate-cover").click()
        said = page.locator(".flash").inner_text().strip()
        assert said.startswith(f"{name} is deactivated and off {len(shifts)} shift")
        shot(page, f"deactivate-done-{width}")
        assert not tenders.get(site.pub, email(who)).active
        asked = [c for c in covers.listed(site.pub)
                 if c.asker_email == email(who) and c.state == covers.OPEN]
        assert len(asked) == len(shifts)
    finally:
        page.context.close()
