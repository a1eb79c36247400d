"""Cover requests on the web (issue 19), in-process on SQLite (PostgreSQL where marked),
with real mail (aiosmtpd on loopback): the tender's page (ask, cancel, the shifts they could
take), the offer link ``/c/{token}`` (a GET never takes; the first POST wins; every other
answer in words), the admin's covers page (every request, the emails, cancel) and a sent
week's roster as it is now.

The week (support.cover_web): sent, Alice on Thursday, Bob on Friday, Carol on Saturday;
Alice's request for Thursday is offered to Bob and Carol."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from pubsched import covers
from pubsched.covers import view as cover_view
from pubsched.deliveries import outbox as notices
from pubsched.engines import flags
from pubsched.people import links, tenders
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.web.logs import loggable_path
from pubsched.week.runs import Shift
from pubsched.week.view import week_show
from support.browser import served
from support.cover_web import OPERATOR, after_start, cover_pub, offers_to, path_of, sent_week, team
from support.pub_cli import snapshot
from support.pub_web import login, web_settings
from support.pubs import NOW, WEEK
from support.smtp_server import SmtpTestServer


def read(reply: Any) -> str:
    """A page's text as a person reads it (entities such as ``&#39;`` resolved)."""
    return html.unescape(reply.text)


class Clock:
    """The app's clock, moved by a test."""

    def __init__(self) -> None:
        self.at = NOW

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def pub(db_url: str, smtp: SmtpTestServer) -> Iterator[Pub]:
    made = cover_pub(db_url, smtp)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def week(pub: Pub) -> list[Shift]:
    return sent_week(pub)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(pub: Pub, clock: Clock) -> Iterator[TestClient]:
    with TestClient(create_app(pub, web_settings(), clock=clock),
                    base_url="https://testserver") as c:
        yield c


@pytest.fixture
def operator(pub: Pub, clock: Clock) -> Iterator[TestClient]:
    with TestClient(create_app(pub, web_settings(), clock=clock),
                    base_url="https://testserver") as c:
        assert login(c).status_code == 303
        yield c


def ask(client: TestClient, pub: Pub, name: str, shift: Shift, note: str = "") -> str:
    """``name`` asks for cover on ``shift`` from their page; the answer's text."""
    page = read(client.get(team(pub)[name].form(pub)))
    assert f'name="shift_id" value="{shift.id}"' in page, "no ask form for the shift"
    reply = client.post(team(pub)[name].form(pub) + "/covers/ask",
                        data={"week": WEEK, "shift_id": str(shift.id), "note": note})
    assert reply.status_code == 200, read(reply)
    return read(reply)


def only_cover(pub: Pub) -> covers.Cover:
    listed = covers.listed(pub, WEEK)
    assert len(listed) == 1, listed
    return listed[0]


def roster(pub: Pub) -> dict[int, list[str]]:
    return {s["id"]: s["assigned"] for s in week_show(pub, WEEK)["shifts"]}


# -- the tender's page --------------------------------------------------------------------


def test_a_tender_asks_for_cover_from_their_page_and_the_offers_go(
        client: TestClient, pub: Pub, week: list[Shift], smtp: SmtpTestServer) -> None:
    thursday = week[0]
    people = team(pub)
    page = read(client.get(people["Alice"].form(pub)))
    assert page.count("Can't make it? Ask for cover") == 1  # her one shift
    answer = ask(client, pub, "Alice", thursday, note="I'm ill")
    assert "You asked for cover" in answer and "You are still on this shift" in answer
    assert "The 2 tenders who could work it are being emailed now" in answer
    cover = only_cover(pub)
    assert (cover.state, cover.asked_by, cover.note) == ("OPEN", people["Alice"].id, "I'm ill")
    # the offers went (after the answer): Bob and Carol each got one link; the operator told
    assert len(offers_to(smtp, people["Bob"].email)) == 1
    assert len(offers_to(smtp, people["Carol"].email)) == 1
    assert offers_to(smtp, people["Alice"].email) == []
    assert any(OPERATOR in m.rcpt_tos for m in smtp.received)
    # her page: the request, with its cancel, instead of the ask form
    page = read(client.get(people["Alice"].form(pub)))
    assert "You asked for cover" in page and "Can't make it? Ask for cover" not in page
    assert f'action="{people["Alice"].form(pub)}/covers/{cover.id}/cancel"' in page
    # Bob's page: the shift he could take, with its button
    page = read(client.get(people["Bob"].form(pub)))
    assert "Shifts looking for cover you could take" in page
    assert "Alice can't make it: “I'm ill”" in page
    assert f'{people["Bob"].form(pub)}/covers/{cover.id}/take' in page
    assert roster(pub)[thursday.id] == [people["Alice"].email]  # hers until taken


