"""Mail of unknown fate and the operator's resend (issue 29, item 13), with a real SMTP
server on loopback: every kind of mail is listed (`pubsched mail unknown`, /admin/mail)
and resent (`pubsched mail resend ID`, the page's Resend button), from what is true now;
a resend never sends twice, with two resends and a tick at once on PostgreSQL (threads,
each with its own store)."""

from __future__ import annotations

import html
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from pubsched import covers
from pubsched.deliveries import outbox
from pubsched.deliveries.deliver import deliver
from pubsched.deliveries.machine import SEND_TTL
from pubsched.deliveries.resend import resend, unknown
from pubsched.engines import actions
from pubsched.people import invite
from pubsched.pub import Pub
from pubsched.tick.run import EVERY_COMPOSER, tick
from pubsched.web.app import create_app
from pubsched.week.view import week_show
from support.pub_cli import Cli, use_env
from support.pub_covers import THU, email, sent_week
from support.pub_web import login, web_settings
from support.pubs import NOW, OPERATOR, WEEK, mail_settings, make_pub, note_to_operator
from support.smtp_server import SmtpTestServer


def _three_of_unknown_fate(pub: Pub, smtp: SmtpTestServer) -> list[int]:
    """The schedule to Ann, the operator's note of her ask for cover, and an invitation
    to Bob: each handed over and never answered (the connection lost after the data)."""
    smtp.drop_after_data(for_recipient=email("ann"))
    ids = sent_week(pub)
    smtp.clear_faults()
    smtp.drop_after_data(for_recipient=OPERATOR)
    assert covers.ask(pub, WEEK, ids[THU], email("ann"), now=NOW).applied
    covers.deliver(pub, NOW)
    smtp.clear_faults()
    smtp.drop_after_data(for_recipient=email("bob"))
    assert not invite.invite(pub, email("bob"), now=NOW).applied
    smtp.clear_faults()
    return ids


def _got(smtp: SmtpTestServer) -> Counter[str]:
    return Counter(m.rcpt_tos[0] for m in smtp.received)


