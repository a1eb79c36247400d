"""Issue 19 on the web, in-process on SQLite (PostgreSQL where marked): the tender's page
lists their time off with add and cancel, shows the open week's shifts on those nights as
away (and the server refuses a tick of one), refuses time off over a shift of a sent
schedule in the tender's words; "save this as my usual", the next week's form starting from
it, "we used your usual" after a close; the operator's edit page of a tender with the same
time off forms, and the week page flagging an away tender on the roster and an answer from a
usual."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime

import pytest
from starlette.testclient import TestClient

from pubsched.engines import v2
from pubsched.people import away, usual
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from pubsched.week import submissions
from support.pub_web import login, people, web_settings
from support.pubs import NEXT, NOW, WEEK

pytestmark = pytest.mark.pub_setup("web")


class Clock:
    def __init__(self) -> None:
        self.at = NOW

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def client(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=Clock())
    with TestClient(app, base_url="https://testserver") as c:
        yield c


def ids(pub: Pub, week: str = WEEK) -> list[int]:
    return [s.id for s in weeks.shifts(pub, week)]


def tickable(page: str) -> set[int]:
    return {int(v) for v in re.findall(r'name="shift" value="(\d+)"', page)}


def ticked(page: str) -> set[int]:
    return {int(v) for v in re.findall(r'name="shift" value="(\d+)" checked', page)}


def text(page: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


def rows(pub: Pub) -> list[object]:
    return [pub.query(f"SELECT * FROM {t} ORDER BY 1, 2") for t in (
        "pub_time_off", "pub_availability", "pub_availability_shifts", "pub_usual",
        "pub_usual_shifts")]


def test_a_tender_marks_and_cancels_time_off_and_the_form_shows_it(
        client: TestClient, pub: Pub) -> None:
    alice = people(pub)["Alice"]
    assert v2.open_form(pub, WEEK, now=NOW).applied
    page = client.get(alice.form(pub)).text
    assert "No time off to come." in page
    done = client.post(alice.form(pub) + "/away", data={"from": "2026-12-11",
                                                         "to": "2026-12-12"},
                       follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].endswith(
        "?saved=away#time-off")
    page = client.get(done.headers["location"]).text
    assert "Your time off is saved." in page
    assert "Fri 11 Dec - Sat 12 Dec 2026" in text(page)
    thu, fri, sat = ids(pub)
    assert tickable(page) == {thu}
    assert text(page).count("Away: your time off Fri 11 Dec - Sat 12 Dec 2026") == 2
    # a hand-made tick of an away night is refused, nothing saved
    before = rows(pub)
    refused = client.post(alice.form(pub), data={"week": WEEK, "shift": [str(thu), str(fri)]})
    assert refused.status_code == 400
    assert "away: your time off Fri 11 Dec - Sat 12 Dec 2026" in text(refused.text)
    assert rows(pub) == before
    # overlapping, bad input: said, nothing saved
    again = client.post(alice.form(pub) + "/away", data={"from": "2026-12-12",
                                                          "to": "2026-12-13"})
    assert again.status_code == 409 and "overlaps time off you already have" in again.text
    bad = client.post(alice.form(pub) + "/away", data={"from": "2026-12-12", "to": ""})
    assert bad.status_code == 400 and "give the last day away" in bad.text
    backwards = client.post(alice.form(pub) + "/away", data={"from": "2026-12-20",
                                                              "to": "2026-12-19"})
    assert backwards.status_code == 400 and "is backwards" in backwards.text
    assert rows(pub) == before
    cancelled = client.post(alice.form(pub) + "/back", data={"from": "2026-12-11"})
    assert "Your time off is cancelled." in cancelled.text
    assert tickable(cancelled.text) == {thu, fri, sat}
    assert away.upcoming(pub, alice.id, NOW) == []


def test_time_off_over_a_sent_shift_is_refused_in_the_tenders_words(
        client: TestClient, pub: Pub) -> None:
    alice = people(pub)["Alice"]
    assert v2.open_form(pub, WEEK, now=NOW).applied
    assert submissions.submit(pub, WEEK, alice.email, ids(pub)[:1], now=NOW)
    for step in (v2.close, v2.generate, v2.approve, v2.send):
        assert step(pub, WEEK, now=NOW).applied, step
    before = rows(pub)
    refused = client.post(alice.form(pub) + "/away", data={"from": "2026-12-10",
                                                            "to": "2026-12-10"})
    assert refused.status_code == 409
    assert ("You are on the schedule already sent for Thu 10 Dec, 18:00 - 02:00. Ask for "
            "cover for that shift first, then mark your time off. Nothing was saved."
            ) in text(refused.text)
    assert rows(pub) == before


def test_save_as_my_usual_then_the_next_form_starts_from_it(
        client: TestClient, pub: Pub) -> None:
    alice, bob = people(pub)["Alice"], people(pub)["Bob"]
    assert v2.open_form(pub, WEEK, now=NOW).applied
    page = client.get(alice.form(pub)).text
    assert 'name="save_usual"' in page and "Save this as my usual" in page
    assert "Filled in from your usual" not in page
    thu, fri, _ = ids(pub)
    saved = client.post(alice.form(pub), data={"week": WEEK, "shift": [str(thu), str(fri)],
                                               "max": "1", "save_usual": "1"})
    assert saved.status_code == 200 and "Saved." in saved.text
    theirs = usual.of(pub, alice.id)
    assert theirs is not None and theirs.as_json()["shifts"] == ["Thu 18:00", "Fri 18:00"]
    assert theirs.max_shifts == 1
    client.post(bob.form(pub), data={"week": WEEK, "shift": [str(thu)]})
    assert usual.of(pub, bob.id) is None  # not ticked: not saved
    assert v2.close(pub, WEEK, now=NOW).applied

    weeks.ensure_week(pub, NEXT, now=NOW)
    assert v2.open_form(pub, NEXT, now=NOW).applied
    nthu, nfri, _ = ids(pub, NEXT)
    page = client.get(alice.form(pub)).text
    assert "Filled in from your usual — change anything, then send it." in page
    assert ticked(page) == {nthu, nfri}
    assert 'id="max" name="max" type="number" min="0" max="14" inputmode="numeric" ' \
           'value="1"' in page
    assert "Filled in from your usual" not in client.get(bob.form(pub)).text
    # she never sends it: the close answers for her from the usual, and her page says so
    assert v2.close(pub, NEXT, now=NOW).applied
    page = client.get(alice.form(pub)).text
    assert "We used your usual: you had not answered before the form closed." in page
    # reopened: the form shows that answer, and sending it makes it hers
    assert v2.reopen(pub, NEXT, now=NOW).applied
    page = client.get(alice.form(pub)).text
    assert "We used your usual for this week, as you had not answered." in page
    assert ticked(page) == {nthu, nfri} and "Filled in from your usual" not in page
    client.post(alice.form(pub), data={"week": NEXT, "shift": [str(nthu)]})
    page = client.get(alice.form(pub)).text
    assert "We used your usual" not in page and ticked(page) == {nthu}


def test_the_operator_marks_a_tenders_time_off_on_their_edit_page(
        client: TestClient, pub: Pub) -> None:
    bob = people(pub)["Bob"]
    assert login(client).status_code == 303
    edit = f"/admin/tenders/{bob.id}"
    assert "No time off to come." in client.get(edit).text
    done = client.post(edit + "/away", data={"from": "2026-12-24", "to": "2026-12-26"})
    assert done.status_code == 200 and "Bob is away Thu 24 Dec - Sat 26 Dec 2026" in done.text
    assert "Thu 24 Dec - Sat 26 Dec 2026" in text(client.get(edit).text)
    overlap = client.post(edit + "/away", data={"from": "2026-12-26", "to": "2026-12-27"})
    assert "Bob already has time off Thu 24 Dec - Sat 26 Dec 2026" in text(overlap.text)
    bad = client.post(edit + "/away", data={"from": "soon", "to": "2026-12-27"})
    assert "the first day is a date YYYY-MM-DD, got &#39;soon&#39;" in text(bad.text)
    back = client.post(edit + "/back", data={"from": "2026-12-24"})
    assert "Bob is back" in back.text and "No time off to come." in back.text
    missing = client.post(edit + "/back", data={"from": "2026-12-24"})
    assert "Bob has no time off starting on 2026-12-24; they have none" in text(missing.text)


def test_the_week_page_flags_an_away_tender_and_an_answer_from_a_usual(
        client: TestClient, pub: Pub) -> None:
    team = people(pub)
    alice, bob = team["Alice"], team["Bob"]
    assert v2.open_form(pub, WEEK, now=NOW).applied
    thu, fri, sat = ids(pub)
    assert submissions.submit(pub, WEEK, alice.email, [thu, fri, sat], now=NOW,
                              save_usual=True)
    for step in (v2.close, v2.generate):
        assert step(pub, WEEK, now=NOW).applied, step
    warned = client.post(alice.form(pub) + "/away", data={"from": "2026-12-10",
                                                           "to": "2026-12-10"})
    assert ("Your time off is saved. You were on the roster being planned for one of those "
            "nights: the operator will see it and plan it again without you.") in warned.text
    assert login(client).status_code == 303
    page = client.get(f"/admin/weeks/{WEEK}").text
    assert 'class="warn away">away<' in page  # her Thursday cell
    said = text(page)
    assert ("Alice is on the roster for a night of their time off (marked away below). "
            "Next: Regenerate it so someone else is picked") in said
    assert v2.generate(pub, WEEK, now=NOW).applied  # regenerate: she is not on Thursday
    page = client.get(f"/admin/weeks/{WEEK}").text
    assert 'class="warn away"' not in page and "night of their time off" not in page
    assert f'<td class="avail away" data-away="{alice.email}">away</td>' in page  # her tick
    assert v2.reopen(pub, WEEK, now=NOW).applied
    assert v2.close(pub, WEEK, now=NOW).applied  # Bob never answered: he has no usual
    assert bob.email not in {s["email"] for s in submissions.of_week(pub, WEEK)}
    weeks.ensure_week(pub, NEXT, now=NOW)
    assert v2.open_form(pub, NEXT, now=NOW).applied
    assert v2.close(pub, NEXT, now=NOW).applied
    page = client.get(f"/admin/weeks/{NEXT}").text
    assert ('<span class="usual-note">usual</span> <span class="meta">(no answer: their '
            'usual was used)</span>') in page


def test_a_sent_week_with_an_away_tender_on_it_says_to_ask_for_cover(
        client: TestClient, pub: Pub) -> None:
    """Time off marked while the roster was approved (warned), then sent all the same."""
    alice = people(pub)["Alice"]
    assert v2.open_form(pub, WEEK, now=NOW).applied
    assert submissions.submit(pub, WEEK, alice.email, ids(pub)[:1], now=NOW)
    for step in (v2.close, v2.generate, v2.approve):
        assert step(pub, WEEK, now=NOW).applied, step
    assert away.add(pub, alice.email, "2026-12-10", "2026-12-10", now=NOW).detail["warnings"]
    assert v2.send(pub, WEEK, now=NOW).applied
    assert login(client).status_code == 303
    said = text(client.get(f"/admin/weeks/{WEEK}").text)
    assert "Alice is on the roster for a night of their time off" in said
    assert "Ask for cover for those shifts" in said