def test_the_offer_link_shows_the_shift_and_only_a_post_takes_it(
        client: TestClient, pub: Pub, week: list[Shift], smtp: SmtpTestServer,
        db_url: str) -> None:
    people = team(pub)
    ask(client, pub, "Alice", week[0], note="Sorry!")
    link = path_of(offers_to(smtp, people["Bob"].email)[0])
    before = snapshot(db_url)
    for _ in range(3):  # a preview, a scanner, the tender: none of them takes it
        page = client.get(link)
        assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
        assert "Can you cover this shift?" in read(page) and "Alice can't make it." in read(page)
        assert "Thu 10 Dec, 18:00" in read(page) and "“Sorry!”" in read(page)
        assert f'<form method="post" action="{link}"' in read(page)
    assert snapshot(db_url) == before  # the GETs wrote nothing at all
    taken = client.post(link)
    assert taken.status_code == 200 and "It's yours" in read(taken)
    assert "It's in your calendar" in read(taken)
    cover = only_cover(pub)
    assert (cover.state, cover.taken_by) == ("TAKEN", people["Bob"].id)
    assert roster(pub)[week[0].id] == [people["Bob"].email]
    # Bob's link again: still his; Carol's: someone else was first, nothing changes
    assert "It's yours" in read(client.get(link))
    assert "It's yours" in read(client.post(link))
    carol = path_of(offers_to(smtp, people["Carol"].email)[0])
    for answer in (client.get(carol), client.post(carol)):
        assert answer.status_code == 409 and "Someone else took it first" in read(answer)
    assert roster(pub)[week[0].id] == [people["Bob"].email]
    # Alice's page: the shift is gone from hers, said once; Bob's has it
    alice = read(client.get(people["Alice"].form(pub)))
    assert "Shifts you gave away" in alice and "Bob took it" in alice
    assert "Thu 10 Dec, 18:00 - 02:00" in read(client.get(people["Bob"].form(pub)))


def test_under_the_legacy_engine_the_pages_ask_and_take_alike(
        client: TestClient, operator: TestClient, pub: Pub, week: list[Shift],
        smtp: SmtpTestServer) -> None:
    flags.set_v2(pub, False, now=NOW)  # the week was sent by v2; the legacy engine reads it
    people = team(pub)
    assert "You asked for cover" in ask(client, pub, "Alice", week[0])
    assert "It's yours" in read(client.post(path_of(offers_to(smtp, people["Bob"].email)[0])))
    assert roster(pub)[week[0].id] == [people["Bob"].email]
    page = read(operator.get(f"/admin/weeks/{WEEK}"))
    assert "Alice can't make it — covered by Bob" in page


def test_taking_from_the_tenders_own_page(client: TestClient, pub: Pub,
                                          week: list[Shift]) -> None:
    people = team(pub)
    ask(client, pub, "Alice", week[0])
    cover = only_cover(pub)
    reply = client.post(f"{people['Carol'].form(pub)}/covers/{cover.id}/take")
    assert reply.status_code == 200 and "It's yours" in read(reply)
    assert roster(pub)[week[0].id] == [people["Carol"].email]
    assert "Shifts looking for cover" not in read(client.get(people["Bob"].form(pub)))


