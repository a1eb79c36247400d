"""The week page's roster grid at 1280 and 375 px with 12 tenders (issue 29, item 5), in
Chromium, measured rather than eyed:

- before a roster exists, the "Filled" column is inside the grid's scroll box at 1280 px
  with nothing scrolled (it was cut at the box's edge);
- once the roster is made, the "Add a tender" column is too, on every shift's row;
- on a phone the grid scrolls sideways, but each shift's name stays in view beside the
  buttons of its row: scrolled so that a "Take off" button or the row's "Add" is at the
  grid's right edge, the row's name is still inside the box, and both are what a finger
  would touch at their centre (nothing covers them).

Screenshots go to support.browser's artifacts folder, to be looked at.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pubsched.engines import v2
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week import submissions
from pubsched.week.runs import shifts
from support.browser import DESKTOP, PHONE, fits, shot
from support.browser import served as serving
from support.pub_web import PASSWORD, web_settings
from support.pubs import NOW, TENDERS, WEEK, make_pub

# the three of support.pubs and nine more: twelve, with names as long as a real crew's
MORE = ("Dev Patel", "Erin O'Brien", "Finn Ryan", "Grace Kowalczyk", "Hamid Rahimi",
        "Isla MacDonald", "Jonas Lindqvist", "Kemi Adeyemi", "Luca Bianchi")
EMAILS = [email for _, email in TENDERS] + [
    f"{name.split()[0].lower()}@swan.test" for name in MORE]

# an element's box, its scroll box's, and whether the element is what is on top at its
# centre (not under a sticky column, not scrolled out of the box)
BOX = """el => {
  const r = el.getBoundingClientRect(), box = el.closest('.scroll').getBoundingClientRect();
  const top = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
  return {left: r.left, right: r.right, top: r.top, bottom: r.bottom,
          boxLeft: box.left, boxRight: box.right, width: window.innerWidth,
          hit: top === null ? null : top.outerHTML.slice(0, 80),
          onTop: top !== null && (top === el || el.contains(top))};
}"""


def inside(box: dict[str, Any]) -> bool:
    """Whole inside its scroll box and the window, and not covered."""
    return (box["left"] >= box["boxLeft"] - 1 and box["right"] <= box["boxRight"] + 1
            and box["left"] >= -1 and box["right"] <= box["width"] + 1 and box["onTop"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Pub]]:
    folder = tmp_path_factory.mktemp("browser_grid")
    pub = make_pub(f"sqlite:///{folder}/grid.db", web=True)
    for name, email in zip(MORE, EMAILS[3:], strict=True):
        assert tenders.add(pub, name, email, now=NOW)
    assert v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in shifts(pub, WEEK)]
    for email in EMAILS:  # all twelve offer every shift: twelve columns
        assert submissions.submit(pub, WEEK, email, ids, now=NOW)
    app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
    try:
        with serving(app) as url:
            yield url, pub
    finally:
        pub.close()


def week_page(browser: Any, url: str, viewport: dict[str, int]) -> Any:
    phone = viewport == PHONE
    context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone,
                                  device_scale_factor=2 if phone else 1)
    page = context.new_page()
    page.goto(f"{url}/admin/")
    page.fill("#password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{url}/admin/")
    page.goto(f"{url}/admin/weeks/{WEEK}")
    page.wait_for_load_state("load")
    return page


def box(locator: Any) -> dict[str, Any]:
    found: dict[str, Any] = locator.evaluate(BOX)
    return found


def scroll_to(page: Any, target: Any) -> None:
    """Scroll the page to ``target``'s row, and the grid sideways until ``target``'s right
    edge is at the box's right edge (or as far as it goes)."""
    target.evaluate("""el => { const s = el.closest('.scroll');
        el.scrollIntoView({block: 'center', inline: 'nearest'});
        s.scrollLeft += el.getBoundingClientRect().right - s.getBoundingClientRect().right;
    }""")


def names_beside(page: Any, row: Any, control: Any, what: str) -> None:
    """With ``control`` scrolled into the grid's right edge, the row's shift name is in
    view beside it, on the same row."""
    scroll_to(page, control)
    name, button = box(row.locator("th[scope=row]")), box(control)
    assert inside(button), (what, button)
    assert inside(name), (what, "the shift's name scrolled away", name)
    assert name["right"] <= button["left"] + 1, (what, name, button)
    assert name["top"] < button["bottom"] and button["top"] < name["bottom"], (what, name, button)


def test_the_grid_with_twelve_tenders_at_1280_and_375_px(
        browser: Any, served: tuple[str, Pub]) -> None:
    url, pub = served
    grid = "section[aria-labelledby=h-grid]"
    # before a roster exists: Shift, twelve tenders, Filled
    for viewport, name in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page = week_page(browser, url, viewport)
        try:
            assert fits(page) <= viewport["width"], "the page scrolls sideways"
            shot(page, f"grid-collecting-{name}")
            filled = page.locator(f"{grid} table.grid thead th", has_text="Filled")
            rows = page.locator(f"{grid} table.grid tbody tr")
            assert rows.count() == len(shifts(pub, WEEK))
            if name == "desktop":
                assert inside(box(filled)), ("Filled is cut", box(filled))
                for i in range(rows.count()):
                    assert inside(box(rows.nth(i).locator("td.count"))), i
            else:
                for i in range(rows.count()):
                    names_beside(page, rows.nth(i), rows.nth(i).locator("td.count"),
                                 f"row {i}'s count")
                page.locator(grid).screenshot(path=str(
                    shot(page, "grid-collecting-phone").with_name(
                        "grid-collecting-phone-scrolled.png")))
        finally:
            page.context.close()
    assert v2.close(pub, WEEK, now=NOW) and v2.generate(pub, WEEK, now=NOW)
    # the roster made: each cell's "Take off", each row's "Add a tender"
    for viewport, name in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page = week_page(browser, url, viewport)
        try:
            assert fits(page) <= viewport["width"], "the page scrolls sideways"
            shot(page, f"grid-assigned-{name}")
            add = page.locator(f"{grid} table.grid thead th", has_text="Add a tender")
            rows = page.locator(f"{grid} table.grid tbody tr")
            if name == "desktop":
                assert inside(box(add)), ("Add a tender is cut", box(add))
                for i in range(rows.count()):
                    cell = rows.nth(i).locator("td.add")
                    assert inside(box(cell)), (i, box(cell))
                    assert inside(box(rows.nth(i).locator("td.count"))), i
                    assert inside(box(rows.nth(i).locator("th[scope=row]"))), i
            else:
                takes = 0
                for i in range(rows.count()):
                    row = rows.nth(i)
                    buttons = row.locator("button[data-roster=unassign]")
                    for j in range(buttons.count()):
                        names_beside(page, row, buttons.nth(j), f"row {i}, take off {j}")
                        takes += 1
                    adds = row.locator("button[data-roster=assign]")
                    if adds.count():
                        names_beside(page, row, adds.first, f"row {i}, add")
                assert takes >= 2, "the roster put nobody on"
                page.locator(grid).screenshot(path=str(
                    shot(page, "grid-assigned-phone").with_name(
                        "grid-assigned-phone-scrolled.png")))
        finally:
            page.context.close()
