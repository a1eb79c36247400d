"""Chromium for the tests that look at what a person sees: the received emails' HTML, the
tender's page. Debian's ``/usr/bin/chromium`` through Playwright (its own browser download is
not reachable here); without it the test fails, naming what is missing, since a check
of how a page looks that silently does not run checks nothing.

Screenshots go to ``PUBSCHED_SHOTS`` (default ``/tmp/shots/mail``) to be opened and looked
at, not only asserted on.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("PUBSCHED_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("PUBSCHED_SHOTS", "/tmp/shots/mail"))
PHONE = {"width": 375, "height": 740}
DESKTOP = {"width": 1280, "height": 900}


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium, closed afterwards."""
    from playwright.sync_api import sync_playwright

    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.fail(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", pytrace=False)
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def new_page(browser: Any, viewport: dict[str, int]) -> Any:
    """A page in a context of its own: a phone (touch, 2x pixels) at 375 px wide."""
    phone = viewport["width"] < 600
    context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone,
                                  device_scale_factor=2 if phone else 1)
    return context.new_page()


def shot(page: Any, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def overflow_x(page: Any) -> int:
    """How many CSS pixels the page is wider than its viewport (0: no sideways scroll)."""
    return int(page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"))
