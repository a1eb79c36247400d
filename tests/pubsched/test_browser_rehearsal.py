"""The cutover page's rehearsal wizard in headless Chromium (Playwright, sync) against
uvicorn on loopback, a SQLite database of a legacy install with a week, and the real SMTP
test server: an operator walks the whole rehearsal, step by step, on a desktop and on a
375 px phone, then switches the engine to v2 (#17.7).

Like test_browser.py: Debian's ``chromium`` (``executable_path``); without it the test is
SKIPPED loudly, or fails with ``PUBSCHED_REQUIRE_BROWSER=1``. Screenshots go to
``PUBSCHED_ARTIFACTS`` (default ``test-artifacts/``)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from pubsched.engines.flags import v2_enabled
from pubsched.mail.settings import load_mail_settings
from pubsched.pub import Pub
from pubsched.rehearsal import STEPS
from pubsched.web.app import create_app
from pubsched.weeks import ensure_week
from support.pub_web import NOW, PASSWORD, WEEK, make_pub, web_settings
from support.smtp_server import SmtpTestServer

CHROMIUM = os.environ.get("PUBSCHED_CHROMIUM", "/usr/bin/chromium")
REQUIRE = os.environ.get("PUBSCHED_REQUIRE_BROWSER") == "1"
ARTIFACTS = Path(os.environ.get("PUBSCHED_ARTIFACTS", "test-artifacts")) / "screenshots"
OPERATOR = "ops@example.com"
VIEWS = {"desktop": {"viewport": {"width": 1280, "height": 900}},
         "phone": {"viewport": {"width": 375, "height": 740}, "is_mobile": True,
                   "has_touch": True, "device_scale_factor": 2}}

try:
    from playwright import sync_api as playwright_sync
except ImportError:  # pragma: no cover - a dev dependency
    playwright_sync = None  # type: ignore[assignment]


def _no_browser(why: str) -> None:
    message = f"BROWSER TESTS NOT RUN: {why} (apt-get install -y chromium)"
    if REQUIRE:
        pytest.fail(f"{message} [failing because PUBSCHED_REQUIRE_BROWSER=1]", pytrace=False)
    pytest.skip(message)


@dataclass
class Site:
    url: str
    pub: Pub
    smtp: SmtpTestServer


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if playwright_sync is None:
        _no_browser("the playwright package is not installed (pip install -e '.[dev]')")
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        _no_browser(f"no Chromium at {CHROMIUM}")
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    """A legacy install (flag off) with a week and three tenders, served on loopback."""
    with SmtpTestServer() as smtp:
        mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                           PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                           PUBSCHED_SMTP_TIMEOUT="5"))
        pub = make_pub(f"sqlite:///{tmp_path}/browser.db", mail, v2=False)
        ensure_week(pub, WEEK)
        app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.started, "uvicorn did not start"
        try:
            yield Site(f"http://127.0.0.1:{sock.getsockname()[1]}", pub, smtp)
        finally:
            server.should_exit = True
            thread.join(10)
            sock.close()
            pub.close()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_an_operator_walks_the_rehearsal_to_the_end_then_switches_to_v2(
        browser: Any, site: Site, view: str) -> None:
    context = browser.new_context(**VIEWS[view])
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
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
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= VIEWS[view]["viewport"]["width"], width  # no sideways scrolling
        shot(page, f"rehearsal-{view}-passed")
        assert {to for m in site.smtp.received for to in m.rcpt_tos} == {OPERATOR}

        assert page.locator("#flip").is_enabled()
        page.click("#flip")  # confirmed by the dialog handler
        page.wait_for_selector("text=v2 (PUB_SCHEDULER_V2 on)")
        assert v2_enabled(site.pub)
        shot(page, f"rehearsal-{view}-switched")
    finally:
        context.close()
