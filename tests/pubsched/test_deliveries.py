"""Owed mail (pubsched.deliveries, the mail machine) on SQLite (PostgreSQL where marked),
with a real SMTP server on loopback: once per person per thing, a rollback owes nothing, two
delivers at once send one, a refused email is retried by a later deliver (at most
MAX_ATTEMPTS tries), one of unknown fate is never re-sent (a sender that died mid-send
included), and a composer's None drops it. (Until issue 28 this was the notices outbox,
pubsched.notices.)"""

from __future__ import annotations

import io
import json
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pubsched.deliveries import outbox as notices
from pubsched.deliveries.deliver import Sender, deliver
from pubsched.deliveries.machine import MAILS
from pubsched.mail.compose import Outgoing
from pubsched.pub import Pub
from pubsched.tick import run as tick
from rowstate.cli import main
from support.pubs import NOW, OPERATOR, note_to_operator
from support.smtp_server import SmtpTestServer

KIND = "test_note"



def owe(pub: Pub, about: str, recipient: str = notices.OPERATOR) -> bool:
    with pub.atomic():
        return notices.owe(pub, KIND, about, recipient, week_of="2026-12-07", now=NOW)


def statuses(pub: Pub) -> dict[str, tuple[str, int]]:
    return {n.about: (n.status, n.attempts) for n in notices.listed(pub)}


def test_a_notice_is_owed_once_per_person_per_thing(pub: Pub) -> None:
    assert owe(pub, "a") is True
    assert owe(pub, "a") is False
    assert owe(pub, "a", notices.to_tender(1)) is True
    assert [(n.about, n.recipient, n.tender_id) for n in notices.listed(pub)] == [
        ("a", "operator", None), ("a", "tender:1", 1)]


def test_a_rolled_back_unit_owes_nothing(pub: Pub) -> None:
    with pytest.raises(RuntimeError), pub.atomic():
        notices.owe(pub, KIND, "gone", notices.OPERATOR, week_of=None, now=NOW)
        raise RuntimeError("the move that owed it failed")
    assert notices.listed(pub) == []


@pytest.mark.both_databases("the mail machine: owe, claim, send, finish")
def test_deliver_sends_each_owed_notice_once(pub: Pub, smtp: SmtpTestServer) -> None:
    owe(pub, "a")
    owe(pub, "b")
    first = deliver(pub, {KIND: note_to_operator}, NOW)
    again = deliver(pub, {KIND: note_to_operator}, NOW)
    assert [v.applied for v in first] == [True, True] and again == []
    assert sorted(str(m.message["Subject"]) for m in smtp.accepted) == ["note a", "note b"]
    assert statuses(pub) == {"a": ("sent", 1), "b": ("sent", 1)}


def test_kinds_without_a_composer_wait(pub: Pub, smtp: SmtpTestServer) -> None:
    owe(pub, "a")
    assert deliver(pub, {"other": note_to_operator}, NOW) == []
    assert statuses(pub) == {"a": ("pending", 0)}


@pytest.mark.both_databases("races: two delivers claim one email")
def test_two_delivers_at_once_send_one(pub: Pub, smtp: SmtpTestServer) -> None:
    for i in range(6):
        owe(pub, f"n{i}")
    start = threading.Barrier(2)
    results: list[Any] = []

    def run() -> None:
        start.wait()
        results.append(deliver(pub, {KIND: note_to_operator}, NOW))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(r) for r in results) == 6
    subjects = sorted(str(m.message["Subject"]) for m in smtp.accepted)
    assert subjects == sorted(f"note n{i}" for i in range(6))


def test_a_refused_notice_is_retried_after_its_wait_then_left_failed(
        pub: Pub, smtp: SmtpTestServer) -> None:
    owe(pub, "a")
    smtp.refuse_recipient(OPERATOR)
    first = deliver(pub, {KIND: note_to_operator}, NOW)
    assert not first[0].applied and first[0].failed
    assert statuses(pub) == {"a": ("failed", 1)}
    assert deliver(pub, {KIND: note_to_operator}, NOW + timedelta(seconds=59)) == []  # waiting
    at = NOW
    assert tick.not_delivered(first[0]).endswith("the next tick tries again")
    for tries in range(2, notices.MAX_ATTEMPTS + 1):  # a minute, two, four, eight
        at += notices.retry_wait(tries - 1)
        [tried] = deliver(pub, {KIND: note_to_operator}, at)
        assert statuses(pub) == {"a": ("failed", tries)}
    # the operator reads that it was the last try, not that a tick tries again
    assert "last of its 5 tries" in tick.not_delivered(tried)
    smtp.clear_faults()
    later = at + timedelta(days=1)
    assert deliver(pub, {KIND: note_to_operator}, later) == []  # it gave up: the operator sees it

    owe(pub, "b")
    smtp.refuse_recipient(OPERATOR)
    deliver(pub, {KIND: note_to_operator}, later)
    smtp.clear_faults()
    again = later + timedelta(minutes=1)
    assert [v.applied for v in deliver(pub, {KIND: note_to_operator}, again)] == [True]
    assert statuses(pub)["b"] == ("sent", 2)


