"""The pages issue 29's item 6 changed, in Chromium at 1280 and 375 px: what a person sees
(the coloured button, the question asked before an early close, the words), and nothing
scrolling sideways on a phone. Screenshots ``words-*.png`` go to support.browser's
artifacts folder, to be looked at; what the pages say is checked in-process in
test_web_words.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pubsched.engines import v2
from pubsched.people import operators, tenders
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.web.auth import AdminPassword
from pubsched.web.settings import WebSettings
from pubsched.week.runs import shifts
from pubsched.week.submissions import submit
from pubsched.week.view import week_show
from support.browser import DESKTOP, PHONE, fits, shot
from support.browser import served as serving
from support.pub_web import FAST_HASH, PASSWORD, Tender, people, web_settings
from support.pubs import NOW, WEEK, make_pub

VIEWPORTS = ((DESKTOP, "desktop"), (PHONE, "phone"))
ANN = "ann@pub.example"
ANN_PASSWORD = "a long operator password"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Pub]]:
    """The pub (began on v2, a week open, Alice's maximum 3 and her answer in), served twice:
    with the admin password, and without it (one operator account, Ann)."""
    folder = tmp_path_factory.mktemp("browser_words")
    pub = make_pub(f"sqlite:///{folder}/words.db", web=True)
    alice = people(pub)["Alice"]
    assert tenders.edit(pub, alice.email, max_shifts=3).applied
    assert v2.open_form(pub, WEEK, now=NOW)
    assert submit(pub, WEEK, alice.email, [s.id for s in shifts(pub, WEEK)], now=NOW)
    assert operators.add(pub, ANN, ANN_PASSWORD, hasher=FAST_HASH)
    closed = WebSettings(AdminPassword(None, FAST_HASH), insecure_cookies=True)
    try:
        with serving(create_app(pub, web_settings(insecure=True), clock=lambda: NOW)) as url, \
                serving(create_app(pub, closed, clock=lambda: NOW)) as only_ann:
            yield url, only_ann, pub
    finally:
        pub.close()


def opened(browser: Any, viewport: dict[str, int], *, accept: bool = True) -> Any:
    phone = viewport == PHONE
    context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone,
                                  device_scale_factor=2 if phone else 1)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept() if accept else dialog.dismiss())
    return page


def log_in(page: Any, url: str, email: str = "", password: str = PASSWORD) -> None:
    page.goto(f"{url}/admin/login")
    if email:
        page.fill("#email", email)
    page.fill("#password", password)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{url}/admin/")


def looked_at(page: Any, viewport: dict[str, int], name: str, what: str) -> None:
    page.wait_for_load_state("load")
    assert fits(page) <= viewport["width"], f"{what} scrolls sideways at {name}"
    shot(page, f"words-{what}-{name}")


def test_the_pages_of_item_6_at_1280_and_375_px(browser: Any, site: tuple[str, str, Pub]
                                                ) -> None:
    url, only_ann, pub = site
    alice = Tender(*next((t.id, t.name, t.email) for t in people(pub).values()
                         if t.name == "Alice"))
    asked: list[str] = []  # the question a dialog asked
    for viewport, name in VIEWPORTS:
        page = opened(browser, viewport, accept=False)
        try:
            page.goto(f"{url}/admin/login")  # what any visitor reads
            assert "PUBSCHED_" not in page.content() and "Quick start" not in page.content()
            looked_at(page, viewport, name, "login")
            log_in(page, url)
            page.goto(f"{url}/admin/cutover")
            assert page.locator("#engine-state").inner_text().startswith(
                "This pub runs the current engine")
            assert page.locator("#flip").count() == 0
            looked_at(page, viewport, name, "cutover")
            # before the deadline "Close the form" is plain, and asks first (dismissed here)
            page.goto(f"{url}/admin/weeks/{WEEK}")
            close = page.locator("button[data-edge=close]")
            assert "primary" not in (close.get_attribute("class") or "")
            assert close.evaluate("b => getComputedStyle(b).color") != "rgb(255, 255, 255)"
            asked.clear()
            page.once("dialog", lambda dialog: asked.append(dialog.message))
            close.click()
            page.wait_for_timeout(300)
            assert asked and "before its deadline" in asked[0], asked
            assert week_show(pub, WEEK)["state"] == "COLLECTING"  # dismissed: still open
            page.click("#lifecycle summary")
            assert page.locator("#roster-made").is_visible()
            looked_at(page, viewport, name, "week-open")
            # the tender's own page: her maximum, 3
            page.goto(url + alice.form(pub))
            label = page.locator("label[for=max]").inner_text()
            assert "empty: 3" in label and "no limit" not in label
            assert page.locator("#your-max").inner_text().startswith(
                "Maximum: 3 (the most the pub gives you a week)")
            looked_at(page, viewport, name, "tender-max")
        finally:
            page.context.close()
    # the last operator (no admin password here): no Remove drawn
    for viewport, name in VIEWPORTS:
        page = opened(browser, viewport)
        try:
            log_in(page, only_ann, ANN, ANN_PASSWORD)
            page.goto(f"{only_ann}/admin/operators")
            assert page.locator("button", has_text="Remove").count() == 0
            assert page.locator(".last-operator").is_visible()
            looked_at(page, viewport, name, "operators-last")
        finally:
            page.context.close()
    # revoking: the flash says the feed stops and nobody is mailed
    for viewport, name in VIEWPORTS:
        page = opened(browser, viewport)
        try:
            log_in(page, url)
            page.goto(f"{url}/admin/tenders")
            row = page.locator(f'tr[data-tender="{alice.email}"]')
            row.locator("button", has_text="Revoke links").click()
            page.wait_for_load_state("load")
            said = page.locator(".flash").inner_text()
            assert "calendar feed" in said and "not mailed" in said, said
            looked_at(page, viewport, name, "revoked")
        finally:
            page.context.close()
