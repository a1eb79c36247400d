"""Issue #18: the tender's own page, driven in-process on SQLite (PostgreSQL where marked):
their next shifts (sent weeks only, until each ends) above the open week's form; a shift
that needs a skill they lack shown but not tickable, a shift already started not offered;
and the server (the web's POST, the CLI's ``avail``) refusing a tick of either with nothing
written."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from icalendar import Calendar
from starlette.testclient import TestClient

from pubsched import cli
from pubsched.engines import v2
from pubsched.people.tenders import by_id
from pubsched.pub import Pub
from pubsched.verdicts import BadInput
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from pubsched.week import submissions
from pubsched.week.view import tender_calendar, tender_form
from support.pub_web import people, web_settings, write
from support.pubs import NEXT, NOW, WEEK

pytestmark = pytest.mark.pub_setup("web")


class Clock:
    def __init__(self) -> None:
        self.at = NOW

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(pub: Pub, clock: Clock) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=clock)
    with TestClient(app, base_url="https://testserver") as c:
        yield c


def ids(pub: Pub, week: str = WEEK) -> list[int]:
    return [s.id for s in weeks.shifts(pub, week)]


def upcoming(page: str) -> list[str]:
    found = re.search(r'<ul class="shifts" id="upcoming">(.*?)</ul>', page, re.S)
    if found is None:
        return []
    return [re.sub(r"<[^>]+>", "", li).strip()  # each shift's words (not its cover form)
            for li in re.findall(r'<li><span class="when">(.*?)</span>', found.group(1),
                                 re.S)]


def tickable(page: str) -> set[int]:
    return {int(v) for v in re.findall(r'name="shift" value="(\d+)"', page)}


def availability(pub: Pub) -> list[Any]:
    """Every submitted row, to compare before and after a refused submission."""
    return [pub.query("SELECT * FROM pub_availability ORDER BY week_of, tender_id"),
            pub.query("SELECT * FROM pub_availability_shifts "
                      "ORDER BY week_of, tender_id, shift_id")]


def send_week(pub: Pub) -> None:
    """WEEK rostered and sent: Alice offers every shift, Bob only Thursday."""
    team = people(pub)
    assert v2.open_form(pub, WEEK, now=NOW).applied
    assert submissions.submit(pub, WEEK, team["Alice"].email, ids(pub), now=NOW).applied
    assert submissions.submit(pub, WEEK, team["Bob"].email, ids(pub)[:1], now=NOW).applied
    for step in (v2.close, v2.generate, v2.approve):
        assert step(pub, WEEK, now=NOW).applied, step


@pytest.mark.both_databases("the tender page's reads")
def test_the_page_shows_the_tenders_next_shifts_from_sent_weeks_above_the_form(
        client: TestClient, pub: Pub, clock: Clock) -> None:
    team = people(pub)
    alice, carol = team["Alice"], team["Carol"]
    send_week(pub)
    assert upcoming(client.get(alice.form(pub)).text) == []  # approved: may still move
    assert v2.send(pub, WEEK, now=NOW).applied
    weeks.ensure_week(pub, NEXT, now=NOW)
    assert v2.open_form(pub, NEXT, now=NOW).applied
    page = client.get(alice.form(pub)).text
    assert upcoming(page) == ["Thu 10 Dec, 18:00 - 02:00", "Fri 11 Dec, 18:00 - 02:00",
                              "Sat 12 Dec, 18:00 - 02:00"]
    assert "Times are New York time (EST)." in page
    assert page.index("Your next shifts") < page.index("week of Mon 14 Dec 2026")  # NEXT
    assert tickable(page) == set(ids(pub, NEXT))  # the open week's form, below
    assert "No shifts on the roster for you yet." in client.get(carol.form(pub)).text
    # a shift stays until it ends ("on now" while it is worked), then it is gone
    friday = weeks.shifts(pub, WEEK)[1]
    clock.at = friday.starts_at + timedelta(hours=1)
    assert upcoming(client.get(alice.form(pub)).text) == [
        "Fri 11 Dec, 18:00 - 02:00 · on now", "Sat 12 Dec, 18:00 - 02:00"]
    tender = by_id(pub, alice.id)
    assert tender is not None
    later = tender_form(pub, tender, friday.ends_at)
    assert [u["text"] for u in later["upcoming"]] == ["Sat 12 Dec, 18:00 - 02:00"]
    # the feed names the pub and, when it is set, where it is
    pub.config = replace(pub.config, mail=replace(pub.config.mail, pub_name="The Crown",
                                                  pub_address="1 High Street, Hadley"))
    events = Calendar.from_ical(tender_calendar(pub, tender)).walk("VEVENT")
    assert len(events) == 3
    assert {(str(e["SUMMARY"]), str(e["LOCATION"])) for e in events} == {
        ("Shift at The Crown", "1 High Street, Hadley")}


def test_a_shift_needing_a_skill_the_tender_lacks_is_shown_but_not_tickable(
        client: TestClient, pub: Pub) -> None:
    team = people(pub)
    alice, bob = team["Alice"], team["Bob"]
    assert v2.open_form(pub, WEEK, now=NOW).applied
    thu, fri, sat = ids(pub)
    write(pub, "UPDATE pub_shifts SET needs = %s WHERE id = %s",
              ['["cellar", "till"]', fri])
    write(pub, "UPDATE pub_tenders SET skills = %s WHERE id = %s",
              ['[" Cellar", "TILL"]', bob.id])  # compared without case or spaces
    assert submissions.submit(pub, WEEK, alice.email, [thu], now=NOW).applied
    page = client.get(alice.form(pub)).text
    assert tickable(page) == {thu, sat}
    assert f'data-shift="{fri}"' in page
    assert "Fri 11 Dec, 18:00 - 02:00 <span class=\"why\">Not yours to tick: needs cellar " \
           "and till</span>" in page
    assert tickable(client.get(bob.form(pub)).text) == {thu, fri, sat}
    before = availability(pub)
    refused = client.post(alice.form(pub), data={"week": WEEK, "shift": [str(thu), str(fri)]})
    assert refused.status_code == 400
    assert "Fri 11 Dec, 18:00 - 02:00 (needs cellar and till)" in refused.text
    assert "Nothing was saved" in refused.text
    assert availability(pub) == before
    with pytest.raises(BadInput, match="needs cellar and till"):
        submissions.submit(pub, WEEK, alice.email, [fri], now=NOW)
    assert availability(pub) == before
    saved = client.post(bob.form(pub), data={"week": WEEK, "shift": [str(fri)]},
                        follow_redirects=False)
    assert saved.status_code == 303


def test_a_started_shift_is_not_offered_and_a_tick_of_it_is_refused(
        client: TestClient, pub: Pub, clock: Clock, db_url: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    alice = people(pub)["Alice"]
    assert v2.open_form(pub, WEEK, now=NOW).applied
    thu, fri, sat = ids(pub)
    assert submissions.submit(pub, WEEK, alice.email, [thu, fri], now=NOW).applied
    started = weeks.shifts(pub, WEEK)[0].starts_at
    clock.at = started + timedelta(minutes=1)  # the form is still open: nobody closed it
    page = client.get(alice.form(pub)).text
    assert tickable(page) == {fri, sat}
    assert "1 shift has already started and is no longer offered." in page
    mine = page[page.index("What you submitted"):]
    assert "Thu 10 Dec, 18:00 - 02:00" in mine  # what they said about it still shows
    before = availability(pub)
    refused = client.post(alice.form(pub), data={"week": WEEK, "shift": [str(thu)]})
    assert refused.status_code == 400 and "already started" in refused.text
    assert availability(pub) == before
    # the CLI's avail: exit 2, the reason on stderr, nothing written
    for name in list(os.environ):
        if name.startswith("PUBSCHED_"):
            monkeypatch.delenv(name)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        cli.main(["--db", db_url, "avail", WEEK, alice.email, str(thu),
                  "--now", clock.at.isoformat()])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Thu 10 Dec, 18:00 - 02:00 (already started)" in err and "Traceback" not in err
    assert availability(pub) == before
    # a new answer about the shifts still to come keeps the one about the started shift
    saved = client.post(alice.form(pub), data={"week": WEEK, "shift": [str(sat)]},
                        follow_redirects=False)
    assert saved.status_code == 303
    rows = pub.query("SELECT shift_id FROM pub_availability_shifts WHERE tender_id = %s "
                     "ORDER BY shift_id", [alice.id])
    assert [int(r["shift_id"]) for r in rows] == [thu, sat]


def test_a_shift_with_a_slot_no_need_reserves_is_anyones_to_tick(
        client: TestClient, pub: Pub) -> None:
    """Two slots, one needing a key-holder: the other is anyone's (the picker's rule), so
    a tender without keys may tick it; with one slot, that slot is the keys' alone."""
    alice = people(pub)["Alice"]
    assert v2.open_form(pub, WEEK, now=NOW).applied
    thu, fri, sat = ids(pub)
    write(pub, "UPDATE pub_shifts SET needs = %s WHERE id = %s",
              ['["keys"]', thu])  # 2 slots: one for a key-holder, one for anyone
    write(pub, "UPDATE pub_shifts SET needs = %s, slots = 1 WHERE id = %s",
              ['["keys"]', sat])  # 1 slot: the key-holder's
    assert tickable(client.get(alice.form(pub)).text) == {thu, fri}
    assert submissions.submit(pub, WEEK, alice.email, [thu, fri], now=NOW).applied
    with pytest.raises(BadInput, match=r"Sat 12 Dec, 18:00 - 02:00 \(needs keys\)"):
        submissions.submit(pub, WEEK, alice.email, [sat], now=NOW)