def test_the_asker_cancels_and_the_offer_then_says_so(
        client: TestClient, pub: Pub, week: list[Shift], smtp: SmtpTestServer) -> None:
    people = team(pub)
    ask(client, pub, "Alice", week[0])
    cover = only_cover(pub)
    # nobody else may cancel it from their page
    other = client.post(f"{people['Bob'].form(pub)}/covers/{cover.id}/cancel")
    assert other.status_code == 404 and "not one of yours" in read(other)
    assert only_cover(pub).state == "OPEN"
    done = client.post(f"{people['Alice'].form(pub)}/covers/{cover.id}/cancel")
    assert done.status_code == 200 and "Your request is cancelled" in read(done)
    assert only_cover(pub).state == "CANCELLED"
    link = path_of(offers_to(smtp, people["Bob"].email)[0])
    for answer in (client.get(link), client.post(link)):
        assert answer.status_code == 409 and "This request was cancelled" in read(answer)
    assert roster(pub)[week[0].id] == [people["Alice"].email]
    again = client.post(f"{people['Alice'].form(pub)}/covers/{cover.id}/cancel")
    assert again.status_code == 409 and "Traceback" not in read(again)
    # she can ask again: the ask form is back
    assert "Can't make it? Ask for cover" in read(client.get(people["Alice"].form(pub)))


def test_once_the_shift_has_started_nothing_can_be_asked_or_taken(
        client: TestClient, pub: Pub, week: list[Shift], smtp: SmtpTestServer,
        clock: Clock) -> None:
    people = team(pub)
    ask(client, pub, "Alice", week[0])
    link = path_of(offers_to(smtp, people["Bob"].email)[0])
    clock.at = after_start(week[0])
    for answer in (client.get(link), client.post(link)):
        assert answer.status_code == 409 and "The shift has started" in read(answer)
    assert only_cover(pub).state == "OPEN"  # the tick's to expire; nobody took it
    page = read(client.get(people["Alice"].form(pub)))
    assert "on now" in page and "You asked for cover" not in page
    assert "Shifts looking for cover" not in read(client.get(people["Bob"].form(pub)))
    # Bob's Friday has not started: he may still ask for that one
    assert "Can't make it? Ask for cover" in read(client.get(people["Bob"].form(pub)))


def test_refusals_are_said_in_words_and_write_nothing(
        client: TestClient, pub: Pub, week: list[Shift], db_url: str) -> None:
    people = team(pub)
    before = snapshot(db_url)
    bob = people["Bob"].form(pub) + "/covers/ask"
    not_his = client.post(bob, data={"week": WEEK, "shift_id": str(week[0].id)})
    assert not_his.status_code == 409 and "flash-refused" in read(not_his)
    assert "Traceback" not in read(not_his) and "NOT_" not in read(not_his)
    for data in ({"week": WEEK, "shift_id": "x"}, {"week": "someday", "shift_id": "1"},
                 {"week": WEEK}):
        bad = client.post(bob, data=data)
        assert bad.status_code == 400 and "Traceback" not in read(bad), data
    assert snapshot(db_url) == before


def test_a_tender_no_longer_eligible_cannot_take_it(
        client: TestClient, pub: Pub, week: list[Shift], smtp: SmtpTestServer) -> None:
    people = team(pub)
    ask(client, pub, "Alice", week[0])
    tenders.edit(pub, people["Carol"].email, max_shifts=1)  # at her maximum since
    link = path_of(offers_to(smtp, people["Carol"].email)[0])
    shown = client.get(link)  # no button that could only be refused
    assert shown.status_code == 200 and "You can't take this one now" in read(shown)
    assert 'id="take"' not in read(shown)
    refused = client.post(link)  # a form kept from before: refused with the reason
    assert refused.status_code == 409 and "You can't take this one" in read(refused)
    assert only_cover(pub).state == "OPEN"
    assert roster(pub)[week[0].id] == [people["Alice"].email]


