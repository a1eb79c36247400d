"""Deactivating a tender who works shifts to come on a sent roster (issue 29, item 1), on
SQLite (PostgreSQL where marked), with mail to a real SMTP server on loopback.

Refused with the shifts named and nothing changed (CLI exit 3); ``--cover`` asks for cover
for each on the tender's behalf, takes them off and deactivates them in one unit of work
(a crash in it leaves nothing half done); the shift is then short everywhere (the week, the
colleagues' reminder, the operator's short-shift note); the first take fills the place; the
tender who left is not written to. A take racing the deactivation on PostgreSQL ends with
the tender inactive and on no shift to come, whoever wins."""

from __future__ import annotations

import html
import io
import re
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from pubsched import covers
from pubsched.cli.dispatch import run as cli_run
from pubsched.covers import leaving
from pubsched.deliveries import outbox
from pubsched.mail.settings import load_mail_settings
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.tick.run import tick
from pubsched.web.app import create_app
from pubsched.week.view import week_show
from support.pub_cli import OPERATOR as CLI_OPERATOR
from support.pub_cli import use_env
from support.pub_covers import FRI, SAT, THU, cover_mail, email, roster, sent_week
from support.pub_web import login, web_settings
from support.pubs import NOW, OPERATOR, WEEK, make_pub
from support.smtp_server import SmtpTestServer

THURSDAY_START = NOW.replace(month=12, day=10, hour=23)  # Thu 10 Dec 18:00 New York
LATER = NOW + timedelta(days=1)  # after the send, before any shift
THU_WORDS = "Thu 10 Dec, 18:00 - 02:00, New York time (EST)"
FRI_WORDS = "Fri 11 Dec, 18:00 - 02:00, New York time (EST)"
SAT_WORDS = "Sat 12 Dec, 18:00 - 02:00, New York time (EST)"


def _state(pub: Pub) -> tuple[Any, ...]:
    """What a refused or undone deactivation must leave as it was."""
    return (tenders.all_tenders(pub), roster(pub),
            pub.query("SELECT id, state FROM pub_covers ORDER BY id"),
            pub.query("SELECT kind, about, recipient FROM pub_mail ORDER BY kind, about, "
                      "recipient"))


