"""Time off racing (issue 19), with real threads: ``tender away`` while the schedule email is
going out is refused (the week held: its send lease is live) and writes nothing; once sent,
it is refused with the cover hint. On PostgreSQL, several overlapping spans of one tender
marked at once: one is saved, the others refused as overlapping (the tender's row lock),
never two overlapping spans."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from pubsched.db import open_store
from pubsched.engines import v2
from pubsched.people import away
from pubsched.pub import Pub
from pubsched.verdicts import Verdict
from pubsched.week import runs as weeks
from pubsched.week import submissions
from support.pub_cli import snapshot
from support.pubs import NOW, WEEK, crew
from support.smtp_server import SmtpTestServer


def _sent_roster(pub: Pub) -> None:
    """ann alone gives every shift: she works all three nights; approved, not sent."""
    crew(pub, ("ann", None), ("bob", None))
    assert v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    assert submissions.submit(pub, WEEK, "ann@pub.test", ids, now=NOW)
    for step in (v2.close, v2.generate, v2.approve):
        assert step(pub, WEEK, now=NOW), step


@pytest.mark.both_databases("races: time off against the send lease, with threads")
def test_time_off_while_the_schedule_is_going_out_is_refused_then_needs_cover(
        pub: Pub, smtp: SmtpTestServer, db_url: str) -> None:
    _sent_roster(pub)
    friday = weeks.shifts(pub, WEEK)[1]
    night = friday.night
    smtp.hang_after_data(for_recipient="ann@pub.test")  # the send waits on her ...
    sent: list[Verdict] = []
    sender = threading.Thread(target=lambda: sent.append(v2.send(pub, WEEK, now=NOW)))
    sender.start()
    until = time.monotonic() + 30
    while not any("ann@pub.test" in m.rcpt_tos for m in smtp.received):
        assert time.monotonic() < until and sender.is_alive()
        time.sleep(0.02)
    before = snapshot(db_url)
    other = Pub(open_store(db_url), pub.config)  # another process's pub, its own store
    try:
        busy = away.add(other, "ann@pub.test", night, night, now=NOW)
    finally:
        other.close()
    assert not busy.applied and "is busy right now" in busy.message, busy
    assert snapshot(db_url) == before
    smtp.release_hung()  # ... until now (else its 5 s timeout): her email's fate unknown
    sender.join(60)
    assert sent and sent[0].applied, sent
    refused = away.add(pub, "ann@pub.test", night, night, now=NOW)
    assert refused.reason == "ON_THE_ROSTER"
    assert f"`pubsched cover ask {WEEK} {friday.id} ann@pub.test`" in refused.message
    assert away.upcoming(pub, 1, NOW) == []


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_overlapping_spans_marked_at_once_save_one(pub: Pub, db_url: str) -> None:
    crew(pub, ("ann", None))
    first = (NOW + timedelta(days=20)).date()
    spans = [(first + timedelta(days=i), first + timedelta(days=i + 5)) for i in range(6)]
    pubs = [Pub(open_store(db_url), pub.config) for _ in spans]
    gate = threading.Barrier(len(spans))
    got: list[Verdict] = []

    def mark(mine: Pub, span: tuple[object, object]) -> None:
        gate.wait()
        got.append(away.add(mine, "ann@pub.test", *span, now=NOW))

    threads = [threading.Thread(target=mark, args=(p, s)) for p, s in zip(pubs, spans,
                                                                          strict=True)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for p in pubs:
            p.close()
    assert sorted(v.applied for v in got) == [False] * (len(spans) - 1) + [True], got
    assert {v.reason for v in got if not v.applied} == {"OVERLAPS"}
    assert len(away.upcoming(pub, 1, NOW)) == 1
