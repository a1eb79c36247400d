"""The cutover page's rehearsal wizard in headless Chromium (Playwright, sync) against
uvicorn on loopback, a SQLite database of a legacy install with a week, and the real SMTP
test server: an operator walks the whole rehearsal, step by step, on a desktop and on a
375 px phone, then switches the engine to v2 (#17.7). The browser and the serving are
support.browser's (the session's one Chromium, the conftest's ``browser``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pubsched.engines.flags import v2_enabled
from pubsched.mail.settings import load_mail_settings
from pubsched.pub import Pub
from pubsched.rehearsal import STEPS
from pubsched.web.app import create_app
from pubsched.week.runs import ensure_week
from support.browser import DESKTOP, PHONE, desktop, fits, phone, served, shot
from support.pub_web import PASSWORD, web_settings
from support.pubs import NOW, WEEK, make_pub
from support.smtp_server import SmtpTestServer

OPERATOR = "ops@example.com"
VIEWS = {"desktop": (desktop, DESKTOP), "phone": (phone, PHONE)}


@dataclass
class Site:
    url: str
    pub: Pub
    smtp: SmtpTestServer


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    """A legacy install (flag off) with a week and three tenders, served on loopback."""
    with SmtpTestServer() as smtp:
        mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                           PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                           PUBSCHED_SMTP_TIMEOUT="5"))
        pub = make_pub(f"sqlite:///{tmp_path}/browser.db", mail, web=True, v2=False)
        ensure_week(pub, WEEK)
        try:
            with served(create_app(pub, web_settings(insecure=True), clock=lambda: NOW)) as url:
                yield Site(url, pub, smtp)
        finally:
            pub.close()


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_an_operator_walks_the_rehearsal_to_the_end_then_switches_to_v2(
        browser: Any, site: Site, view: str) -> None:
    opened, viewport = VIEWS[view]
    page = opened(browser)
    try:
        page.goto(f"{site.url}/admin/cutover")
        page.fill("#password", PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_selector("#start-rehearsal")
        assert page.locator("#flip").is_disabled()
        assert "no rehearsal has passed here yet" in page.locator("#flip-why").inner_text()
        shot(page, f"rehearsal-{view}-before")

        page.click("#start-rehearsal")
        page.wait_for_selector("#next-step")
        assert page.locator("ol.steps li").count() == len(STEPS)
        for number, each in enumerate(STEPS, 1):
            label = page.locator("#next-step").inner_text()
            assert label == f"Run next step: {each.words(WEEK)}", label
            page.click("#next-step")
            page.wait_for_selector(f"ol.steps li:nth-child({number}).done")
            if number == 4:
                shot(page, f"rehearsal-{view}-midway")
        assert page.locator("ol.steps li.done").count() == len(STEPS)
        assert "Rehearsal passed: you can now switch to the new engine" in page.locator(
            "#rehearsal-summary").inner_text()
        assert page.locator("#next-step").count() == 0
        assert fits(page) <= viewport["width"]  # nothing scrolls sideways
        shot(page, f"rehearsal-{view}-passed")
        assert {to for m in site.smtp.received for to in m.rcpt_tos} == {OPERATOR}

        assert page.locator("#flip").is_enabled()
        page.click("#flip")  # the confirmation is accepted by the page's dialog handler
        page.wait_for_selector("text=v2 (PUB_SCHEDULER_V2 on)")
        assert v2_enabled(site.pub)
        shot(page, f"rehearsal-{view}-switched")
    finally:
        page.context.close()
