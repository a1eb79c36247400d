"""Several ticker processes at once (``pubsched tick --now ...``, each its own process and
connection, released together; the same processes serve every round) against one PostgreSQL
database send each reminder once, counted at the SMTP server: the outbox's UNIQUE owes it
once, the claim's compare-and-set hands it to one of them. A reminder the server refuses in
one round makes exactly one of the ticks exit 1, and a later round's ticks send it, once.
SQLite's one writer is run the same way."""

from __future__ import annotations

import os
from collections import Counter
from contextlib import ExitStack
from datetime import datetime, timedelta
from typing import Any

import pytest

from pubsched.db.instants import instant
from pubsched.engines import v2
from pubsched.pub import Pub
from support.line_child import LineChild, at_once
from support.pub_reminders import on_shift, reminders, run_week
from support.pubs import NEXT, NOW, OPERATOR, WEEK, crew
from support.smtp_server import SmtpTestServer

TICKERS = 4
EXTRA = [f"extra{i}" for i in range(12)]  # no answers: each owed the next week's form

CHILD = """
import io, json, sys
from pubsched.cli import dispatch  # warm: the imports are not part of the race
import pubsched.tick.run, pubsched.tick.reminders, pubsched.engines.v2, pubsched.db.store
url = sys.argv[1]
while line := sys.stdin.readline():  # a round: the instant to tick at
    out, err = io.StringIO(), io.StringIO()
    code = dispatch.run(["--db", url, "tick", "--now", json.loads(line)], stdout=out,
                        stderr=err)
    print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}), flush=True)
"""


def tickers(db_url: str, smtp: SmtpTestServer) -> list[LineChild]:
    """``TICKERS`` processes that run ``pubsched tick --now AT`` for each round's ``AT``
    (support.line_child: started once, each its own process and connection)."""
    env = {**os.environ, **smtp.env(PUBSCHED_MAIL_FROM="pub@pub.test",
                                     PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                     PUBSCHED_SMTP_TIMEOUT="5")}
    return [LineChild(CHILD, db_url, env=env) for _ in range(TICKERS)]


def ticks_at_once(kids: list[LineChild], at: datetime) -> list[dict[str, Any]]:
    """Every ticker's ``pubsched tick --now AT``, released by one line each at once; what
    each said and its exit code."""
    return at_once(kids, [at.isoformat()] * len(kids))


def sent_per_reminder(smtp: SmtpTestServer) -> Counter[tuple[str, str]]:
    """How many copies of each reminder (its Message-ID, its recipient) the server took."""
    return Counter((str(m.message["Message-ID"]), to) for m in reminders(smtp)
                   for to in m.rcpt_tos)


@pytest.mark.parametrize("db_url", [pytest.param("postgres", marks=pytest.mark.postgres),
                                    "sqlite"], indirect=True)
