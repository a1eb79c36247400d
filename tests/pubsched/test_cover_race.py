"""Cover requests under real concurrency and real crashes (issue 19's "Done when").

* Two ``pubsched cover take`` **processes** for one request on PostgreSQL, released at
  once: one applies, the other is told it was taken (exit 3, COVER_TAKEN); the roster
  moves once; each email is sent once though both commands deliver after their commit.
* A take SIGKILLed between its commit and its emails (the child has committed the take and
  waits to be killed before delivering), then a tick: each email once, none lost.
* A ``cover take`` command SIGKILLed while the mail server holds its first email (the
  data sent, no answer): that email's fate is unknown, so it is never sent again; the
  tick sends the other two, once.
* Asks at once (threads, each with its own store, on PostgreSQL): each request gets a
  number of its own, and one tender's two asks for one shift open one request; ticks at
  once end a request once and mail each of its notes once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pubsched import covers
from pubsched.deliveries import outbox as notices
from pubsched.deliveries.machine import SEND_TTL
from pubsched.deliveries.resend import resend, unknown
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.tick.run import EVERY_COMPOSER, tick
from support.pub_covers import FRI, SAT, THU, cover_mail, email, roster, sent_week
from support.pubs import NOW, OPERATOR, WEEK, mail_settings, make_pub
from support.smtp_server import SmtpTestServer

TESTS = Path(__file__).resolve().parent.parent
LATER = "2026-12-01T12:00:00Z"  # after the send (NOW), before Thursday's shift

# the real command line, in a process of its own, run when the test says "go"
COMMAND_IN_A_CHILD = """
import io, json, sys
from pubsched.cli.dispatch import run
print("ready", flush=True)
sys.stdin.readline()
out, err = io.StringIO(), io.StringIO()
code = run(sys.argv[1:], stdout=out, stderr=err)
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}), flush=True)
"""

# the take committed, then stopped before its emails, waiting for the SIGKILL
TAKE_THEN_WAIT = """
import os, sys, time
sys.path[:0] = [{tests!r}]
from datetime import datetime
from pubsched import covers
from pubsched.db import open_store
from pubsched.mail.settings import load_mail_settings
from pubsched.config import Config
from pubsched.pub import Pub
url, cover_id, taker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pub = Pub(open_store(url), Config(db_url=url, mail=load_mail_settings(dict(os.environ))))
got = covers.take(pub, cover_id, taker, now=datetime.fromisoformat({later!r}))
print("committed" if got.applied else got.message, flush=True)
time.sleep(120)
"""


# the real ``cover take`` command, stopped after its first email is claimed (composed,
# its mail lease committed) and before a byte of it goes to the mail server: issue 29's
# point, where the red team's SIGKILL left the email "in flight" for good
TAKE_STOPPED_BEFORE_THE_HANDOVER = """
import sys, time
from pubsched.cli.dispatch import run
from pubsched.deliveries import deliver
def stop(self, outgoing, handing_over=None):
    print("claimed " + outgoing.envelope_to, flush=True)
    time.sleep(120)
deliver.Sender.hand_over = stop
run(sys.argv[1:])
"""


def _env(smtp: SmtpTestServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")}
    return {**env, **smtp.env(PUBSCHED_MAIL_FROM="pub@pub.test",
                              PUBSCHED_OPERATOR_EMAIL=OPERATOR, PUBSCHED_SMTP_TIMEOUT="30")}


def _command(url: str, smtp: SmtpTestServer, *argv: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", COMMAND_IN_A_CHILD, "--db", url, *argv],
                             env=_env(smtp), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


def _asked(pub: Pub) -> tuple[list[int], int]:
    """The sent week, Ann's request for Thursday, its offers and note delivered."""
    ids = sent_week(pub)
    asked = covers.ask(pub, WEEK, ids[THU], email("ann"), now=NOW)
    assert asked.applied
    assert all(v.applied for v in covers.deliver(pub, NOW))
    return ids, int(asked.detail["cover_id"])


def _taken_mail(smtp: SmtpTestServer, *, received: bool = False) -> Counter[str]:
    """How many "taken" emails reached the server per recipient (``received``: whatever
    its answer; else accepted only)."""
    got = smtp.received if received else smtp.accepted
    return Counter(m.rcpt_tos[0] for m in got if any(
        word in str(m.message["Subject"]) for word in ("is covered", "you are working",
                                                       " covers ")))


