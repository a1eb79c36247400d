"""Operator accounts in headless Chromium (Playwright, sync) against uvicorn on loopback and
a SQLite database: the login by email, the operators page (add with the password twice,
remove), who moved the week in its history, at 1280 px and on a 375 px phone.

Screenshots go to ``PUBSCHED_ARTIFACTS`` (default ``test-artifacts/``)/screenshots, named
``operators-*``. Without Chromium these tests are skipped loudly, as test_browser.py's
(``PUBSCHED_REQUIRE_BROWSER=1`` makes that a failure)."""

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

from pubsched import operators
from pubsched.pub import Pub
from pubsched.view import week_show
from pubsched.web.app import create_app
from support.pub_web import FAST_HASH, NOW, PASSWORD, WEEK, make_pub, web_settings

CHROMIUM = os.environ.get("PUBSCHED_CHROMIUM", "/usr/bin/chromium")
REQUIRE = os.environ.get("PUBSCHED_REQUIRE_BROWSER") == "1"
ARTIFACTS = Path(os.environ.get("PUBSCHED_ARTIFACTS", "test-artifacts")) / "screenshots"
PHONE = {"width": 375, "height": 740}
ANN, GOOD = "ann@pub.example", "correct horse battery"

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

    def shot(self, page: Any, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"operators-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if playwright_sync is None:
        _no_browser("the playwright package is not installed (pip install -e '.[dev]')")
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        _no_browser(f"no Chromium at {CHROMIUM}")
    with playwright_sync.sync_playwright() as p:
        try:
            launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        except Exception as exc:  # a broken install is as good as none: say which
            _no_browser(f"Chromium at {CHROMIUM} did not start: {exc}")
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    pub = make_pub(f"sqlite:///{tmp_path}/browser.db")
    app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield Site(f"http://127.0.0.1:{port}", pub)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        pub.close()


def new_page(browser: Any, phone: bool) -> Any:
    if phone:
        context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True,
                                      device_scale_factor=2)
    else:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    return page


def log_in(page: Any, site: Site, email: str, password: str) -> None:
    page.goto(f"{site.url}/admin/")
    assert "/admin/login" in page.url
    page.fill("#email", email)
    page.fill("#password", password)
    page.keyboard.press("Enter")


def fits(page: Any) -> bool:
    """Nothing on the page is wider than the viewport (no sideways scrolling)."""
    return bool(page.evaluate(
        "document.documentElement.scrollWidth <= window.innerWidth + 1"))


@pytest.mark.parametrize("phone", [False, True], ids=["desktop", "phone"])
def test_login_by_email_the_operators_page_and_who_moved_the_week(
        browser: Any, site: Site, phone: bool) -> None:
    size = "phone" if phone else "desktop"
    assert operators.add(site.pub, ANN, GOOD, hasher=FAST_HASH, now=NOW)
    page = new_page(browser, phone)
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
        assert fits(page), "the operators page scrolls sideways"
        site.shot(page, f"page-{size}")
        page.click('button[aria-label="Remove bob@pub.example"]')
        page.wait_for_selector(".flash-ok")
        assert "removed operator bob@pub.example" in page.inner_text(".flash-ok")
        assert [o.email for o in operators.all_operators(site.pub)] == [ANN]

        # a move made here names the operator in the week's history
        page.goto(f"{site.url}/admin/")
        page.fill("input[name=week]", WEEK)
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
        assert page.locator("#email").is_visible() and fits(page)
        site.shot(page, "login-phone")
        log_in(page, site, "admin", PASSWORD)
        page.wait_for_url(f"{site.url}/admin/")
        assert page.locator("header.top").get_by_text("admin", exact=True).is_visible()
        page.goto(f"{site.url}/admin/operators")
        assert page.get_by_text("No operator accounts yet").is_visible() and fits(page)
        site.shot(page, "empty-phone")
    finally:
        page.context.close()