def test_a_request_number_no_request_has_is_a_plain_404(client: TestClient, pub: Pub,
                                                         week: list[Shift]) -> None:
    alice = team(pub)["Alice"].form(pub)
    for number in ("0", "99", str(2**70)):
        for action in ("cancel", "take"):
            reply = client.post(f"{alice}/covers/{number}/{action}")
            assert reply.status_code == 404 and "Traceback" not in read(reply), number


def test_bad_offer_links_do_nothing(client: TestClient, pub: Pub, week: list[Shift],
                                    smtp: SmtpTestServer, db_url: str) -> None:
    people = team(pub)
    ask(client, pub, "Alice", week[0])
    good = path_of(offers_to(smtp, people["Bob"].email)[0])
    form_as_offer = "/c/" + people["Bob"].form(pub).removeprefix("/t/")
    tampered = good[:-3] + ("AAA" if not good.endswith("AAA") else "BBB")
    before = snapshot(db_url)
    for path in (tampered, form_as_offer, "/c/garbage"):
        for answer in (client.get(path), client.post(path)):
            assert answer.status_code == 404 and "This link does not work" in read(answer)
    assert snapshot(db_url) == before
    tenders.revoke_links(pub, people["Bob"].email)  # his old links, this one too, are dead
    assert client.post(good).status_code == 404
    assert only_cover(pub).state == "OPEN"
    assert roster(pub)[week[0].id] == [people["Alice"].email]


def test_logs_name_the_cover_and_the_tender_never_the_token(pub: Pub,
                                                            week: list[Shift]) -> None:
    bob = team(pub)["Bob"]
    token = covers.offer_url(pub.config, 7, bob.id, bob.version(pub)).rsplit("/c/", 1)[1]
    assert loggable_path(f"/c/{token}", pub.config) == f"/c/<cover 7 for tender {bob.id}>"
    form = bob.form(pub)
    assert loggable_path(form + "/covers/ask", pub.config) == \
        f"/t/<tender {bob.id}>/covers/ask"
    assert loggable_path("/c/nonsense", pub.config) == "/c/<bad link>"


