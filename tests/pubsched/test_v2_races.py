"""The seed's races on the v2 engine, with real threads and processes: a double-clicked
send from two processes (one email per tender), a send SIGKILLed mid-way (the lease
reclaimed after its TTL by send only; the in-flight recipient uncertain and never re-sent;
the rest sent once), a zombie generate whose lease was reclaimed (its assignments never
land), submissions racing the close (each lands before the close or is refused)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import rowstate
from pubsched.engines import v2
from pubsched.pub import Pub
from pubsched.week import generate, submissions
from pubsched.week import runs as weeks
from pubsched.week.view import week_show
from support.pubs import NOW, WEEK, crew, mail_settings, make_pub
from support.smtp_server import SmtpTestServer

HERE = Path(__file__).resolve().parent
SEND_IN_A_CHILD = """
import json, sys
sys.path[:0] = [{tests!r}]
from datetime import datetime
from support.pubs import NOW, WEEK
from pubsched.engines import v2
from pubsched.config import Config
from pubsched.pub import Pub
from pubsched.db import open_store
from pubsched.mail.settings import load_mail_settings
import os
mail = load_mail_settings(dict(os.environ))
pub = Pub(open_store(sys.argv[1]), Config(db_url=sys.argv[1], mail=mail))
got = v2.send(pub, WEEK, now=NOW, holder=sys.argv[2])
print(json.dumps({{"applied": got.applied, "reason": got.reason, "failed": got.failed}}))
pub.close()
"""


def _child(url: str, smtp: SmtpTestServer, holder: str) -> subprocess.Popen[str]:
    env = {**os.environ, **smtp.env(PUBSCHED_MAIL_FROM="pub@pub.test",
                                    PUBSCHED_OPERATOR_EMAIL="boss@pub.test",
                                    PUBSCHED_SMTP_TIMEOUT="30")}
    script = SEND_IN_A_CHILD.format(tests=str(HERE.parent))  # the support helpers
    return subprocess.Popen([sys.executable, "-c", script, url, holder], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _approved(pub: Pub, *names: str) -> None:
    crew(pub, *((n, None) for n in names))
    assert v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    for n in names:
        assert submissions.submit(pub, WEEK, f"{n}@pub.test", ids, now=NOW)
    assert v2.close(pub, WEEK, now=NOW) and v2.generate(pub, WEEK, now=NOW)
    assert v2.approve(pub, WEEK, now=NOW)


def _age_lease(pub: Pub, seconds: float) -> None:
    with pub.atomic() as tx:
        row = tx.execute("SELECT acting_at FROM pub_schedule_runs WHERE week_of = %s",
                         [WEEK])[0]
        tx.execute("UPDATE pub_schedule_runs SET acting_at = %s WHERE week_of = %s",
                   [row["acting_at"] - timedelta(seconds=seconds), WEEK])


@pytest.mark.both_databases("races: two processes take the send lease")
def test_a_double_clicked_send_from_two_processes_mails_each_tender_once(
        pub: Pub, smtp: SmtpTestServer, db_url: str) -> None:
    _approved(pub, "ann", "bob", "cy")
    children = [_child(db_url, smtp, f"click-{i}") for i in range(2)]
    outs = [json.loads(c.communicate(timeout=120)[0]) for c in children]
    assert sorted(o["applied"] for o in outs) == [False, True], outs
    loser = next(o for o in outs if not o["applied"])
    assert loser["reason"] in ("LEASE_HELD", "STATE_MISMATCH")
    rcpts = sorted(m.rcpt_tos[0] for m in smtp.accepted)
    assert rcpts == ["ann@pub.test", "bob@pub.test", "cy@pub.test"]  # once each
    assert week_show(pub, WEEK)["state"] == "SENT"


@pytest.mark.both_databases("a crash: the send lease reclaimed after its TTL")
def test_a_send_killed_midway_is_reclaimed_by_send_only_and_never_mails_twice(
        pub: Pub, smtp: SmtpTestServer, db_url: str) -> None:
    _approved(pub, "ann", "bob", "cy")
    smtp.hang_after_data(for_recipient="bob@pub.test")
    child = _child(db_url, smtp, "doomed")
    until = time.monotonic() + 60
    while not any("bob@pub.test" in m.rcpt_tos for m in smtp.received):
        assert time.monotonic() < until and child.poll() is None, child.stderr
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # bob's data is out; his fate is unknown
    child.communicate(timeout=30)  # reaped, its pipes closed
    smtp.clear_faults()
    statuses = {d["email"]: d["status"] for d in week_show(pub, WEEK)["deliveries"]}
    assert statuses == {"ann@pub.test": "sent", "bob@pub.test": "in_flight"}
    assert v2.send(pub, WEEK, now=NOW).reason == "LEASE_HELD"  # live until its TTL
    _age_lease(pub, 700)  # the TTL passes
    claim = pub.runs.claim(WEEK, "generate")  # another kind may not take it over
    assert (claim.claimed, claim.reason) == (False, "STATE_MISMATCH")
    resumed = v2.send(pub, WEEK, now=NOW)
    assert resumed.applied and week_show(pub, WEEK)["state"] == "SENT", resumed.message
    assert resumed.detail["uncertain"] == ["bob@pub.test"]
    received = [m.rcpt_tos[0] for m in smtp.received]
    assert sorted(received) == ["ann@pub.test", "bob@pub.test", "cy@pub.test"]  # none twice
    statuses = {d["email"]: d["status"] for d in week_show(pub, WEEK)["deliveries"]}
    assert statuses["bob@pub.test"] == "in_flight"  # shown as uncertain, not re-sent


@pytest.mark.both_databases("a lease reclaimed under a zombie")
def test_a_zombie_generate_whose_lease_was_reclaimed_writes_no_assignment(pub: Pub) -> None:
    crew(pub, ("ann", None), ("bob", None))
    assert v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    submissions.submit(pub, WEEK, "ann@pub.test", ids, now=NOW)
    assert v2.close(pub, WEEK, now=NOW)
    zombie = pub.runs.claim(WEEK, "generate", holder="zombie")
    assert zombie.claimed
    _age_lease(pub, 700)  # the zombie pauses past its TTL...
    second = v2.generate(pub, WEEK, now=NOW, holder="second")  # ...and is taken over
    assert second.applied
    landed = generate.assignments(pub, WEEK)
    with pytest.raises(rowstate.UnitRefusedError) as caught:  # the zombie wakes and writes
        generate.generate_body(pub, WEEK, NOW, lambda: pub.runs.atomic(fence=zombie))
    assert caught.value.reason == "LEASE_LOST"
    assert generate.assignments(pub, WEEK) == landed
    assert not pub.runs.finalize(WEEK, zombie).applied


@pytest.mark.both_databases("races: submissions against the close")
def test_submissions_racing_the_close_land_before_it_or_are_refused(
        pub: Pub, smtp: SmtpTestServer, db_url: str) -> None:
    names = [f"t{i}" for i in range(6)]
    crew(pub, *((n, None) for n in names))
    assert v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    others = [make_pub(db_url, mail_settings(smtp)) for _ in names]
    results: dict[str, Any] = {}
    barrier = threading.Barrier(len(names) + 1)

    def submit(name: str, who: Pub) -> None:
        barrier.wait(10)  # each answer's clock reads later than the close's
        results[name] = submissions.submit(who, WEEK, f"{name}@pub.test", ids,
                                           now=NOW + timedelta(seconds=1 + names.index(name)))

    def close() -> None:
        barrier.wait(10)
        results["close"] = v2.close(pub, WEEK, now=NOW)

    threads = [threading.Thread(target=submit, args=(n, o)) for n, o in zip(names, others,
                                                                             strict=True)]
    threads.append(threading.Thread(target=close))
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for o in others:
            o.close()
    assert results["close"].applied
    stored = {s["email"] for s in submissions.of_week(pub, WEEK)}
    for n in names:
        got = results[n]
        assert got.applied == (f"{n}@pub.test" in stored), (n, got)
        if not got.applied:  # after the close, or while its lease was held
            assert got.reason in ("FORM_CLOSED", "LEASE_HELD"), got
    late = submissions.submit(pub, WEEK, "t0@pub.test", ids[:1], now=NOW)
    assert (late.applied, late.reason) == (False, "FORM_CLOSED")
    assert _stored_after_close(pub) == []


def _stored_after_close(pub: Pub) -> list[int]:
    """The tenders whose stored answer is stamped after the week's ``closed_at``."""
    from pubsched.db.instants import instant

    closed = instant(pub.query("SELECT closed_at FROM pub_schedule_runs WHERE week_of = %s",
                               [WEEK])[0]["closed_at"])
    return [int(r["tender_id"]) for r in pub.query(
        "SELECT tender_id, updated_at FROM pub_availability WHERE week_of = %s", [WEEK])
        if instant(r["updated_at"]) > closed]