@pytest.mark.postgres
def test_two_take_processes_at_once_one_wins_the_roster_moves_once(
        pg_db_url: str, smtp: SmtpTestServer) -> None:
    from pubsched.engines.flags import set_v2

    pub = make_pub(pg_db_url, mail_settings(smtp))
    try:
        set_v2(pub, True, now=NOW)
        ids, cover = _asked(pub)
        children = {who: _command(pg_db_url, smtp, "cover", "take", str(cover), email(who),
                                  "--now", LATER) for who in ("cat", "dan")}
        for child in children.values():  # released together
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outs = {who: json.loads(c.communicate(timeout=120)[0].splitlines()[-1])
                for who, c in children.items()}
        assert sorted(o["code"] for o in outs.values()) == [0, 3], outs
        [winner] = [who for who, o in outs.items() if o["code"] == 0]
        [loser] = [who for who, o in outs.items() if o["code"] == 3]
        assert "refused (COVER_TAKEN)" in outs[loser]["err"]
        assert f"taken by {winner.title()}" in outs[loser]["err"]
        assert roster(pub)[ids[THU]] == sorted(["Bob", winner.title()])
        rows = pub.query("SELECT tender_id FROM pub_assignments WHERE shift_id = %s",
                         [ids[THU]])
        assert len(rows) == 2
        got = covers.get(pub, cover)
        assert got is not None and got.taker_email == email(winner)
        assert [e.edge for e in pub.covers.history(cover)] == [None, "take"]
        assert _taken_mail(smtp) == Counter({email("ann"): 1, email(winner): 1, OPERATOR: 1})
        tick(pub, NOW)  # nothing left owed: still once each
        assert _taken_mail(smtp) == Counter({email("ann"): 1, email(winner): 1, OPERATOR: 1})
    finally:
        pub.close()