@pytest.mark.both_databases("races: two delivers claim one retry")
def test_two_delivers_that_read_the_same_refused_notice_try_it_once(
        pub: Pub, smtp: SmtpTestServer) -> None:
    owe(pub, "a")
    smtp.refuse_recipient(OPERATOR)
    deliver(pub, {KIND: note_to_operator}, NOW)
    later = NOW + timedelta(minutes=5)
    pub.mail.fire_due(now=later)  # this ticker found its wait over...
    (seen,) = [m for m in notices.listed(pub) if m.state == "OWED"]
    deliver(pub, {KIND: note_to_operator}, later)  # ...the other ticker tried it meanwhile
    stale = pub.mail.claim(seen.key, "send", guards={"acting_at": None})
    assert not stale.claimed  # the stale read claims nothing
    assert statuses(pub) == {"a": ("failed", 2)}


def test_the_tick_tells_an_unknown_fate_from_a_refusal_by_the_state_not_the_text(
        pub: Pub, smtp: SmtpTestServer) -> None:
    owe(pub, "a")
    owe(pub, "b")
    smtp.refuse_recipient(OPERATOR)
    [refused, _] = deliver(pub, {KIND: note_to_operator}, NOW)
    assert "did not go through" in tick.not_delivered(refused)
    smtp.clear_faults()
    owe(pub, "c")
    smtp.drop_after_data()
    [unknown] = deliver(pub, {KIND: note_to_operator}, NOW)
    assert unknown.reason == "UNKNOWN"
    said = tick.not_delivered(replace(unknown, message="reworded"))
    assert said.startswith("an email may not have arrived")


@pytest.mark.both_databases("the unknown fate's finish")
def test_a_notice_of_unknown_fate_is_not_sent_again(pub: Pub, smtp: SmtpTestServer) -> None:
    owe(pub, "a")
    smtp.drop_after_data()
    out = deliver(pub, {KIND: note_to_operator}, NOW)
    assert not out[0].applied and "may not have arrived" in out[0].message
    smtp.clear_faults()
    assert deliver(pub, {KIND: note_to_operator}, NOW) == []
    [only] = notices.listed(pub)
    assert (only.status, only.attempts) == ("in_flight", 1) and only.error


@pytest.mark.both_databases("the drop's finish")
def test_a_composer_saying_none_drops_the_notice(pub: Pub, smtp: SmtpTestServer) -> None:
    owe(pub, "a")
    out = deliver(pub, {KIND: lambda p, n, now: None}, NOW)
    assert out[0].applied and "no longer needed" in out[0].message
    assert statuses(pub) == {"a": ("dropped", 1)} and smtp.accepted == []


@pytest.mark.both_databases("a failed try's timed retry")
def test_a_composer_not_ready_fails_the_try_and_it_is_retried(
        pub: Pub, smtp: SmtpTestServer) -> None:
    owe(pub, "a")

    def not_yet(p: Pub, n: notices.Mail, now: datetime) -> Outgoing:
        raise notices.NotSentYet("set PUBSCHED_OPERATOR_EMAIL")

    out = deliver(pub, {KIND: not_yet}, NOW)
    assert out[0].failed == "set PUBSCHED_OPERATOR_EMAIL"
    assert statuses(pub) == {"a": ("failed", 1)}
    assert deliver(pub, {KIND: note_to_operator}, NOW + timedelta(minutes=1))[0].applied


def _dead_sender(pub: Pub, *, handed: bool) -> Any:
    """A claim whose sender died, past its lease's TTL; ``handed``: after it marked the
    handover's start (the first byte of the data was about to go)."""
    dead = pub.mail.claim((KIND, "a", notices.OPERATOR), "send", by="tick")
    assert dead.claimed
    with pub.atomic() as tx:  # the sender is long gone: its lease is past its TTL
        tx.execute("UPDATE pub_mail SET acting_at = %s, handover_at = %s", [
            datetime.now(UTC) - timedelta(seconds=MAILS.lease.ttl + 5),  # type: ignore[union-attr]
            datetime.now(UTC) if handed else None])
    return dead