@pytest.mark.both_databases("races: four takes at once")
def test_four_takes_at_once_through_the_web_give_it_to_one(
        pub: Pub, week: list[Shift], smtp: SmtpTestServer) -> None:
    """Four tenders press "I'll take it" in the same instant (four threads, four HTTP
    requests to the app served by uvicorn): one is told it's theirs, the three others
    that someone else took it first; the roster moves once and each email goes once."""
    for name in ("Dave", "Erin"):
        assert tenders.add(pub, name, f"{name.lower()}@example.com", now=NOW)
    people = team(pub)
    takers = ["Bob", "Carol", "Dave", "Erin"]
    with TestClient(create_app(pub, web_settings(), clock=lambda: NOW),
                    base_url="https://testserver") as client:
        ask(client, pub, "Alice", week[0])
    offers = {n: path_of(offers_to(smtp, people[n].email)[0]) for n in takers}
    start = threading.Barrier(len(takers))
    answers: dict[str, tuple[int, str]] = {}

    def press(name: str, base: str) -> None:
        with httpx.Client(base_url=base) as http:
            start.wait()
            reply = http.post(offers[name])
        answers[name] = (reply.status_code, html.unescape(reply.text))

    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with served(app) as base:
        threads = [threading.Thread(target=press, args=(n, base)) for n in takers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    won = [n for n, (code, text) in answers.items() if code == 200 and "It's yours" in text]
    lost = [n for n, (code, text) in answers.items()
            if code == 409 and "Someone else took it first" in text]
    assert len(won) == 1 and sorted(won + lost) == sorted(takers), answers
    winner = people[won[0]]
    assert roster(pub)[week[0].id] == [winner.email]
    assert only_cover(pub).taken_by == winner.id
    covers.deliver(pub, NOW)  # whatever the answers' background sends left
    taken = [n for n in notices.listed(pub, about=covers.notice_about(only_cover(pub).id))
             if n.kind == "cover_taken"]
    assert sorted(n.recipient for n in taken) == sorted(
        [notices.to_tender(people["Alice"].id), notices.to_tender(winner.id), notices.OPERATOR])
    assert all(n.status == notices.SENT_WORD for n in taken)
    subjects = [(m.rcpt_tos, m.message["subject"]) for m in smtp.received]
    assert len(subjects) == len(set(subjects)), "an email went twice"


def test_a_cross_site_take_is_refused_and_takes_nothing(
        client: TestClient, pub: Pub, week: list[Shift], smtp: SmtpTestServer) -> None:
    ask(client, pub, "Alice", week[0])
    link = path_of(offers_to(smtp, team(pub)["Bob"].email)[0])
    for hostile in ({"origin": "https://evil.example"}, {"sec-fetch-site": "cross-site"}):
        assert client.post(link, headers=hostile).status_code == 403
    assert only_cover(pub).state == "OPEN"


def test_asking_twice_is_refused_in_words(client: TestClient, pub: Pub,
                                          week: list[Shift]) -> None:
    ask(client, pub, "Alice", week[0])
    alice = team(pub)["Alice"]
    again = client.post(alice.form(pub) + "/covers/ask",
                        data={"week": WEEK, "shift_id": str(week[0].id)})
    assert again.status_code == 409
    assert "Alice has already asked for cover for Thu 10 Dec" in read(again)
    assert len(covers.listed(pub, WEEK)) == 1


# -- the operator's pages -----------------------------------------------------------------


def test_the_covers_page_says_each_request_and_its_emails(
        operator: TestClient, client: TestClient, pub: Pub, week: list[Shift],
        smtp: SmtpTestServer) -> None:
    people = team(pub)
    assert read(operator.get("/admin/covers")).count("No requests for cover yet") == 1
    ask(client, pub, "Alice", week[0], note="Dentist")
    ask(client, pub, "Carol", week[2])
    first, second = covers.listed(pub, WEEK)
    page = operator.get(f"/admin/covers?week={WEEK}")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    assert '<a href="/admin/covers">Covers</a>' in read(page)  # in the menu
    row = _row(read(page), first.id)
    assert "Alice" in row and "Dentist" in row and "looking for cover" in row
    assert "Thu 10 Dec, 18:00 - 02:00" in row
    assert "Bob: sent" in row and "Carol: sent" in row
    assert f'action="/admin/covers/{first.id}/cancel"' in row
    assert 'id="lifecycle"' in read(page) and "stateDiagram-v2" in read(page)
    # Bob takes Alice's; the operator cancels Carol's
    client.post(path_of(offers_to(smtp, people["Bob"].email)[0]))
    told = operator.post(f"/admin/covers/{second.id}/cancel", data={"week": WEEK},
                         follow_redirects=True)
    assert told.status_code == 200 and "flash-ok" in read(told)
    assert "Traceback" not in read(told)
    page = read(operator.get(f"/admin/covers?week={WEEK}"))
    assert "taken by Bob" in _row(page, first.id) and "/cancel" not in _row(page, first.id)
    assert "cancelled" in _row(page, second.id) and "/cancel" not in _row(page, second.id)
    assert "Told Carol it was called off: sent" in _row(page, second.id)  # sent at once
    assert "Told Alice it was taken: sent" in _row(page, first.id)
    # cancelling again is refused in words
    again = operator.post(f"/admin/covers/{second.id}/cancel", follow_redirects=True)
    assert "flash-refused" in read(again) and "Traceback" not in read(again)
    none = read(operator.get("/admin/covers?week=2026-12-14"))
    assert none.count("No requests for cover this week") == 1
    assert '<option value="2026-12-14" selected>' in none  # the filter says which week
    assert operator.get("/admin/covers?week=nonsense").status_code == 404
    unknown = operator.post("/admin/covers/999/cancel", follow_redirects=True)
    assert "flash-refused" in read(unknown) and "no cover request 999" in read(unknown)


def test_the_covers_page_says_which_email_did_not_go_and_the_tick_retries_it(
        operator: TestClient, client: TestClient, pub: Pub, week: list[Shift],
        smtp: SmtpTestServer) -> None:
    people = team(pub)
    smtp.refuse_recipient(people["Bob"].email)
    smtp.drop_after_data(for_recipient=people["Carol"].email)
    assert "You asked for cover" in ask(client, pub, "Alice", week[0])  # answered all the same
    row = _row(read(operator.get("/admin/covers")), only_cover(pub).id)
    assert "Bob: not delivered (" in row and "tried again in 1 min" in row
    assert "Carol: handed to the mail server, no answer yet (" in row  # maybe it arrived
    smtp.clear_faults()
    covers.deliver(pub, NOW + timedelta(minutes=1))  # the tick, once the wait is over
    row = _row(read(operator.get("/admin/covers")), only_cover(pub).id)
    assert "Bob: sent" in row and "not delivered" not in row
    assert "Carol: handed to the mail server, no answer yet (" in row  # never sent twice
    assert "it may have arrived: the Mail page can resend it" in row


def test_the_covers_page_says_a_started_request_expired(
        operator: TestClient, client: TestClient, pub: Pub, week: list[Shift],
        clock: Clock) -> None:
    ask(client, pub, "Alice", week[0])
    clock.at = after_start(week[0])
    row = _row(read(operator.get("/admin/covers")), only_cover(pub).id)
    assert "expired (the shift started)" in row and "/cancel" not in row


def test_a_sent_weeks_page_shows_the_roster_as_it_is_now(
        operator: TestClient, client: TestClient, pub: Pub, week: list[Shift],
        smtp: SmtpTestServer) -> None:
    people = team(pub)
    page = read(operator.get(f"/admin/weeks/{WEEK}"))
    assert "can't make it" not in page and "/admin/covers?week=" not in page
    ask(client, pub, "Alice", week[0])
    page = read(operator.get(f"/admin/weeks/{WEEK}"))
    assert "Alice can't make it — looking for cover" in page
    assert f'href="/admin/covers?week={WEEK}"' in page
    client.post(path_of(offers_to(smtp, people["Bob"].email)[0]))
    page = read(operator.get(f"/admin/weeks/{WEEK}"))
    assert "Alice can't make it — covered by Bob" in page
    assert f'data-shift="{week[0].id}" data-email="{people["Bob"].email}"' in page
    assert f'data-shift="{week[0].id}" data-email="{people["Alice"].email}"' not in page


def test_the_covers_pages_need_the_operator(client: TestClient, pub: Pub,
                                            week: list[Shift]) -> None:
    ask(client, pub, "Alice", week[0])
    cover = only_cover(pub)
    assert client.get("/admin/covers", follow_redirects=False).status_code == 303
    reply = client.post(f"/admin/covers/{cover.id}/cancel", follow_redirects=False)
    assert reply.status_code == 303 and only_cover(pub).state == "OPEN"


def _row(page: str, cover_id: int) -> str:
    found = re.search(rf'<tr data-cover="{cover_id}".*?</tr>', page, re.S)
    assert found, f"no row for request {cover_id}"
    return found.group(0)


def test_every_email_a_request_owes_has_its_words() -> None:
    assert set(cover_view.TOLD) == set(covers.KINDS)


def test_an_offer_link_is_the_tenders_own(pub: Pub, week: list[Shift]) -> None:
    """The link names the request, the tender and their link version (revoking their
    links ends it), and verifies only with the pub's secret."""
    bob = team(pub)["Bob"]
    url = covers.offer_url(pub.config, 3, bob.id, bob.version(pub))
    assert url.startswith("https://pub.example/c/")
    token = url.rsplit("/c/", 1)[1]
    assert covers.verify_offer(pub.config, token) == (3, bob.id, bob.version(pub))
    assert links.verify(pub.config, token, "form") is None