@pytest.mark.parametrize("by", ["operator", "tick"])
def test_the_close_is_stamped_no_earlier_than_the_last_answer_it_let_in(
        pub: Pub, by: str) -> None:
    """An answer reads its clock, then holds the form; a close that read its clock earlier
    waits for it. The close's stamp is then the answer's time, not its own: no answer is
    stored after the form closed (the deadline rush's check, bench/pubsched.py)."""
    from pubsched.db.instants import instant

    crew(pub, ("ann", None), ("bob", None))
    assert v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    row = pub.runs.get(WEEK)
    assert row is not None
    close_at = instant(row["deadline_at"]) + timedelta(minutes=1)
    answered = close_at + timedelta(seconds=7)  # read before the close, committed first
    assert submissions.submit(pub, WEEK, "ann@pub.test", ids, now=answered)
    if by == "tick":
        assert weeks.set_autopilot(pub, WEEK, True)
        assert [v.message for v in v2.v2_tick(pub, close_at) if v.applied] == [
            f"tick: {WEEK} close"]
    else:
        assert v2.close(pub, WEEK, now=close_at)
    closed = pub.query("SELECT closed_at FROM pub_schedule_runs WHERE week_of = %s",
                       [WEEK])[0]["closed_at"]
    assert instant(closed) == answered
    assert _stored_after_close(pub) == []