def test_several_ticker_processes_send_each_reminder_once(pub: Pub, db_url: str,
                                                          smtp: SmtpTestServer) -> None:
    crew(pub, ("ann", None), ("bob", None), ("cat", None), ("dan", None))
    crew(pub, *((name, None) for name in EXTRA))  # enough mail that the tickers overlap
    answers: dict[str, list[int] | None] = {  # Saturday gets Ann only: a short shift
        "ann@pub.test": None, "bob@pub.test": [0, 1], "cat@pub.test": [0, 1],
        "dan@pub.test": [0, 1]}
    thursday, _, saturday = run_week(pub, WEEK, answers, at=NOW)
    assert v2.open_form(pub, NEXT, now=NOW + timedelta(days=7))
    smtp.clear_received()
    row = pub.runs.get(NEXT)
    assert row is not None
    refused = on_shift(pub, thursday.id)[0]
    rounds = [instant(row["deadline_at"]) - timedelta(hours=24),  # the next week's form
              instant(thursday.starts_at) - timedelta(hours=6),  # Thursday's shift
              instant(thursday.starts_at) - timedelta(hours=5),  # (the refused one again)
              instant(saturday.starts_at) - timedelta(hours=24)]  # Saturday is short
    failed_rounds = []
    kids = tickers(db_url, smtp)
    with ExitStack() as running:
        for kid in kids:
            running.enter_context(kid)
        for i, at in enumerate(rounds):
            if i == 1:
                smtp.refuse_recipient(refused)  # for the round of Thursday's reminders only
            said = ticks_at_once(kids, at)
            assert all(s["code"] in (0, 1) for s in said), said
            failed_rounds.append(sum(s["code"] == 1 for s in said))
            if i == 1:  # the refused reminder: a ticker that tried it says so and exits 1
                losers = [s for s in said if s["code"] == 1]
                assert losers, said
                assert all("an email did not go through" in s["err"] and refused in s["err"]
                           for s in losers)
                smtp.clear_faults()
    # a ticker of the same round may try it again (it is failed, so due): one claim each
    assert failed_rounds[0] == failed_rounds[2] == failed_rounds[3] == 0
    assert failed_rounds[1] >= 1
    copies = sent_per_reminder(smtp)
    assert copies and set(copies.values()) == {1}, copies  # each reminder once
    kinds = Counter(mid.split(".")[0] for mid, _ in copies)
    assert kinds == {"<remind-form": 4 + len(EXTRA), "<remind-shift": 2, "<remind-short": 1}
    assert any(mid.startswith(f"<remind-shift.{thursday.id}.") and to == refused
               for mid, to in copies)  # the refused one, sent by round 3
    # every owed notice ended sent: none left in flight or failed by the races
    statuses = pub.query("SELECT state, COUNT(*) AS n FROM pub_mail WHERE kind LIKE "
                         "'remind%%' GROUP BY state")
    assert {r["state"]: int(r["n"]) for r in statuses} == {"SENT": 7 + len(EXTRA)}
    [tries] = pub.query("SELECT attempts FROM pub_mail WHERE about = %s AND recipient = "
                        "(SELECT 'tender:' || id FROM pub_tenders WHERE email = %s)",
                        [f"shift:{thursday.id}", refused])
    refusals = [m for m in smtp.received if not m.accepted and refused in m.rcpt_tos]
    assert int(tries["attempts"]) == failed_rounds[1] + 1  # each claim one try, at SMTP
    assert len(refusals) <= failed_rounds[1]


@pytest.mark.parametrize("db_url", [pytest.param("postgres", marks=pytest.mark.postgres),
                                    "sqlite"], indirect=True)
def test_racing_tickers_tell_each_reminded_tender_a_moved_deadline_once(
        pub: Pub, db_url: str, smtp: SmtpTestServer) -> None:
    """Issue 29, item 2: every tender reminded of the form's deadline, which the operator
    then extends, is told the new deadline exactly once by several ticker processes
    released together, and not before the hour after the move is over."""
    team = [("ann", None), ("bob", None), ("cat", None), ("dan", None),
            *((name, None) for name in EXTRA)]
    crew(pub, *team)
    assert v2.open_form(pub, WEEK, now=NOW)
    row = pub.runs.get(WEEK)
    assert row is not None
    first = instant(row["deadline_at"])
    later = first + timedelta(days=2)
    moved = first - timedelta(hours=2)
    kids = tickers(db_url, smtp)
    with ExitStack() as running:
        for kid in kids:
            running.enter_context(kid)
        said = ticks_at_once(kids, first - timedelta(hours=24))  # the form's reminder
        assert all(s["code"] == 0 for s in said), said
        assert len(reminders(smtp)) == len(team)
        assert v2.extend(pub, WEEK, later, now=moved)
        for at in (moved + timedelta(minutes=30),  # the quiet hour: nothing
                   moved + timedelta(hours=1),  # over: each told the new deadline
                   moved + timedelta(hours=1, seconds=30),  # again at once: nothing more
                   later - timedelta(hours=24)):  # before the new deadline: nothing more
            said = ticks_at_once(kids, at)
            assert all(s["code"] == 0 for s in said), said
            if at == moved + timedelta(minutes=30):
                assert len(reminders(smtp)) == len(team)
    copies = sent_per_reminder(smtp)
    assert set(copies.values()) == {1}, copies  # each email once
    kinds = Counter(mid.split(".")[0] for mid, _ in copies)
    assert kinds == {"<remind-form": len(team), "<remind-moved": len(team)}
    told = Counter(to for mid, to in copies if mid.startswith("<remind-moved"))
    assert set(told.values()) == {1} and len(told) == len(team)
    statuses = pub.query("SELECT state, COUNT(*) AS n FROM pub_mail GROUP BY state")
    assert {r["state"]: int(r["n"]) for r in statuses} == {"SENT": 2 * len(team)}
