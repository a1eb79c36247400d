"""Issue #19: the reminder before a shift, as a tender meets it, in Chromium (Playwright)
against uvicorn on loopback at 375 px (a phone) and 1280 px: the email's link opens their
page, whose Reminders section says what they get and switches it off and on again (and
the next shift's reminder then does not come); the operator's box on the tender's edit
page does the same. Screenshots under ``PUBSCHED_ARTIFACTS``/screenshots, looked at."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pubsched.engines import v2
from pubsched.mail.settings import load_mail_settings
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.tick.run import tick
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from pubsched.week import submissions
from support.browser import desktop, fits, phone, served, shot
from support.pub_reminders import parts, reminded_of, reminders
from support.pub_web import PASSWORD, Tender, people, web_settings
from support.pubs import NOW, WEEK, make_pub
from support.smtp_server import SmtpTestServer


@dataclass
class Site:
    url: str
    pub: Pub
    smtp: SmtpTestServer
    alice: Tender
    shifts: list[weeks.Shift]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """WEEK sent, Alice on all three of its shifts; mail to a loopback SMTP server."""
    folder: Path = tmp_path_factory.mktemp("browser_reminders")
    with SmtpTestServer() as smtp:
        mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                           PUBSCHED_PUB_NAME="The Crown",
                                           PUBSCHED_SMTP_TIMEOUT="5"))
        pub = make_pub(f"sqlite:///{folder}/reminders.db", mail, web=True)
        team = people(pub)
        assert v2.open_form(pub, WEEK, now=NOW).applied
        made = weeks.shifts(pub, WEEK)
        assert submissions.submit(pub, WEEK, team["Alice"].email, [s.id for s in made],
                                  now=NOW).applied
        for step in (v2.close, v2.generate, v2.approve, v2.send):
            assert step(pub, WEEK, now=NOW).applied, step
        app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
        try:
            with served(app) as url:
                yield Site(url, pub, smtp, team["Alice"], made)
        finally:
            pub.close()


def switch_is(site: Site) -> bool:
    found = tenders.by_id(site.pub, site.alice.id)
    assert found is not None
    return found.shift_reminders


def click_and_wait(page: Any, selector: str) -> None:
    with page.expect_navigation():
        page.locator(selector).click()


def test_the_reminders_link_opens_their_page_and_they_switch_reminders_off_on_a_phone(
        site: Site, browser: Any) -> None:
    thursday, friday, saturday = site.shifts
    tick(site.pub, thursday.starts_at - timedelta(hours=6))
    assert reminded_of(site.smtp, thursday.id) == [site.alice.email]
    [mail] = [m for m in reminders(site.smtp) if f"remind-shift.{thursday.id}."
              in str(m.message["Message-ID"])]
    text, _ = parts(mail)
    link = next(line.strip() for line in text.splitlines() if "/t/" in line)
    page = phone(browser)
    page.goto(site.url + "/t/" + link.rsplit("/t/", 1)[1])  # the email's link, served here
    page.locator("#reminders").scroll_into_view_if_needed()
    shot(page, "reminders-tender-on-375")
    assert fits(page) <= 375
    assert page.locator("#reminders h2").inner_text() == "Reminders"
    assert page.locator("#reminders-state").inner_text() == (
        "You get an email 6 hours before each of your shifts.")
    button = page.locator("#reminders-switch")
    assert button.inner_text() == "Turn reminders off"
    assert button.bounding_box()["height"] >= 44  # a thumb can hit it
    click_and_wait(page, "#reminders-switch")
    assert page.url.endswith("?reminders=off#reminders")
    assert page.locator("#reminders-saved").inner_text() == (
        "Saved: reminders before your shifts are off.")
    assert "are off: you get no email before them" in page.locator(
        "#reminders-state").inner_text()
    shot(page, "reminders-tender-off-375")
    assert fits(page) <= 375
    assert switch_is(site) is False
    tick(site.pub, friday.starts_at - timedelta(hours=6))
    assert reminded_of(site.smtp, friday.id) == []  # off: Friday's does not come
    click_and_wait(page, "#reminders-switch")  # "Turn reminders on"
    assert page.locator("#reminders-saved").inner_text() == (
        "Saved: reminders before your shifts are on.")
    assert switch_is(site) is True
    tick(site.pub, saturday.starts_at - timedelta(hours=6))
    assert reminded_of(site.smtp, saturday.id) == [site.alice.email]
    page.context.close()


def test_the_switch_on_a_desktop(site: Site, browser: Any) -> None:
    page = desktop(browser)
    page.goto(site.url + site.alice.form(site.pub))
    shot(page, "reminders-tender-1280")
    assert fits(page) <= 1280
    click_and_wait(page, "#reminders-switch")
    assert switch_is(site) is False
    shot(page, "reminders-tender-off-1280")
    click_and_wait(page, "#reminders-switch")
    assert switch_is(site) is True
    page.context.close()


def test_a_pub_with_no_shift_reminders_says_so_and_offers_no_switch(site: Site,
                                                                    browser: Any) -> None:
    before = site.pub.config
    site.pub.config = replace(before, remind_shift_hours=0.0)
    try:
        page = phone(browser)
        page.goto(site.url + site.alice.form(site.pub))
        assert page.locator("#reminders-state").inner_text() == (
            "The Crown sends no reminders before shifts.")
        assert page.locator("#reminders-switch").count() == 0
        page.context.close()
    finally:
        site.pub.config = before


@pytest.mark.parametrize("width", [375, 1280])
def test_the_operator_switches_them_on_the_tenders_edit_page(site: Site, browser: Any,
                                                             width: int) -> None:
    page = phone(browser) if width == 375 else desktop(browser)
    page.goto(f"{site.url}/admin/tenders/{site.alice.id}")
    page.fill("#password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{site.url}/admin/tenders/{site.alice.id}")
    box = page.locator("#edit-reminders")
    assert box.is_checked()
    label = page.locator("label.check")
    label.scroll_into_view_if_needed()
    shot(page, f"reminders-admin-edit-{width}")
    assert fits(page) <= width
    at, around = box.bounding_box(), label.bounding_box()  # the box begins its row
    assert abs(at["x"] - around["x"]) < 2 and at["y"] < around["y"] + around["height"] / 2
    box.uncheck()
    click_and_wait(page, f"form[action='/admin/tenders/{site.alice.id}'] button")
    assert switch_is(site) is False
    page.goto(f"{site.url}/admin/tenders/{site.alice.id}")
    assert not page.locator("#edit-reminders").is_checked()
    page.locator("#edit-reminders").check()
    click_and_wait(page, f"form[action='/admin/tenders/{site.alice.id}'] button")
    assert switch_is(site) is True
    page.context.close()


def test_the_reminders_read_on_a_phone(site: Site, browser: Any) -> None:
    """Each reminder's HTML as a phone's mail app draws it (375 px): nothing sideways, the
    button big enough for a thumb, the pub's name on top."""
    from datetime import date

    from pubsched.mail.compose import Recipient, ShiftLine
    from pubsched.mail.reminder import (
        RosterState,
        compose_review,
        compose_shift_reminder,
        compose_short,
        compose_unanswered,
    )

    mail = replace(site.pub.config.mail, operator_email="boss@example.com",
                   pub_address="1 High Street, Hadley")
    thursday = site.shifts[0]
    line = ShiftLine(thursday.id, thursday.label, thursday.starts_at, thursday.ends_at,
                     "America/New_York", ("Alice", "Bob"), 3)
    at = thursday.starts_at - timedelta(hours=6)
    alice = Recipient(site.alice.email, "Alice")
    page_url = "https://pub.example/t/a-long-signed-token-0123456789abcdefghijklmnopqrstuv"
    messages = {
        "shift": compose_shift_reminder(alice, line, lead_hours=6, page_url=page_url,
                                        settings=mail, now=at, cover_asked=True),
        "form": compose_unanswered(alice, date(2026, 12, 14), deadline=at + timedelta(days=5),
                                   tz="America/New_York", page_url=page_url, settings=mail,
                                   now=at),
        "review": compose_review(date(2026, 12, 14), RosterState(4, 6, ("cellar",)),
                                 generated_at=at, send_by=at + timedelta(days=1),
                                 tz="America/New_York", settings=mail, now=at,
                                 admin_url="https://pub.example/admin/weeks/2026-12-14"),
        "short": compose_short(line, date(2026, 12, 7), open_covers=["Bob"], settings=mail,
                               now=at - timedelta(hours=18),
                               admin_url="https://pub.example/admin/weeks/2026-12-07"),
    }
    page = phone(browser)
    for name, outgoing in messages.items():
        html = outgoing.message.get_body(("html",))
        assert html is not None
        page.set_content(str(html.get_content()))
        shot(page, f"reminders-email-{name}-375")
        assert fits(page) <= 375, name
        assert page.locator("td td").first.inner_text().strip() == "The Crown"
        button = page.locator("a").first
        assert button.bounding_box()["height"] >= 44, name
    page.context.close()