def _cli(pub: Pub, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_run(["--db", pub.config.db_url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.both_databases("the weeks held for the deactivation's unit")
def test_a_tender_with_shifts_to_come_is_refused_with_them_named(pub: Pub) -> None:
    sent_week(pub)
    before = _state(pub)
    refused = leaving.deactivate(pub, email("dan"), now=LATER)
    assert (refused.applied, refused.reason) == (False, "HAS_SHIFTS")
    assert refused.message.startswith(
        f"Dan still works 2 shifts to come on sent rosters: {FRI_WORDS}; {SAT_WORDS}. "
        "Nothing changed.")
    assert [s["when"] for s in refused.detail["shifts"]] == [FRI_WORDS, SAT_WORDS]
    assert _state(pub) == before
    # a shift that has started is no longer "to come": Thursday's, once it began
    started = leaving.deactivate(pub, email("ann"), now=THURSDAY_START)
    assert started.applied and not tenders.get(pub, email("ann")).active
    # nobody on a sent roster: deactivated as before; twice: ALREADY_INACTIVE
    assert leaving.deactivate(pub, email("fay"), now=LATER).applied
    again = leaving.deactivate(pub, email("fay"), now=LATER)
    assert again.reason == "ALREADY_INACTIVE"


def test_the_command_refuses_with_exit_3_and_says_how_to_go_on(pub: Pub) -> None:
    sent_week(pub)
    before = _state(pub)
    code, out, err = _cli(pub, "tender", "deactivate", email("dan"), "--now",
                          LATER.isoformat())
    assert code == 3 and out == ""
    assert f"Dan still works 2 shifts to come on sent rosters: {FRI_WORDS}; {SAT_WORDS}" in err
    assert f"pubsched tender deactivate {email('dan')} --cover" in err
    assert "Traceback" not in err
    assert _state(pub) == before


def test_cover_asks_for_each_shift_takes_them_off_and_the_first_take_fills_it(
        pub: Pub, smtp: SmtpTestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = sent_week(pub)
    use_env(monkeypatch, smtp, PUBSCHED_PUB_NAME="The pub")  # the command's mail
    code, out, err = _cli(pub, "tender", "deactivate", email("ann"), "--cover", "--now",
                          LATER.isoformat())
    assert code == 0, err
    assert out.startswith(f"Ann is deactivated and off 1 shift to come, each asked for "
                          f"cover: request 1 for {THU_WORDS}: offered to ")
    ann = tenders.get(pub, email("ann"))
    assert not ann.active
    assert roster(pub)[ids[THU]] == ["Bob"]  # off the shift: it is short now
    [cover] = covers.listed(pub)
    assert (cover.state, cover.asked_by, cover.asker_active) == ("OPEN", ann.id, False)
    assert cover.note == "Asked by The pub on behalf of Ann."
    # the offers and the operator's note went out at once, as `cover ask`'s do
    offered = sorted(m.rcpt_tos[0] for m in cover_mail(smtp)
                     if "can you cover Thu 10 Dec" in str(m.message["Subject"]))
    assert offered and email("ann") not in offered and email("bob") not in offered
    assert any(m.rcpt_tos[0] == CLI_OPERATOR for m in cover_mail(smtp))
    # the week says the shift is short and the request is open
    shown = week_show(pub, WEEK)
    thursday = next(s for s in shown["shifts"] if s["id"] == ids[THU])
    assert email("ann") not in str(thursday)
    # Bob's reminder names nobody who is not coming; the operator hears the shift is short
    smtp.clear_received()
    tick(pub, THURSDAY_START - timedelta(hours=5))
    [bobs] = [m for m in smtp.accepted_for(email("bob"))
              if "your shift today" in str(m.message["Subject"])]
    body = bobs.message.get_body(("plain",)).get_content()
    assert "Ann" not in body and "Nobody else is on this shift." in body
    assert any("short" in str(m.message["Subject"]).lower()
               for m in smtp.accepted_for(OPERATOR))
    # the first take fills the place Ann left; Ann is not written to
    taker = next(a for a in offered)
    taken = covers.take(pub, cover.id, taker, now=THURSDAY_START - timedelta(hours=4))
    assert taken.applied, taken.message
    assert sorted(roster(pub)[ids[THU]]) == sorted(["Bob", tenders.get(pub, taker).name])
    covers.deliver(pub, THURSDAY_START - timedelta(hours=4))
    assert [m for m in smtp.accepted_for(email("ann"))] == []
    ann_notes = [n for n in outbox.listed(pub, about=f"cover:{cover.id}")
                 if n.tender_id == ann.id]
    assert ann_notes and all(n.status != "sent" for n in ann_notes)


def test_a_request_nobody_took_leaves_the_place_empty_and_tells_only_the_operator(
        pub: Pub, smtp: SmtpTestServer) -> None:
    ids = sent_week(pub)
    done = leaving.deactivate(pub, email("dan"), cover=True, now=LATER)
    assert done.applied
    assert [c["when"] for c in done.detail["covers"]] == [FRI_WORDS, SAT_WORDS]
    assert "Dan" not in roster(pub).get(ids[FRI], []) + roster(pub).get(ids[SAT], [])
    smtp.clear_received()
    tick(pub, THURSDAY_START + timedelta(days=3))  # after Saturday's start
    assert [c.state for c in covers.listed(pub)] == ["EXPIRED", "EXPIRED"]
    assert smtp.accepted_for(email("dan")) == []
    assert sum("nobody covered Dan" in str(m.message["Subject"])
               for m in smtp.accepted_for(OPERATOR)) == 2


def test_a_request_of_their_own_is_kept_not_asked_twice(pub: Pub) -> None:
    ids = sent_week(pub)
    own = covers.ask(pub, WEEK, ids[FRI], email("dan"), note="a wedding", now=NOW)
    assert own.applied
    done = leaving.deactivate(pub, email("dan"), cover=True, now=LATER)
    assert done.applied
    assert [(c.id, c.shift_id, c.note) for c in covers.listed(pub)] == [
        (own.detail["cover_id"], ids[FRI], "a wedding"),
        (own.detail["cover_id"] + 1, ids[SAT], "Asked by The pub on behalf of Dan.")]
    assert "their own request, still open" in done.message


@pytest.mark.both_databases("the unit rolled back whole when the database refuses a write")
def test_a_crash_in_the_middle_leaves_nothing_half_done(pub: Pub) -> None:
    """The database refuses the second request (a trigger): the first request, the
    tender's move off the first shift and their deactivation are undone with it."""
    ids = sent_week(pub)
    ddl = {"sqlite": [f"CREATE TRIGGER test_no_second BEFORE INSERT ON pub_covers WHEN "
                      f"NEW.shift_id = {ids[SAT]} BEGIN SELECT RAISE(ABORT, 'refused by the "
                      f"test'); END"],
           "postgresql": ["CREATE FUNCTION test_no_second() RETURNS trigger LANGUAGE plpgsql "
                          "AS $f$ BEGIN RAISE EXCEPTION 'refused by the test'; END $f$",
                          f"CREATE TRIGGER test_no_second BEFORE INSERT ON pub_covers FOR EACH "
                          f"ROW WHEN (NEW.shift_id = {ids[SAT]}) EXECUTE FUNCTION "
                          f"test_no_second()"]}
    with pub.atomic() as tx:
        for sql in ddl[pub.dialect]:
            tx.execute(sql)
    before = _state(pub)
    with pytest.raises(Exception, match="refused by the test"):
        leaving.deactivate(pub, email("dan"), cover=True, now=LATER)
    assert _state(pub) == before
    assert tenders.get(pub, email("dan")).active


def _together(calls: list[Any]) -> list[Any]:
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = calls[i]()
        except BaseException as exc:  # reported by the test
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@pytest.mark.postgres
def test_a_take_racing_the_deactivation_of_its_taker_never_leaves_them_on_a_shift(
        pg_db_url: str) -> None:
    """Fay takes Ann's Thursday while the operator deactivates Fay with ``--cover``, in
    threads, round after round: whichever lands first, Fay ends inactive and on no shift
    to come (her take refused, or the shift asked for again on her behalf)."""
    from pubsched.engines.flags import set_v2

    mine, theirs = make_pub(pg_db_url), make_pub(pg_db_url)
    try:
        set_v2(mine, True, now=NOW)
        ids = sent_week(mine)
        failures: list[BaseException] = []
        won = {"take": 0, "deactivate": 0}
        for _ in range(12):
            asked = covers.ask(mine, WEEK, ids[THU], email("ann"), now=NOW)
            assert asked, asked.message
            cover_id = asked.detail["cover_id"]

            def take(cover_id: int = cover_id) -> Any:
                return covers.take(theirs, cover_id, email("fay"), now=LATER)

            def leave() -> Any:
                return leaving.deactivate(mine, email("fay"), cover=True, now=LATER)

            got = _together([take, leave])
            failures += [g for g in got if isinstance(g, BaseException)]
            fay = tenders.get(mine, email("fay"))
            assert not fay.active
            assert leaving.shifts_to_come(mine, fay.id, LATER) == []
            if got[0].applied:  # the take first: the place asked for again on her behalf
                won["take"] += 1
                assert "Fay" not in roster(mine)[ids[THU]]
                [again] = [c for c in covers.listed(mine)
                           if c.state == "OPEN" and c.asked_by == fay.id]
                assert tenders.activate(mine, email("fay"))
                assert covers.take(mine, again.id, email("ann"), now=LATER)  # Ann back
            else:
                won["deactivate"] += 1
                assert covers.cancel(mine, cover_id, now=LATER)
                assert tenders.activate(mine, email("fay"))
            assert roster(mine)[ids[THU]] == ["Ann", "Bob"]
        assert failures == []
        assert sum(won.values()) == 12
    finally:
        mine.close()
        theirs.close()


# -- the web: the same door, the same choice ---------------------------------------------------


@pytest.fixture
def operator(db_url: str, smtp: SmtpTestServer) -> Iterator[tuple[TestClient, Pub]]:
    """The operator logged in to a pub whose week is sent (``sent_week``'s crew and
    roster; the web tenders too), its clock at ``LATER``."""
    mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                       PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                       PUBSCHED_SMTP_TIMEOUT="5"))
    made = make_pub(db_url, mail, web=True)
    try:
        sent_week(made)
        app = create_app(made, web_settings(), clock=lambda: LATER)
        with TestClient(app, base_url="https://testserver") as client:
            assert login(client).status_code == 303
            yield client, made
    finally:
        made.close()


def test_the_page_names_the_shifts_and_offers_to_ask_for_cover(
        operator: tuple[TestClient, Pub], smtp: SmtpTestServer) -> None:
    client, pub = operator
    dan, fay = tenders.get(pub, email("dan")), tenders.get(pub, email("fay"))
    listed = client.get("/admin/tenders").text
    form = re.compile(r'<form method="post" action="/admin/tenders/(\d+)/deactivate"'
                      r'[^>]*?(data-confirm="[^"]*")?\s*>', re.S)
    confirms = {int(m.group(1)): m.group(2) for m in form.finditer(listed)}
    assert confirms[dan.id] is None  # the answer is the page that names his shifts
    assert confirms[fay.id] and "no more shifts" in confirms[fay.id]
    before = _state(pub)
    reply = client.post(f"/admin/tenders/{dan.id}/deactivate", follow_redirects=False)
    assert reply.status_code == 409
    page = html.unescape(reply.text)
    assert "Deactivate Dan?" in page and "Nothing has changed yet." in page
    assert FRI_WORDS in page and SAT_WORDS in page
    assert 'id="deactivate-cover"' in page and "Keep Dan active" in page
    assert _state(pub) == before
    smtp.clear_received()
    done = client.post(f"/admin/tenders/{dan.id}/deactivate", data={"cover": "1"},
                       follow_redirects=True)
    assert done.status_code == 200
    said = re.search(r'<div class="flash flash-(\w+)"[^>]*>\s*(.*?)\s*</div>', done.text, re.S)
    assert said and said.group(1) == "ok"
    assert html.unescape(said.group(2)).startswith(
        "Dan is deactivated and off 2 shifts to come, each asked for cover: request 1 for "
        f"{FRI_WORDS}: ")
    assert not tenders.get(pub, email("dan")).active
    assert [c.asked_by for c in covers.listed(pub)] == [dan.id, dan.id]
    # each request's first event says who did it and why
    for c in covers.listed(pub):
        [first] = pub.covers.history(c.id)[:1]
        assert (first.by, first.data) == ("operator:admin", {"why": "deactivated"})
    # the offers went after the answer, as a cover's emails do
    assert any("can you cover Fri 11 Dec" in str(m.message["Subject"])
               for m in cover_mail(smtp))
    assert smtp.accepted_for(email("dan")) == []