@pytest.mark.both_databases("a crash: the mail lease of a dead sender")
def test_a_sender_that_died_before_the_handover_leaves_it_to_be_sent_again(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """Killed between its claim and the handover's start (no mark): the mail server never
    had a byte of it, so the next deliver sends it, once; the dead sender finishes nothing."""
    owe(pub, "a")
    dead = pub.mail.claim((KIND, "a", notices.OPERATOR), "send", by="tick")
    assert deliver(pub, {KIND: note_to_operator}, NOW) == []  # a live lease: left to its sender
    pub.mail.release((KIND, "a", notices.OPERATOR), dead)
    dead = _dead_sender(pub, handed=False)
    assert [v.applied for v in deliver(pub, {KIND: note_to_operator}, NOW)] == [True]
    assert deliver(pub, {KIND: note_to_operator}, NOW) == [] and len(smtp.accepted) == 1
    assert statuses(pub) == {"a": ("sent", 1)}
    assert not pub.mail.finalize((KIND, "a", notices.OPERATOR), dead).applied
    history = [(e.edge, e.to_state) for e in pub.mail.history((KIND, "a", notices.OPERATOR))]
    assert history == [(None, "OWED"), ("send", "SENT")]


@pytest.mark.both_databases("a crash: the mail lease of a dead sender")
def test_a_sender_that_died_mid_handover_leaves_it_unknown_never_resent(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """Killed after the handover began (its mark committed) and before the server's answer:
    the next deliver takes it over only to record UNKNOWN, and never hands the email over
    again on its own; the operator's resend owes it anew."""
    owe(pub, "a")
    dead = _dead_sender(pub, handed=True)
    (lost,) = deliver(pub, {KIND: note_to_operator}, NOW)
    assert (lost.applied, lost.reason) == (False, "UNKNOWN")
    assert "may not have arrived" in lost.message
    assert deliver(pub, {KIND: note_to_operator}, NOW) == [] and smtp.accepted == []
    assert statuses(pub) == {"a": ("in_flight", 1)}
    # the dead sender's finalize is refused: its lease is gone
    assert not pub.mail.finalize((KIND, "a", notices.OPERATOR), dead).applied
    assert pub.mail.transition((KIND, "a", notices.OPERATOR), "OWED", by="operator:ops").applied
    assert [v.applied for v in deliver(pub, {KIND: note_to_operator}, NOW)] == [True]
    assert len(smtp.accepted) == 1
    history = [(e.edge, e.to_state, e.by) for e in pub.mail.history((KIND, "a",
                                                                      notices.OPERATOR))]
    assert history == [(None, "OWED", None), ("lose", "UNKNOWN", None),
                       ("resend", "OWED", "operator:ops"), ("send", "SENT", None)]
    [mark] = pub.query("SELECT handover_at FROM pub_mail")
    assert mark["handover_at"] is None  # the finish cleared it


@pytest.mark.both_databases("the handover mark fenced by the claim")
def test_a_sender_whose_claim_was_taken_over_hands_nothing_over(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """A sender paused past its lease (a zombie) and taken over: its handover mark is
    refused by the fence, so the message's data never goes (the server has nothing)."""
    owe(pub, "a")
    key = (KIND, "a", notices.OPERATOR)
    zombie = pub.mail.claim(key, "send", by="tick")
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_mail SET acting_at = %s", [datetime.now(UTC) - timedelta(
            seconds=MAILS.lease.ttl + 5)])  # type: ignore[union-attr]
    assert pub.mail.claim(key, "send", by="sweeper").claimed  # taken over
    row = pub.mail.get(key)
    assert row is not None
    with Sender(pub) as sender:
        verdict = sender.send(notices.Mail.of(row), zombie, note_to_operator, NOW)
    assert not verdict.applied and smtp.received == []
    assert verdict.failed == "the send took longer than its lease"  # its finish lost too
    [mark] = pub.query("SELECT acting_at, state, handover_at FROM pub_mail")
    assert mark["state"] == "OWED" and mark["acting_at"] is not None  # the sweeper's
    assert mark["handover_at"] is None


@pytest.mark.both_databases("rowstate inspect and stuck: PostgreSQL's own interval SQL")
def test_rowstate_inspect_and_stuck_read_the_mail(pub: Pub, db_url: str,
                                                  smtp: SmtpTestServer) -> None:
    """The operator's tools work on mail like on any machine: a send whose sender died is
    an expired lease that ``rowstate stuck`` lists (exit 3), ``inspect`` shows the row."""
    owe(pub, "a")
    assert pub.mail.claim((KIND, "a", notices.OPERATOR), "send").claimed
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_mail SET acting_at = %s", [datetime.now(UTC) - timedelta(
            seconds=MAILS.lease.ttl + 5)])  # type: ignore[union-attr]
    target = "pubsched.deliveries.machine:MAILS"
    out = io.StringIO()
    assert main(["stuck", db_url, target, "--json"], stdout=out, stderr=io.StringIO()) == 3
    report = json.loads(out.getvalue())
    assert [lease["key"] for lease in report["groups"]["expired_leases"]["rows"]] == [
        [KIND, "a", notices.OPERATOR]]
    out = io.StringIO()
    key = json.dumps([KIND, "a", notices.OPERATOR])
    assert main(["inspect", db_url, target, key], stdout=out, stderr=io.StringIO()) == 0
    assert "OWED" in out.getvalue() and "EXPIRED" in out.getvalue()
