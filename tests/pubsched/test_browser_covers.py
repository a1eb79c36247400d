"""Cover requests in Chromium (Playwright) against uvicorn on loopback and a real SMTP
server (issue 19's "Done when"): a tender on a phone (375 px) asks for cover from their
page; another takes it from the offer link found in the email the SMTP server received;
both calendar feeds (``/cal/{token}.ics``, parsed with icalendar) show the change (the
asker's event gone, the taker's there); the admin's covers page at 1280 and 375 px, its
lifecycle diagram drawn when opened. Screenshots ``covers-*.png`` under
``PUBSCHED_ARTIFACTS``/screenshots, looked at."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import pytest
from icalendar import Calendar

from pubsched import covers
from pubsched.people.calendar import shift_uid
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week.runs import Shift
from support.browser import DESKTOP, PHONE, desktop, fits, phone, served, shot
from support.cover_web import cover_pub, html_of, offers_to, path_of, sent_week, team, text_of
from support.pub_web import PASSWORD, web_settings
from support.pubs import NOW, WEEK
from support.smtp_server import SmtpTestServer


@dataclass
class Site:
    url: str
    pub: Pub
    smtp: SmtpTestServer
    week: list[Shift]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("covers_browser")
    with SmtpTestServer() as smtp:
        pub = cover_pub(f"sqlite:///{folder}/covers.db", smtp)
        try:
            week = sent_week(pub)
            app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
            with served(app) as url:
                yield Site(url, pub, smtp, week)
        finally:
            pub.close()


def uids(site: Site, name: str) -> set[str]:
    """The event UIDs of ``name``'s calendar feed, fetched over HTTP and parsed."""
    feed = httpx.get(site.url + team(site.pub)[name].calendar(site.pub))
    assert feed.status_code == 200
    return {str(e["UID"]) for e in Calendar.from_ical(feed.content).walk("VEVENT")}


