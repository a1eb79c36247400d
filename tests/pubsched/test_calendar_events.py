"""The calendars a tender gets (issue 29, items 12 and 15), read back with ``icalendar``
from the emails a real SMTP server received and from the feed: every event names the pub
as ORGANIZER (a CANCEL too, as RFC 5546 requires); the feed names itself and asks to be
fetched hourly; and an event's SEQUENCE only grows per UID, over every email and the
feed, so a shift taken back after its cancel shows again (the take / take-back case, and
random sequences of takes with hypothesis)."""

from __future__ import annotations

import shutil
import tempfile
from collections import defaultdict
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icalendar import Calendar

from pubsched import covers
from pubsched.people import tenders
from pubsched.people.calendar import shift_uid
from pubsched.pub import Pub
from pubsched.week.view import tender_calendar
from support.pub_covers import THU, email, roster, sent_week, shift_ids
from support.pub_db import sqlite_url
from support.pubs import NOW, WEEK, mail_settings, make_pub
from support.smtp_server import SmtpTestServer

PUB_NAME = "The Swan and Lantern"


def _pub(url: str, smtp: SmtpTestServer) -> Pub:
    return make_pub(url, mail_settings(smtp, PUBSCHED_PUB_NAME=PUB_NAME), v2=True)


def calendars(smtp: SmtpTestServer, address: str | None = None) -> list[Calendar]:
    """Every calendar attachment the server received (for ``address``), in order."""
    out = []
    for mail in smtp.received:
        if address is not None and mail.rcpt_tos[0] != address:
            continue
        for part in mail.message.iter_attachments():
            if part.get_content_type() == "text/calendar":
                out.append(Calendar.from_ical(part.get_content()))
    return out


def feed(pub: Pub, name: str) -> Calendar:
    return Calendar.from_ical(tender_calendar(pub, tenders.get(pub, email(name))))


def _swap(pub: Pub, asker: str, taker: str) -> None:
    """``asker`` asks for cover of Thursday and ``taker`` takes it; the emails go."""
    asked = covers.ask(pub, WEEK, _thursday(pub), email(asker), now=NOW)
    assert asked.applied, asked
    took = covers.take(pub, int(asked.detail["cover_id"]), email(taker), now=NOW)
    assert took.applied, took
    assert all(v.applied for v in covers.deliver(pub, NOW))


def _thursday(pub: Pub) -> int:
    return shift_ids(pub)[THU]


@pytest.fixture
def pub(db_url: str, smtp: SmtpTestServer) -> Any:
    made = _pub(db_url, smtp)
    try:
        yield made
    finally:
        made.close()


def test_every_event_names_the_pub_as_organizer_a_cancel_too(
        pub: Pub, smtp: SmtpTestServer) -> None:
    sent_week(pub)
    _swap(pub, "ann", "fay")
    cancel = [c for c in calendars(smtp, email("ann")) if str(c["METHOD"]) == "CANCEL"]
    [gone] = cancel[0].walk("VEVENT")
    assert str(gone["ORGANIZER"]) == "mailto:pub@pub.test"
    assert gone["ORGANIZER"].params["CN"] == PUB_NAME
    every = [e for c in calendars(smtp) for e in c.walk("VEVENT")]
    assert every and all(str(e["ORGANIZER"]) == "mailto:pub@pub.test" for e in every)
    for e in feed(pub, "fay").walk("VEVENT"):
        assert str(e["ORGANIZER"]) == "mailto:pub@pub.test"
    # an email's attachment is one message, not a subscription: no name, no refresh
    assert all("X-WR-CALNAME" not in c and "REFRESH-INTERVAL" not in c
               for c in calendars(smtp))


def test_the_feed_names_itself_after_the_pub_and_asks_to_be_fetched_hourly(
        pub: Pub) -> None:
    sent_week(pub)
    raw = tender_calendar(pub, tenders.get(pub, email("ann")))
    got = Calendar.from_ical(raw)
    assert str(got["X-WR-CALNAME"]) == PUB_NAME
    assert got["REFRESH-INTERVAL"].dt == timedelta(hours=1)
    assert got["REFRESH-INTERVAL"].params["VALUE"] == "DURATION"
    assert b"REFRESH-INTERVAL;VALUE=DURATION:PT1H\r\n" in raw
    assert b"X-PUBLISHED-TTL:PT1H\r\n" in raw