@pytest.mark.both_databases("a crash after the commit")
def test_a_take_killed_after_its_commit_sends_each_email_once_at_the_next_tick(
        pub: Pub, db_url: str, smtp: SmtpTestServer) -> None:
    ids, cover = _asked(pub)
    child = subprocess.Popen(
        [sys.executable, "-c", TAKE_THEN_WAIT.format(tests=str(TESTS), later=LATER), db_url,
         str(cover), email("dan")],
        env=_env(smtp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "committed", child.stderr
    os.kill(child.pid, signal.SIGKILL)  # between the take's commit and its emails
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert roster(pub)[ids[THU]] == ["Bob", "Dan"]  # the take stands
    owed = {n.recipient: n.status for n in notices.listed(pub, about=f"cover:{cover}")
            if n.kind == "cover_taken"}
    assert set(owed.values()) == {"pending"} and len(owed) == 3
    assert _taken_mail(smtp) == Counter()
    tick(pub, NOW)
    tick(pub, NOW)
    assert _taken_mail(smtp, received=True) == Counter(
        {email("ann"): 1, email("dan"): 1, OPERATOR: 1})


@pytest.mark.both_databases("a crash while the mail lease is held")
def test_a_take_command_killed_while_its_first_email_hangs_never_sends_it_twice(
        pub: Pub, db_url: str, smtp: SmtpTestServer) -> None:
    ids, cover = _asked(pub)
    smtp.hang_after_data(for_recipient=email("ann"))  # the asker's email is the first
    child = _command(db_url, smtp, "cover", "take", str(cover), email("dan"), "--now", LATER)
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()
    until = time.monotonic() + 60
    while not _taken_mail(smtp, received=True)[email("ann")]:
        assert time.monotonic() < until and child.poll() is None, child.stderr
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # Ann's data is out, no answer: its fate unknown
    child.communicate(timeout=30)
    smtp.clear_faults()
    assert roster(pub)[ids[THU]] == ["Bob", "Dan"]
    tick(pub, NOW)
    tick(pub, NOW)
    assert _taken_mail(smtp, received=True) == Counter(
        {email("ann"): 1, email("dan"): 1, OPERATOR: 1})
    [ann] = [n for n in notices.listed(pub, about=f"cover:{cover}")
             if n.kind == "cover_taken"
             and n.recipient == notices.to_tender(tenders.get(pub, email("ann")).id)]
    assert ann.status == "in_flight"  # shown as uncertain, not re-sent
    assert cover_mail(smtp, email("dan"))  # the taker's arrived, from the tick
    # its sender had marked the handover's start: once the dead sender's lease is past,
    # the tick records it as of unknown fate and still does not send it again
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_mail SET acting_at = %s WHERE acting_at IS NOT NULL",
                   [datetime.now(UTC) - timedelta(seconds=SEND_TTL + 5)])
    tick(pub, NOW)
    assert _taken_mail(smtp, received=True)[email("ann")] == 1
    [lost] = unknown(pub)
    assert (lost.kind, lost.to_address) == ("cover_taken", email("ann"))
    # the operator's resend sends it again, once
    assert resend(pub, lost.id, EVERY_COMPOSER, NOW).applied
    assert _taken_mail(smtp, received=True)[email("ann")] == 2 and unknown(pub) == []


@pytest.mark.both_databases("a crash between the mail's claim and its handover")
def test_a_take_killed_between_its_email_claim_and_the_handover_sends_it_once_later(
        pub: Pub, db_url: str, smtp: SmtpTestServer) -> None:
    """Issue 29, item 13: the command is SIGKILLed holding the asker's email's claim, no
    byte of it sent. While the claim's lease is live the tick leaves it to its sender; once
    the lease is past (the sender is dead), the tick sends it, once, with the others."""
    ids, cover = _asked(pub)
    child = subprocess.Popen(
        [sys.executable, "-c", TAKE_STOPPED_BEFORE_THE_HANDOVER, "--db", db_url, "cover",
         "take", str(cover), email("dan"), "--now", LATER],
        env=_env(smtp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        said = child.stdout.readline()  # the take's own line, then the stop's
        assert said.startswith("Request 1: Dan takes"), said
        assert child.stdout.readline().strip() == f"claimed {email('ann')}"
    finally:
        os.kill(child.pid, signal.SIGKILL)  # the claim committed, nothing handed over
        child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert roster(pub)[ids[THU]] == ["Bob", "Dan"]
    ann = notices.to_tender(tenders.get(pub, email("ann")).id)
    tick(pub, NOW)  # the dead sender's lease is still live: the others go, Ann's waits
    assert _taken_mail(smtp, received=True) == Counter({email("dan"): 1, OPERATOR: 1})
    with pub.atomic() as tx:  # the lease's TTL passes (the engine ages it by the db clock)
        tx.execute("UPDATE pub_mail SET acting_at = %s WHERE recipient = %s AND kind = %s",
                   [datetime.now(UTC) - timedelta(seconds=SEND_TTL + 5), ann, "cover_taken"])
    tick(pub, NOW)
    tick(pub, NOW)
    assert _taken_mail(smtp, received=True) == Counter(
        {email("ann"): 1, email("dan"): 1, OPERATOR: 1})
    [mine] = [n for n in notices.listed(pub, about=f"cover:{cover}")
              if n.kind == "cover_taken" and n.recipient == ann]
    assert (mine.status, mine.attempts) == ("sent", 1)


def _at_once(pubs: list[Pub], call: Any) -> list[Any]:
    """``call(pub, i)`` in one thread per pub (each its own store), released together."""
    barrier = threading.Barrier(len(pubs))
    out: list[Any] = [None] * len(pubs)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            out[i] = call(pubs[i], i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(pubs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


@pytest.mark.postgres
def test_asks_at_once_get_numbers_of_their_own_and_one_open_request_each(
        pg_db_url: str, smtp: SmtpTestServer) -> None:
    from pubsched.engines.flags import set_v2

    pubs = [make_pub(pg_db_url, mail_settings(smtp)) for _ in range(6)]
    try:
        set_v2(pubs[0], True, now=NOW)
        ids = sent_week(pubs[0])
        # Ann twice for Thursday (one of them is told it is asked already), Bob Thursday,
        # Cat and Dan Friday, Eve Saturday: all at once
        who = [("ann", THU), ("ann", THU), ("bob", THU), ("cat", FRI), ("dan", FRI),
               ("eve", SAT)]
        got = _at_once(pubs, lambda p, i: covers.ask(p, WEEK, ids[who[i][1]],
                                                      email(who[i][0]), now=NOW))
        applied = [g for g in got if g.applied]
        assert len(applied) == 5 and sorted(g.detail["cover_id"] for g in applied) == [
            1, 2, 3, 4, 5]
        [refused] = [g for g in got if not g.applied]
        assert refused.reason == "ALREADY_ASKED"
        assert [(c.id, c.state) for c in covers.listed(pubs[0])] == [
            (i, "OPEN") for i in range(1, 6)]
    finally:
        for p in pubs:
            p.close()


@pytest.mark.postgres
def test_ticks_at_once_end_a_request_once_and_mail_each_once(
        pg_db_url: str, smtp: SmtpTestServer) -> None:
    from pubsched.engines.flags import set_v2

    pubs = [make_pub(pg_db_url, mail_settings(smtp)) for _ in range(3)]
    try:
        set_v2(pubs[0], True, now=NOW)
        ids, cover = _asked(pubs[0])
        start = covers.existing(pubs[0], cover).starts_at
        said = _at_once(pubs, lambda p, i: tick(p, start))
        ended = [v for out in said for v in out if v.detail.get("cover_id") == cover]
        assert len(ended) == 1  # one tick ended it
        expired = Counter(m.rcpt_tos[0] for m in smtp.accepted
                          if "nobody covered" in str(m.message["Subject"]))
        assert expired == Counter({email("ann"): 1, OPERATOR: 1})
        assert roster(pubs[0])[ids[THU]] == ["Ann", "Bob"]
    finally:
        for p in pubs:
            p.close()
