"""Issue 29, items 2, 4 and 20 as a person sees them, in Chromium at 1280 px and 375 px:
the week page's "Open the form" with its deadline prefilled and changed before the press,
the note of the night the clocks go forward, and a pin in the week's history with who made
it. Screenshots go to support.browser's artifacts folder, to be looked at."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pubsched.engines import v2
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week import roster, submissions, template
from pubsched.week import runs as weeks
from pubsched.week.runs import shifts
from pubsched.week.view import week_show
from support.browser import PHONE, fits, shot
from support.browser import served as serving
from support.pub_web import PASSWORD, web_settings
from support.pubs import NOW, WEEK, make_pub

SPRING = "2026-03-02"  # the week of the night the clocks go forward in New York


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Pub]]:
    folder = tmp_path_factory.mktemp("browser_week_record")
    pub = make_pub(f"sqlite:///{folder}/record.db", web=True)
    app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
    try:
        with serving(app) as url:
            yield url, pub
    finally:
        pub.close()


def logged_in(browser: Any, url: str, name: str) -> Any:
    phone = name == "phone"
    context = browser.new_context(viewport=PHONE if phone else {"width": 1280, "height": 900},
                                  is_mobile=phone, device_scale_factor=2 if phone else 1)
    page = context.new_page()
    page.goto(f"{url}/admin/")
    page.fill("#password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{url}/admin/")
    return page


def test_open_with_a_deadline_the_clocks_note_and_the_history(
        browser: Any, served: tuple[str, Pub]) -> None:
    url, pub = served
    assert weeks.create_week(pub, WEEK, now=NOW).applied
    template.add(pub, "Small hours", "sun", "02:30", "03:00", slots=1)
    assert weeks.create_week(pub, SPRING, now=NOW).applied
    for name in ("desktop", "phone"):
        page = logged_in(browser, url, name)
        page.goto(f"{url}/admin/weeks/{SPRING}")
        note = page.locator("#clock-notes")
        assert "02:30 does not exist on Sun 8 Mar 2026" in note.inner_text()
        assert fits(page) <= (PHONE["width"] if name == "phone" else 1280)
        shot(page, f"week-clocks-{name}")
        if name == "desktop":
            page.goto(f"{url}/admin/weeks/{WEEK}")
            field = page.locator("#open-deadline")
            assert field.input_value() == "2026-12-02T20:00"  # the default, prefilled
            field.fill("2026-12-03T21:00")
            shot(page, "week-open-deadline-desktop")
            page.locator("button[data-edge=open]").click()
            page.wait_for_load_state()
            assert "open until Thu 3 Dec, 21:00 EST" in page.locator(".flash").inner_text()
            assert week_show(pub, WEEK)["deadline_at"] == "2026-12-04T02:00:00Z"
            ids = [s.id for s in shifts(pub, WEEK)]
            assert submissions.submit(pub, WEEK, "alice@example.com", ids, now=NOW)
            assert v2.close(pub, WEEK, now=NOW) and v2.generate(pub, WEEK, now=NOW)
        else:
            with pub.acting_as("operator:admin"):
                assert roster.assign(pub, WEEK, ids[2], "bob@example.com", now=NOW)
            page.goto(f"{url}/admin/weeks/{WEEK}")
            history = page.locator("section[aria-labelledby=h-hist]")
            edit = history.locator("tr[data-edit=pin]")
            assert "pinned Bob on Saturday night" in edit.inner_text()
            assert "operator:admin" in edit.inner_text()
            assert fits(page) <= PHONE["width"]
            history.scroll_into_view_if_needed()
            history.screenshot(path=str(shot(page, "week-history-phone").with_name(
                "week-history-section-phone.png")))
        page.context.close()
