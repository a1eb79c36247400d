"""The Mail page (/admin/mail, issue 29 item 13) in Chromium at 1280 and 375 px: the
operator reaches it from the menu, sees each email of unknown fate (here a cover offer to
Bob whose connection dropped after the data), presses "Resend" (its confirmation
accepted), and the email arrives again, once; the page then says there is none.
Screenshots ``mail-*.png`` under ``PUBSCHED_ARTIFACTS``/screenshots, looked at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pubsched import covers
from pubsched.web.app import create_app
from support.browser import DESKTOP, PHONE, desktop, fits, phone, served, shot
from support.cover_web import cover_pub, sent_week, team
from support.pub_web import PASSWORD, web_settings
from support.pubs import NOW, WEEK
from support.smtp_server import SmtpTestServer


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_operator_resends_an_email_of_unknown_fate_from_the_mail_page(
        tmp_path: Path, browser: Any, viewport: dict[str, int]) -> None:
    with SmtpTestServer() as smtp:
        pub = cover_pub(f"sqlite:///{tmp_path}/mail.db", smtp)
        try:
            week = sent_week(pub)
            bob = team(pub)["Bob"]
            smtp.drop_after_data(for_recipient=bob.email)
            assert covers.ask(pub, WEEK, week[0].id, team(pub)["Alice"].email,
                              note="Sorry, ill", now=NOW).applied
            covers.deliver(pub, NOW)
            smtp.clear_faults()
            offers = len([m for m in smtp.accepted if bob.email in m.rcpt_tos])
            app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
            with served(app) as url:
                width = viewport["width"]
                page = phone(browser) if width == PHONE["width"] else desktop(browser)
                name = "phone" if width == PHONE["width"] else "desktop"
                page.goto(url + "/admin/login")
                page.fill("#password", PASSWORD)
                page.keyboard.press("Enter")
                page.wait_for_url(url + "/admin/")
                page.click("nav >> text=Mail")
                page.wait_for_url("**/admin/mail")
                rows = page.locator("#mail-unknown tbody tr[data-mail]")
                assert rows.count() == 1
                said = rows.first.inner_text()
                assert "cover offer" in said and "Bob" in said and bob.email in said
                assert fits(page) <= width, "the mail page scrolls sideways"
                shot(page, f"mail-unknown-{name}")
                rows.first.locator("button[data-resend]").click()
                page.wait_for_selector(".flash")
                assert "sent again" in page.locator(".flash").inner_text()
                assert page.locator("#mail-unknown tbody tr[data-mail]").count() == 0
                assert "No email of unknown fate" in page.locator("#mail-unknown").inner_text()
                shot(page, f"mail-resent-{name}")
                page.context.close()
            assert len([m for m in smtp.accepted if bob.email in m.rcpt_tos]) == offers + 1
        finally:
            pub.close()
