"""Real pages in headless Chromium (Playwright, sync) against the app served by uvicorn on
loopback: what the browser tests share.

Debian's ``chromium`` is used (``executable_path``; Playwright's own browser download is
not reachable here). Without it a browser test is SKIPPED, loudly; with
``PUBSCHED_REQUIRE_BROWSER=1`` (``.ci/run`` sets it) that is a failure instead.
Screenshots go to ``PUBSCHED_ARTIFACTS`` (default ``test-artifacts/``)/screenshots, to be
looked at; the README's pictures (docs/) are copies of some of them.

tests/pubsched/conftest.py makes one ``browser`` per test module (a Chromium start costs
about a second; not per session, see there); each test opens its own context
(:func:`desktop`, :func:`phone`), so cookies never leak between tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

CHROMIUM = os.environ.get("PUBSCHED_CHROMIUM", "/usr/bin/chromium")
REQUIRE = os.environ.get("PUBSCHED_REQUIRE_BROWSER") == "1"
ARTIFACTS = Path(os.environ.get("PUBSCHED_ARTIFACTS", "test-artifacts")) / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 740}

try:
    from playwright import sync_api as playwright_sync
except ImportError:  # pragma: no cover - a dev dependency
    playwright_sync = None  # type: ignore[assignment]


def no_browser(why: str) -> None:
    message = f"BROWSER TESTS NOT RUN: {why} (apt-get install -y chromium)"
    if REQUIRE:
        pytest.fail(f"{message} [failing because PUBSCHED_REQUIRE_BROWSER=1]", pytrace=False)
    pytest.skip(message)


@contextmanager
def launched() -> Iterator[Any]:
    """Chromium, headless, or the test skipped (failed under PUBSCHED_REQUIRE_BROWSER)."""
    if playwright_sync is None:
        no_browser("the playwright package is not installed (pip install -e '.[dev]')")
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        no_browser(f"no Chromium at {CHROMIUM}")
    with playwright_sync.sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        except Exception as exc:  # a broken install is as good as none: say which
            no_browser(f"Chromium at {CHROMIUM} did not start: {exc}")
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port (lifespan on), for as long as the
    block runs: its base URL."""
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
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def desktop(browser: Any) -> Any:
    """A page 1280 px wide in a context of its own (confirm dialogs accepted)."""
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    return page


def phone(browser: Any) -> Any:
    """A page as a 375 px phone shows it (touch, 2x pixels), in a context of its own."""
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True,
                                  device_scale_factor=2)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    return page


def shot(page: Any, name: str) -> Path:
    """A full-page screenshot under the artifacts folder (to be opened and looked at)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def fits(page: Any) -> int:
    """How wide the page is (scrollWidth): at most the viewport's width means nothing
    scrolls sideways but the elements that scroll on their own."""
    width: int = page.evaluate("document.documentElement.scrollWidth")
    return width
