"""Issue 19 in Chromium (Playwright) against uvicorn on loopback, at 375 px (a phone) and
1280 px: a tender marks time off on their page (the form then shows those nights as away,
not tickable), answers the week with "save this as my usual", and the next week's form
starts from it, said so; the operator's edit page of the tender lists the time off.
Screenshots under ``PUBSCHED_ARTIFACTS``/screenshots, looked at."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pubsched.engines import v2
from pubsched.people import usual
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from support.browser import desktop, fits, phone, served, shot
from support.pub_web import PASSWORD, Tender, people, web_settings
from support.pubs import NEXT, NOW, WEEK, make_pub


@dataclass
class Site:
    url: str
    pub: Pub
    alice: Tender


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    """WEEK's form open (Thu 10, Fri 11, Sat 12 Dec), nobody has answered."""
    pub = make_pub(f"sqlite:///{tmp_path}/away.db", web=True)
    assert v2.open_form(pub, WEEK, now=NOW).applied
    app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
    try:
        with served(app) as url:
            yield Site(url, pub, people(pub)["Alice"])
    finally:
        pub.close()


@pytest.mark.parametrize("width", [375, 1280])
def test_time_off_and_my_usual_on_the_tenders_page(site: Site, browser: Any,
                                                   width: int) -> None:
    page = phone(browser) if width == 375 else desktop(browser)
    page.goto(site.url + site.alice.form(site.pub))
    assert page.locator("#time-off-none").inner_text() == "No time off to come."
    page.fill("#away-from", "2026-12-11")
    page.fill("#away-to", "2026-12-12")
    page.get_by_role("button", name="Mark time off").click()
    page.wait_for_url("**saved=away**")
    assert "Your time off is saved." in page.locator(".flash-ok").inner_text()
    assert page.locator("#time-off-list li").all_inner_texts()[0].startswith(
        "Fri 11 Dec - Sat 12 Dec 2026")
    thu, fri, sat = (s.id for s in weeks.shifts(site.pub, WEEK))
    for shift in (fri, sat):
        cell = page.locator(f'[data-shift="{shift}"]')
        assert "Away: your time off Fri 11 Dec - Sat 12 Dec 2026" in cell.inner_text()
        assert page.locator(f'input[name="shift"][value="{shift}"]').count() == 0
    shot(page, f"away-form-{width}")
    assert fits(page) <= width

    page.locator(f'input[name="shift"][value="{thu}"]').check()
    page.fill("#max", "2")
    page.locator("#save-usual").check()
    page.get_by_role("button", name="Send my availability").click()
    page.wait_for_url("**saved=1**")
    theirs = usual.of(site.pub, site.alice.id)
    assert theirs is not None and theirs.as_json()["shifts"] == ["Thu 18:00"]

    # the operator closes the week and opens the next: her form starts from her usual
    assert v2.close(site.pub, WEEK, now=NOW).applied
    weeks.ensure_week(site.pub, NEXT, now=NOW)
    assert v2.open_form(site.pub, NEXT, now=NOW).applied
    nthu, nfri, _ = (s.id for s in weeks.shifts(site.pub, NEXT))
    page.goto(site.url + site.alice.form(site.pub))
    assert page.locator("#from-usual").inner_text() == (
        "Filled in from your usual — change anything, then send it.")
    assert page.locator(f'input[name="shift"][value="{nthu}"]').is_checked()
    assert not page.locator(f'input[name="shift"][value="{nfri}"]').is_checked()
    assert page.locator("#max").input_value() == "2"
    shot(page, f"away-next-week-from-usual-{width}")
    assert fits(page) <= width

    # cancel the time off from the phone
    page.goto(site.url + site.alice.form(site.pub))
    page.locator("#time-off-list button", has_text="Cancel").click()
    page.wait_for_url("**saved=back**")
    assert page.locator("#time-off-none").is_visible()


@pytest.mark.parametrize("width", [375, 1280])
def test_the_operator_sees_and_adds_time_off_on_the_tenders_edit_page(
        site: Site, browser: Any, width: int) -> None:
    page = phone(browser) if width == 375 else desktop(browser)
    page.goto(site.url + "/admin/login")
    page.fill('input[name="email"]', "admin")
    page.fill('input[name="password"]', PASSWORD)
    page.locator('form button[type="submit"]').first.click()
    page.goto(site.url + f"/admin/tenders/{site.alice.id}")
    page.fill("#away-from", "2026-12-24")
    page.fill("#away-to", "2026-12-27")
    page.get_by_role("button", name="Mark time off").click()
    page.wait_for_load_state()
    assert "Alice is away Thu 24 Dec - Sun 27 Dec 2026" in page.locator(".flash").inner_text()
    assert page.locator("#time-off-list li").count() == 1
    shot(page, f"away-admin-{width}")
    assert fits(page) <= width


@pytest.mark.parametrize("width", [375, 1280])
def test_the_week_page_marks_an_away_tender_and_an_answer_from_a_usual(
        site: Site, browser: Any, width: int) -> None:
    """Alice's usual answered for her at the close; the roster made, then her time off on
    Thursday: the page says so first, marks her away on the grid, and her answer "usual"."""
    from pubsched.people import away
    from pubsched.week import submissions

    pub, alice = site.pub, site.alice
    thu = weeks.shifts(pub, WEEK)[0].id
    with pub.atomic() as tx:
        usual.write(tx, alice.id, {usual.identity(s.starts_at, pub.config.tz)
                                   for s in weeks.shifts(pub, WEEK)}, None, NOW)
    assert submissions.submit(pub, WEEK, people(pub)["Bob"].email, [thu], now=NOW)
    for step in (v2.close, v2.generate):
        assert step(pub, WEEK, now=NOW).applied, step
    assert away.add(pub, alice.email, "2026-12-10", "2026-12-10", now=NOW).detail["warnings"]
    page = phone(browser) if width == 375 else desktop(browser)
    page.goto(site.url + "/admin/login")
    page.fill('input[name="email"]', "admin")
    page.fill('input[name="password"]', PASSWORD)
    page.locator('form button[type="submit"]').first.click()
    page.goto(site.url + f"/admin/weeks/{WEEK}")
    assert "Alice is on the roster for a night of their time off" in page.locator(
        ".now").inner_text()
    assert page.locator(".usual-note").inner_text() == "usual"
    if width == 375:
        assert "(away)" in page.locator(".roster-list").inner_text()
    else:
        assert page.locator(f'td[data-shift="{thu}"][data-email="{alice.email}"] .away'
                            ).is_visible()
    shot(page, f"away-week-page-{width}")
    assert fits(page) <= width