@pytest.mark.both_databases("races: two resends at once")
def test_two_resends_at_once_mail_the_uncertain_tender_once(
        pub: Pub, smtp: SmtpTestServer, db_url: str) -> None:
    """Issue 17 item 6: two operators (two instances) resend the same uncertain recipient at
    once: the claim is a compare-and-set on the delivery row, so one email goes out. The
    server holds the winner's data unanswered (a 1 s timeout), so the other resend runs
    while the first is still handing over."""
    from pubsched.engines.actions import perform
    from pubsched.mail.settings import load_mail_settings

    _approved(pub, "ann", "bob")
    smtp.drop_after_data(for_recipient="ann@pub.test")
    assert v2.send(pub, WEEK, now=NOW).applied  # ann uncertain, the week SENT
    assert len(smtp.accepted_for("ann@pub.test")) == 0
    smtp.clear_faults()
    smtp.hang_after_data(for_recipient="ann@pub.test")
    mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@pub.test",
                                       PUBSCHED_SMTP_TIMEOUT="1"))
    operators = [make_pub(db_url, mail) for _ in range(2)]
    barrier = threading.Barrier(len(operators))
    results: list[Any] = []

    def resend(who: Pub) -> None:
        barrier.wait(10)
        results.append(perform(who, "resend", WEEK, now=NOW, email="ann@pub.test"))

    threads = [threading.Thread(target=resend, args=(o,)) for o in operators]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for o in operators:
            o.close()
    handed = [m for m in smtp.received if m.rcpt_tos == ("ann@pub.test",)]
    assert len(handed) == 2, results  # the first send's and ONE resend's
    assert sorted(str(r.reason) for r in results) == ["None", "RESEND_CLAIMED"], results
    statuses = {d["email"]: d["status"] for d in week_show(pub, WEEK)["deliveries"]}
    assert statuses == {"ann@pub.test": "in_flight", "bob@pub.test": "sent"}
