"""Issue #18: the tender's page in Chromium (Playwright) against uvicorn on loopback, at
375 px (a phone) and 1280 px: their next shifts above the open week's form, a shift that
needs a skill they lack shown but not tickable, a tick saved. Screenshots under
``PUBSCHED_ARTIFACTS``/screenshots, looked at."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pubsched.engines import v2
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from pubsched.week import submissions
from support.browser import desktop, fits, phone, served, shot
from support.pub_web import Tender, people, web_settings, write
from support.pubs import NEXT, NOW, WEEK, make_pub


@dataclass
class Site:
    url: str
    pub: Pub
    alice: Tender
    cellar_shift: int


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """WEEK sent (Alice on all three shifts), NEXT open with its Friday needing the cellar
    skill, which Alice lacks."""
    folder: Path = tmp_path_factory.mktemp("tender_page")
    pub = make_pub(f"sqlite:///{folder}/tender.db", web=True)
    team = people(pub)
    assert v2.open_form(pub, WEEK, now=NOW).applied
    week_ids = [s.id for s in weeks.shifts(pub, WEEK)]
    assert submissions.submit(pub, WEEK, team["Alice"].email, week_ids, now=NOW).applied
    for step in (v2.close, v2.generate, v2.approve, v2.send):
        assert step(pub, WEEK, now=NOW).applied, step
    weeks.ensure_week(pub, NEXT, now=NOW)
    assert v2.open_form(pub, NEXT, now=NOW).applied
    friday = weeks.shifts(pub, NEXT)[1].id
    write(pub, "UPDATE pub_shifts SET needs = %s, slots = 1 WHERE id = %s",
              ['["cellar"]', friday])  # its one slot is the cellar's: not Alice's
    app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
    try:
        with served(app) as url:
            yield Site(url, pub, team["Alice"], friday)
    finally:
        pub.close()


@pytest.mark.parametrize("width", [375, 1280])
def test_the_tender_sees_their_next_shifts_then_the_form(site: Site, browser: Any,
                                                         width: int) -> None:
    page = phone(browser) if width == 375 else desktop(browser)
    page.goto(site.url + site.alice.form(site.pub))
    shot(page, f"tender-page-{width}")
    assert fits(page) <= width
    upcoming = page.locator("#upcoming li .when")
    assert upcoming.all_inner_texts() == [
        "Thu 10 Dec, 18:00 - 02:00", "Fri 11 Dec, 18:00 - 02:00",
        "Sat 12 Dec, 18:00 - 02:00"]
    form = page.locator("form fieldset")
    assert upcoming.last.bounding_box()["y"] < form.bounding_box()["y"]
    # Friday needs the cellar: shown, with why, and no box to tick
    not_yours = page.locator(f'[data-shift="{site.cellar_shift}"]')
    assert not_yours.is_visible()
    assert "Not yours to tick: needs cellar" in not_yours.inner_text()
    assert page.locator(f'input[name="shift"][value="{site.cellar_shift}"]').count() == 0
    boxes = page.locator('label.shift')
    assert boxes.count() == 2
    assert all(b["height"] >= 44 for b in (boxes.nth(i).bounding_box()
                                            for i in range(2)))
    page.locator("label.shift input").first.check()  # a tap on the row ticks it
    page.locator("button.primary").click()
    page.wait_for_url("**?saved=1")
    assert page.locator(".flash-ok").inner_text() == "Saved."
    assert page.locator("label.shift input").first.is_checked()
    shot(page, f"tender-page-saved-{width}")
    assert fits(page) <= width
    page.context.close()