def test_every_kind_of_mail_of_unknown_fate_is_listed_and_resent_by_the_cli(
        pub: Pub, db_url: str, smtp: SmtpTestServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _three_of_unknown_fate(pub, smtp)
    use_env(monkeypatch, smtp)
    monkeypatch.setenv("PUBSCHED_OPERATOR_EMAIL", OPERATOR)  # the pub's, as it owed it
    cli = Cli(db_url, capsys)
    listed = cli.json("mail", "unknown")
    assert [(m["kind"], m["to"]) for m in listed] == [
        ("schedule", email("ann")), ("cover_asked", OPERATOR), ("invite", email("bob"))]
    assert all(m["subject"] and m["error"] for m in listed)
    table = cli.ok("mail", "unknown", "--now", NOW.isoformat()).out
    words = " ".join(table.split())
    assert "schedule" in words and "ann@pub.test" in words and "invitation" in words
    assert "Times are New York time" in words
    before = _got(smtp)
    for m in listed:
        said = cli.ok("mail", "resend", str(m["id"]), "--now", NOW.isoformat())
        assert "sent again" in said.out, said
    assert _got(smtp) - before == Counter({email("ann"): 1, OPERATOR: 1, email("bob"): 1})
    schedule = smtp.received[-3].message
    assert "schedule" in str(schedule["Subject"]).lower() or "shifts" in str(
        schedule["Subject"]).lower()
    assert "no email of unknown fate" in cli.ok("mail", "unknown").out
    again = cli("mail", "resend", str(listed[0]["id"]))
    assert again.code == 3 and "ALREADY_SENT" in again.err and "delivered" in again.err
    assert cli("mail", "resend", "999999").code == 2
    assert cli("mail", "resend", "x1").code == 2
    assert _got(smtp) - before == Counter({email("ann"): 1, OPERATOR: 1, email("bob"): 1})


def test_a_resend_of_mail_no_longer_true_drops_it(pub: Pub, smtp: SmtpTestServer) -> None:
    """A cover offer of unknown fate, resent after the cover was taken: not sent."""
    ids = sent_week(pub)
    smtp.drop_after_data(for_recipient=email("fay"))
    asked = covers.ask(pub, WEEK, ids[THU], email("ann"), now=NOW)
    covers.deliver(pub, NOW)
    smtp.clear_faults()
    [offer] = unknown(pub)
    assert offer.kind == "cover_offer"
    assert covers.take(pub, int(asked.detail["cover_id"]), email("gus"), now=NOW).applied
    before = len(smtp.received)
    said = resend(pub, offer.id, EVERY_COMPOSER, NOW)
    assert said.applied and "no longer needed" in said.message
    assert email("fay") not in [m.rcpt_tos[0] for m in smtp.received[before:]]
    assert unknown(pub) == []


KIND = "race_note"



def _at_once(pubs: list[Pub], lost_id: int) -> list[Any]:
    """Two resends of email ``lost_id`` and a tick's deliveries, one thread each (each
    pub its own store), released together."""
    barrier = threading.Barrier(3)
    out: list[Any] = [None] * 3
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            if i < 2:
                out[i] = resend(pubs[i], lost_id, {KIND: note_to_operator}, NOW)
            else:
                out[i] = deliver(pubs[i], {KIND: note_to_operator}, NOW)
        except BaseException as exc:  # pragma: no cover - shown by the assert
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return out


@pytest.mark.both_databases("two resends and a tick claim one email at once")
def test_two_resends_and_a_tick_at_once_send_it_once(db_url: str,
                                                     smtp: SmtpTestServer) -> None:
    pubs = [make_pub(db_url, mail_settings(smtp)) for _ in range(3)]
    try:
        for round_ in range(8):
            about = f"r{round_}"
            with pubs[0].atomic():
                outbox.owe(pubs[0], KIND, about, outbox.OPERATOR, week_of=None, now=NOW)
            smtp.drop_after_data()
            deliver(pubs[0], {KIND: note_to_operator}, NOW)
            smtp.clear_faults()
            [lost] = [m for m in unknown(pubs[0]) if m.about == about]
            out = _at_once(pubs, lost.id)
            sent = [m for m in smtp.accepted if str(m.message["Subject"]) == f"note {about}"]
            assert len(sent) == 1, (round_, out)  # the resend's, once
            assert sorted(v.applied for v in out[:2]) == [False, True], out
            [refused] = [v for v in out[:2] if not v.applied]
            assert refused.reason in ("RESEND_CLAIMED", "ALREADY_SENT"), refused
            assert out[2] == []  # the tick never sends mail of unknown fate
    finally:
        for p in pubs:
            p.close()


def test_the_mail_page_lists_it_and_its_resend_button_sends_it_once(
        db_url: str, smtp: SmtpTestServer) -> None:
    pub = make_pub(db_url, mail_settings(smtp), v2=True)
    try:
        _three_of_unknown_fate(pub, smtp)
        with TestClient(create_app(pub, web_settings(), clock=lambda: NOW),
                        base_url="https://testserver") as client:
            login(client)
            page = html.unescape(client.get("/admin/mail").text)
            ids = re.findall(r'data-resend="(\d+)"', page)
            assert len(ids) == 3
            assert "the week's schedule" in page and "Ann <ann@pub.test>" in page
            assert "invitation to their links" in page and '<a href="/admin/mail">Mail' in page
            before = _got(smtp)
            answer = client.post(f"/admin/mail/{ids[0]}/resend", follow_redirects=True)
            assert answer.status_code == 200
            text = html.unescape(answer.text)
            assert "sent again" in text and f'data-resend="{ids[0]}"' not in text
            assert _got(smtp) - before == Counter({email("ann"): 1})
            again = html.unescape(client.post(f"/admin/mail/{ids[0]}/resend",
                                              follow_redirects=True).text)
            assert "nothing to resend" in again
            for bad in ("abc", "9" * 20):  # no email has such a number: no such page
                reply = client.post(f"/admin/mail/{bad}/resend", follow_redirects=True)
                assert reply.status_code == 404
                assert "No such page" in html.unescape(reply.text)
            reply = client.post("/admin/mail/999999/resend", follow_redirects=True)
            assert reply.status_code == 200
            assert "no email number 999999" in html.unescape(reply.text)
            assert _got(smtp) - before == Counter({email("ann"): 1})
    finally:
        pub.close()


# the real ``week send`` command, stopped at its second recipient's handover (its email
# claimed, not a byte of it sent), for the SIGKILL
SEND_STOPPED_BEFORE_THE_SECOND_HANDOVER = """
import sys, time
from pubsched.cli.dispatch import run
from pubsched.deliveries import deliver
real, calls = deliver.Sender.hand_over, []
def stop(self, outgoing, handing_over=None):
    calls.append(outgoing)
    if len(calls) == 2:
        print("claimed " + outgoing.envelope_to, flush=True)
        time.sleep(120)
    return real(self, outgoing, handing_over)
deliver.Sender.hand_over = stop
run(sys.argv[1:])
"""


@pytest.mark.both_databases("a send killed holding a recipient's claim")
def test_a_send_killed_before_a_handover_whose_retry_ends_sent_leaves_it_to_the_tick(
        pub: Pub, db_url: str, smtp: SmtpTestServer) -> None:
    """The send dies holding Bob's claim; its retry comes once the week's send lease is
    past but while Bob's claim is still live, so it counts him uncertain and ends SENT.
    Once his claim is past too, the tick sends him the schedule, once."""
    sent_week(pub, send=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUBSCHED_")}
    env.update(smtp.env(PUBSCHED_MAIL_FROM="pub@pub.test", PUBSCHED_OPERATOR_EMAIL=OPERATOR))
    child = subprocess.Popen(
        [sys.executable, "-c", SEND_STOPPED_BEFORE_THE_SECOND_HANDOVER, "--db", db_url,
         "week", "send", WEEK, "--now", NOW.isoformat()],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == f"claimed {email('bob')}"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)
    assert _got(smtp) == Counter({email("ann"): 1})
    old = datetime.now(UTC) - timedelta(seconds=SEND_TTL + 5)
    with pub.atomic() as tx:  # the week's send lease is past; Bob's claim is not yet
        tx.execute("UPDATE pub_schedule_runs SET acting_at = %s WHERE week_of = %s",
                   [old, WEEK])
    retried = actions.perform(pub, "send", WEEK, now=NOW)
    assert retried.applied and retried.detail["uncertain"] == [email("bob")], retried
    assert _got(smtp) == Counter({p: 1 for p in map(email, ("ann", "cat", "dan", "eve"))})
    tick(pub, NOW)  # Bob's claim is still live: left to its (dead) sender
    assert email("bob") not in _got(smtp)
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_mail SET acting_at = %s WHERE acting_at IS NOT NULL", [old])
    tick(pub, NOW)
    tick(pub, NOW)
    assert _got(smtp) == Counter({p: 1 for p in map(email, ("ann", "bob", "cat", "dan",
                                                            "eve"))})
    shown = {d["email"]: d["status"] for d in week_show(pub, WEEK)["deliveries"]}
    assert shown[email("bob")] == "sent" and set(shown.values()) == {"sent"}