def wait_for_offer(site: Site, email: str) -> str:
    """The offer link of the first email ``email`` received (sent after the answer)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = offers_to(site.smtp, email)
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no offer reached {email}")


def test_a_tender_on_a_phone_asks_and_another_takes_it_from_the_email(
        site: Site, browser: Any) -> None:
    people = team(site.pub)
    alice, bob = people["Alice"], people["Bob"]
    thursday = site.week[0]
    uid = shift_uid(date.fromisoformat(WEEK), thursday.id, alice.email)
    bob_uid = shift_uid(date.fromisoformat(WEEK), thursday.id, bob.email)
    assert uid in uids(site, "Alice") and bob_uid not in uids(site, "Bob")

    page = phone(browser)
    page.goto(site.url + alice.form(site.pub))
    ask = page.locator(f'details.cover-ask[data-shift="{thursday.id}"]')
    ask.locator("summary").click()
    page.fill(f"#note-{thursday.id}", "Sorry, I'm ill. The float is in the safe.")
    shot(page, "covers-ask-phone")
    assert fits(page) <= PHONE["width"]
    ask.locator("button").click()  # its confirmation is accepted (support.browser)
    page.wait_for_selector("#answer")
    assert page.locator("#answer").inner_text() == "You asked for cover"
    shot(page, "covers-asked-phone")
    assert fits(page) <= PHONE["width"]
    page.locator("#home").click()
    assert "You asked for cover" in page.locator("#upcoming").inner_text()
    shot(page, "covers-asker-page-phone")
    page.context.close()

    link = wait_for_offer(site, bob.email)
    # Bob's own page lists it too, with its button
    mine = phone(browser)
    mine.goto(site.url + bob.form(site.pub))
    takeable = mine.locator("#takeable li")
    assert takeable.count() == 1 and "Alice can't make it" in takeable.inner_text()
    assert takeable.locator("button").is_visible()
    shot(mine, "covers-taker-page-phone")
    assert fits(mine) <= PHONE["width"]
    mine.context.close()
    assert link.startswith("https://pub.example/c/")  # the pub's own address
    offer_mail = next(m for m in site.smtp.received if bob.email in m.rcpt_tos
                      and link in text_of(m))
    assert f'href="{link}"' in html_of(offer_mail)  # the button is the same link
    offer = phone(browser)
    offer.goto(site.url + path_of(link))
    assert offer.locator("#answer").inner_text() == "Can you cover this shift?"
    assert "Thu 10 Dec, 18:00 - 02:00" in offer.locator("#cover-shift").inner_text()
    assert "The float is in the safe." in offer.locator("blockquote").inner_text()
    shot(offer, "covers-offer-phone")
    assert fits(offer) <= PHONE["width"]
    box = offer.locator("#take").bounding_box()
    assert box is not None and box["height"] >= 44  # a thumb's target
    assert covers.listed(site.pub, WEEK)[0].state == "OPEN"  # the GET took nothing
    offer.locator("#take").click()
    offer.wait_for_selector("#answer >> text=It's yours")
    shot(offer, "covers-taken-phone")
    assert fits(offer) <= PHONE["width"]
    offer.context.close()

    # Carol's link, on a desktop: someone else was first, and no button
    late = desktop(browser)
    late.goto(site.url + path_of(wait_for_offer(site, people["Carol"].email)))
    assert late.locator("#answer").inner_text() == "Someone else took it first"
    assert late.locator("#take").count() == 0
    shot(late, "covers-offer-late-desktop")
    assert fits(late) <= DESKTOP["width"]
    late.context.close()

    # both calendars show the change: Alice's event gone, Bob's there
    assert uid not in uids(site, "Alice")
    assert bob_uid in uids(site, "Bob")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_covers_page_on_a_desktop_and_a_phone(site: Site, browser: Any,
                                                  viewport: dict[str, int]) -> None:
    if not any(c.state == "OPEN" for c in covers.listed(site.pub, WEEK)):
        people = team(site.pub)  # an open one too, with its cancel button
        assert covers.ask(site.pub, WEEK, site.week[2].id, people["Carol"].email,
                          note="My sister's wedding", now=NOW).applied
        assert covers.deliver(site.pub, NOW)
    width = viewport["width"]
    page = phone(browser) if width == PHONE["width"] else desktop(browser)
    page.goto(site.url + "/admin/login")
    page.fill("#password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(site.url + "/admin/")
    page.click("nav >> text=Covers")
    page.wait_for_url("**/admin/covers")
    rows = page.locator("table.covers tbody tr[data-cover]")
    assert rows.count() >= 1
    assert fits(page) <= width, "the covers page scrolls sideways"
    shot(page, f"covers-admin-{'phone' if width == PHONE['width'] else 'desktop'}")
    page.locator("#lifecycle summary").click()
    page.wait_for_selector("body[data-diagram=drawn]")
    assert page.locator("#lifecycle svg").count() == 1
    assert fits(page) <= width
    shot(page, f"covers-admin-diagram-{'phone' if width == PHONE['width'] else 'desktop'}")
    cancel = page.locator("table.covers button[data-cancel]")
    assert cancel.count() == 1 and cancel.is_visible()
    page.goto(site.url + f"/admin/weeks/{WEEK}")
    notes = page.locator(".cover-on-shift:visible").all_inner_texts()
    assert "Carol can't make it — looking for cover" in notes
    if covers.listed(site.pub, WEEK)[0].state == "TAKEN":  # after the first test
        assert "Alice can't make it — covered by Bob" in notes
    assert fits(page) <= width
    shot(page, f"covers-week-{'phone' if width == PHONE['width'] else 'desktop'}")
    # the operator calls Carol's request off from the covers page (its question accepted)
    page.click("text=Requests for cover this week")
    page.wait_for_url(f"**/admin/covers?week={WEEK}")
    page.locator("table.covers button[data-cancel]").click()
    page.wait_for_selector(".flash-ok")
    assert "is called off: Carol still works" in page.locator(".flash-ok").inner_text()
    assert page.locator("table.covers button[data-cancel]").count() == 0
    assert not any(c.state == "OPEN" for c in covers.listed(site.pub, WEEK))
    assert fits(page) <= width
    shot(page, f"covers-admin-cancelled-{'phone' if width == PHONE['width'] else 'desktop'}")
    page.context.close()