@pytest.mark.both_databases("the take's SEQUENCE bumped in its unit")
def test_a_shift_taken_back_after_its_cancel_has_a_higher_sequence_and_shows_again(
        pub: Pub, smtp: SmtpTestServer) -> None:
    sent_week(pub)
    _swap(pub, "ann", "fay")  # Ann's event cancelled
    _swap(pub, "fay", "ann")  # and back to Ann: a new event of the same UID
    assert sorted(roster(pub)[_thursday(pub)]) == ["Ann", "Bob"]
    uid = shift_uid(date.fromisoformat(WEEK), _thursday(pub), email("ann"))
    seen = [(str(c["METHOD"]), int(e.get("SEQUENCE", 0)))
            for c in calendars(smtp, email("ann")) for e in c.walk("VEVENT")
            if str(e["UID"]) == uid]
    assert seen == [("PUBLISH", 0), ("CANCEL", 1), ("PUBLISH", 2)]
    [now] = [e for e in feed(pub, "ann").walk("VEVENT") if str(e["UID"]) == uid]
    assert int(now["SEQUENCE"]) == 2 and "STATUS" not in now


def _sequences_only_grow(pub: Pub, smtp: SmtpTestServer) -> None:
    """Over every email received, in order, each UID's SEQUENCE strictly grows; each
    tender's feed carries, for each UID it holds, the last one sent, and it was a
    publication (no event in a feed was last cancelled)."""
    sent: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for c in calendars(smtp):
        for e in c.walk("VEVENT"):
            sent[str(e["UID"])].append((str(c["METHOD"]), int(e.get("SEQUENCE", 0))))
    for uid, seen in sent.items():
        numbers = [n for _, n in seen]
        assert numbers == sorted(set(numbers)), (uid, seen)
    for person in ("ann", "bob", "cat", "dan", "eve", "fay", "gus"):
        for e in feed(pub, person).walk("VEVENT"):
            uid = str(e["UID"])
            assert int(e["SEQUENCE"]) == sent[uid][-1][1], (uid, sent[uid])
            assert sent[uid][-1][0] == "PUBLISH", (uid, sent[uid])


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 6)), min_size=1, max_size=6))
def test_random_takes_and_gives_only_grow_each_events_sequence(
        pub_sqlite_template: Path, smtp: SmtpTestServer,
        steps: list[tuple[int, int]]) -> None:
    """Each step: one of Thursday's two tenders asks (``who``), and the tender the offer
    list names at ``pick`` takes it (0: the one who gave it up last, when offered: a take
    back). Then every SEQUENCE received and in the feeds is checked."""
    folder = Path(tempfile.mkdtemp(prefix="mailcal-seq-"))
    path = folder / "pub.db"
    shutil.copyfile(pub_sqlite_template, path)
    smtp.clear_received()
    pub = _pub(sqlite_url(path), smtp)
    try:
        sent_week(pub)
        thursday, last_gave = _thursday(pub), "ann"
        for who, pick in steps:
            on = sorted(t.lower() for t in roster(pub)[thursday])
            asker = on[who % len(on)]
            asked = covers.ask(pub, WEEK, thursday, email(asker), now=NOW)
            assert asked.applied, asked
            offered = [str(o).split("@")[0] for o in asked.detail["offered"]]
            if not offered:
                assert covers.cancel(pub, int(asked.detail["cover_id"]), now=NOW).applied
                continue
            taker = (last_gave if pick == 0 and last_gave in offered
                     else offered[pick % len(offered)])
            took = covers.take(pub, int(asked.detail["cover_id"]), email(taker), now=NOW)
            assert took.applied, took
            last_gave = asker
            covers.deliver(pub, NOW)
        _sequences_only_grow(pub, smtp)
    finally:
        pub.close()
        shutil.rmtree(folder, ignore_errors=True)
