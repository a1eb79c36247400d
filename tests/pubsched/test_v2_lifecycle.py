"""The v2 engine end to end on SQLite and real PostgreSQL, with a real SMTP server: the
seed's dress rehearsal (open -> extend -> close -> generate -> reopen -> regenerate ->
approve -> send) checking every email; held submissions; the fair picker over the database;
crash-safe mail (a refused recipient, a refused connection, a retry that sends once)."""

from __future__ import annotations

import email
from datetime import timedelta
from typing import Any

import icalendar
import pytest

from pubsched.deliveries.log import mail_log
from pubsched.engines import v2
from pubsched.machine import APPROVED, ASSIGNED, CLOSED, COLLECTING, DRAFT, SENT
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.verdicts import BadInput
from pubsched.week import runs as weeks
from pubsched.week import submissions
from pubsched.week.view import week_show
from support.pubs import NOW, OPERATOR, WEEK, crew, mail_settings, make_pub
from support.smtp_server import SmtpTestServer


def shift_ids(pub: Pub, week: str = WEEK) -> list[int]:
    return [s.id for s in weeks.shifts(pub, week)]


def state(pub: Pub, week: str = WEEK) -> str:
    return str(week_show(pub, week)["state"])


@pytest.mark.both_databases("the v2 week end to end")
def test_the_dress_rehearsal_runs_the_whole_lifecycle_and_mails_each_tender_once(
        pub: Pub, smtp: SmtpTestServer) -> None:
    crew(pub, ("ann", None), ("bob", 1), ("cy", None), ("dee", 2))
    assert v2.open_form(pub, WEEK, now=NOW).applied
    assert state(pub) == COLLECTING
    thu, fri, sat = shift_ids(pub)
    assert submissions.submit(pub, WEEK, "ann@pub.test", [thu, fri, sat], now=NOW)
    assert submissions.submit(pub, WEEK, "BOB@pub.test", [fri, sat], now=NOW)  # any case
    assert submissions.submit(pub, WEEK, "cy@pub.test", [thu], max_shifts=1, now=NOW)
    later = week_show(pub, WEEK)["deadline_at"]
    extended = v2.extend(pub, WEEK, NOW + timedelta(days=3), now=NOW)
    assert extended.applied and week_show(pub, WEEK)["deadline_at"] != later
    assert v2.close(pub, WEEK, now=NOW).applied and state(pub) == CLOSED
    late = submissions.submit(pub, WEEK, "dee@pub.test", [sat], now=NOW)
    assert (late.applied, late.reason) == (False, "FORM_CLOSED")  # nothing stored
    generated = v2.generate(pub, WEEK, now=NOW)
    assert generated.applied and state(pub) == ASSIGNED
    first = week_show(pub, WEEK)
    assert first["unfilled"] == 6 - generated.detail["filled"]
    assert v2.reopen(pub, WEEK, now=NOW).applied and state(pub) == COLLECTING
    assert submissions.submit(pub, WEEK, "dee@pub.test", [thu, sat], now=NOW).applied
    assert v2.close(pub, WEEK, now=NOW).applied
    regenerated = v2.generate(pub, WEEK, now=NOW)
    assert regenerated.applied and regenerated.detail["filled"] == 6  # dee fills the gap
    shown = week_show(pub, WEEK)
    assert all(len(s["assigned"]) == 2 for s in shown["shifts"]) and shown["unfilled"] == 0
    assert sum("bob@pub.test" in s["assigned"] for s in shown["shifts"]) <= 1  # bob's max
    assert v2.approve(pub, WEEK, now=NOW).applied and state(pub) == APPROVED
    assert smtp.received == []  # nothing mailed before the send (opening sends nothing)

    sent = v2.send(pub, WEEK, now=NOW)
    assert sent.applied and state(pub) == SENT, sent.message
    assigned = {e for s in shown["shifts"] for e in s["assigned"]}
    got = {m.rcpt_tos[0] for m in smtp.accepted}
    assert got == assigned and len(smtp.accepted) == len(assigned)  # once each
    assert OPERATOR not in got
    for mail in smtp.accepted:
        message = email.message_from_bytes(mail.raw) if hasattr(mail, "raw") else mail.message
        cal = [p for p in message.walk() if p.get_content_type() == "text/calendar"]
        assert cal, "each schedule email carries the tender's shifts as iCalendar"
        events = icalendar.Calendar.from_ical(cal[0].get_payload(decode=True)).walk("VEVENT")
        mine = [s for s in shown["shifts"] if mail.rcpt_tos[0] in s["assigned"]]
        assert len(events) == len(mine)
    row = pub.runs.get(WEEK)
    assert row is not None and row["status"] == "sent" and row["sent_at"] is not None
    again = v2.send(pub, WEEK, now=NOW)
    assert (again.applied, again.reason) == (False, "STATE_MISMATCH")  # never re-sends
    assert len(smtp.accepted) == len(assigned)
    assert {d["status"] for d in week_show(pub, WEEK)["deliveries"]} == {"sent"}
    edges = [h["edge"] for h in week_show(pub, WEEK)["history"]]
    assert edges == ["create", "open", "extend", "close", "generate", "reopen_after_generate",
                     "close", "generate", "approve", "send"]


def test_regenerate_replaces_the_assignments_in_place(pub: Pub) -> None:
    crew(pub, ("ann", None), ("bob", None))
    assert v2.open_form(pub, WEEK, now=NOW)
    thu = shift_ids(pub)[0]
    submissions.submit(pub, WEEK, "ann@pub.test", [thu], now=NOW)
    assert v2.close(pub, WEEK, now=NOW) and v2.generate(pub, WEEK, now=NOW)
    assert week_show(pub, WEEK)["unfilled"] == 5
    tenders.deactivate(pub, "ann@pub.test")  # deactivated after generate
    again = v2.generate(pub, WEEK, now=NOW)  # ASSIGNED -> ASSIGNED: regenerate
    assert again.applied and state(pub) == ASSIGNED
    assert week_show(pub, WEEK)["unfilled"] == 6  # ann's shift is freed, nothing invented
    assert [h["edge"] for h in week_show(pub, WEEK)["history"]][-1] == "regenerate"


def test_a_refused_recipient_fails_the_send_and_a_retry_mails_only_them(
        pub: Pub, smtp: SmtpTestServer) -> None:
    _ready_to_send(pub)
    smtp.refuse_recipient("bob@pub.test")
    failed = v2.send(pub, WEEK, now=NOW)
    assert (failed.applied, failed.reason) == (False, "ACT_FAILED")
    assert failed.failed and "bob@pub.test" in failed.failed
    shown = week_show(pub, WEEK)
    assert shown["state"] == APPROVED and "bob@pub.test" in (shown["last_error"] or "")
    statuses = {d["email"]: d["status"] for d in shown["deliveries"]}
    assert statuses["bob@pub.test"] == "failed" and statuses["ann@pub.test"] == "sent"
    before = [m.rcpt_tos[0] for m in smtp.accepted]
    smtp.clear_faults()
    retried = v2.send(pub, WEEK, now=NOW)
    assert retried.applied and state(pub) == SENT
    after = [m.rcpt_tos[0] for m in smtp.accepted]
    assert after[len(before):] == ["bob@pub.test"]  # only the failed one again


def test_smtp_refusing_the_connection_keeps_the_run_approved_and_a_retry_sends_once(
        pub: Pub, smtp: SmtpTestServer) -> None:
    _ready_to_send(pub)
    smtp.stop()
    failed = v2.send(pub, WEEK, now=NOW)
    assert failed.reason == "ACT_FAILED" and state(pub) == APPROVED
    assert pub.runs.get(WEEK)["last_error"]  # type: ignore[index]
    smtp.start()
    assert v2.send(pub, WEEK, now=NOW).applied
    assert sorted(m.rcpt_tos[0] for m in smtp.accepted) == ["ann@pub.test", "bob@pub.test"]


def test_a_message_of_unknown_fate_stays_uncertain_and_is_not_resent(
        pub: Pub, smtp: SmtpTestServer) -> None:
    _ready_to_send(pub)
    smtp.drop_after_data(for_recipient="ann@pub.test")
    sent = v2.send(pub, WEEK, now=NOW)
    assert sent.applied, sent.message  # nobody refused: the run is sent
    statuses = {d["email"]: d["status"] for d in week_show(pub, WEEK)["deliveries"]}
    assert statuses == {"ann@pub.test": "in_flight", "bob@pub.test": "sent"}
    assert sent.detail["uncertain"] == ["ann@pub.test"]


def test_a_tender_the_mail_layer_cannot_address_fails_alone(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """Issue 17 item 17: a row written before the address rule (inserted here directly) is
    recorded failed with its reason; every other tender is mailed once, on every retry."""
    crew(pub, ("ann", None), ("bob", None), ("cy", None))
    with pub.atomic() as tx:  # sorts between ann and cy: before the fix, cy was never mailed
        tx.execute("UPDATE pub_tenders SET email = %s, email_key = %s WHERE email_key = %s",
                   ["bob@pub.test.", "bob@pub.test.", "bob@pub.test"])
    _through_approve(pub)
    for _ in range(2):
        failed = v2.send(pub, WEEK, now=NOW)
        assert (failed.applied, failed.reason) == (False, "ACT_FAILED")
        assert "bob@pub.test." in (failed.failed or "")
        assert sorted(m.rcpt_tos[0] for m in smtp.received) == ["ann@pub.test", "cy@pub.test"]
        shown = week_show(pub, WEEK)
        assert shown["state"] == APPROVED
        by_email = {d["email"]: d for d in shown["deliveries"]}
        assert by_email["bob@pub.test."]["status"] == "failed"
        assert "not a valid address" in by_email["bob@pub.test."]["error"]
        assert {by_email[e]["status"] for e in ("ann@pub.test", "cy@pub.test")} == {"sent"}


def test_bad_input_is_a_clear_error_and_writes_nothing(pub: Pub) -> None:
    crew(pub, ("ann", None))
    with pytest.raises(BadInput, match="Monday"):
        v2.open_form(pub, "2026-12-08", now=NOW)
    assert pub.runs.get("2026-12-08") is None
    assert v2.open_form(pub, WEEK, now=NOW)
    with pytest.raises(BadInput, match="no tender"):
        submissions.submit(pub, WEEK, "nobody@pub.test", shift_ids(pub), now=NOW)
    assert weeks.ensure_week(pub, "2026-12-14", now=NOW)
    other = shift_ids(pub, "2026-12-14")
    with pytest.raises(BadInput, match="not shifts of week"):
        submissions.submit(pub, WEEK, "ann@pub.test", other[:1], now=NOW)
    tenders.deactivate(pub, "ann@pub.test")
    with pytest.raises(BadInput, match="not an active tender"):
        submissions.submit(pub, WEEK, "ann@pub.test", shift_ids(pub), now=NOW)
    assert submissions.of_week(pub, WEEK) == []
    again = tenders.add(pub, "Ann Again", "ANN@pub.test", now=NOW)
    assert (again.applied, again.reason) == (False, "TENDER_EXISTS")


@pytest.mark.both_databases("a send's lease refuses the unapprove")
def test_h3_one_week_collecting_and_h4_no_unapprove_during_a_send(pub: Pub) -> None:
    crew(pub, ("ann", None))
    assert v2.open_form(pub, WEEK, now=NOW)
    second = v2.open_form(pub, "2026-12-14", now=NOW)
    assert (second.applied, second.reason) == (False, "INVARIANT")
    _through_approve(pub)
    claim = pub.runs.claim(WEEK, "send", holder="sender")  # a send in flight
    assert claim.claimed
    refused = v2.unapprove(pub, WEEK, now=NOW)
    assert (refused.applied, refused.reason) == (False, "LEASE_HELD")
    assert pub.runs.release(WEEK, claim)
    assert v2.unapprove(pub, WEEK, now=NOW).applied and state(pub) == ASSIGNED


def test_approve_or_send_of_the_wrong_week_is_refused(pub: Pub) -> None:
    crew(pub, ("ann", None))
    _through_approve(pub)
    weeks.ensure_week(pub, "2026-12-14", now=NOW)
    assert v2.approve(pub, "2026-12-14", now=NOW).reason == "STATE_MISMATCH"
    assert v2.send(pub, "2026-12-14", now=NOW).reason == "STATE_MISMATCH"
    assert state(pub, "2026-12-14") == DRAFT


def _through_approve(pub: Pub) -> None:
    if pub.runs.state(WEEK) != COLLECTING:
        assert v2.open_form(pub, WEEK, now=NOW)
    for t in tenders.all_tenders(pub, active_only=True):
        assert submissions.submit(pub, WEEK, t.email, shift_ids(pub), now=NOW)
    assert v2.close(pub, WEEK, now=NOW)
    assert v2.generate(pub, WEEK, now=NOW)
    assert v2.approve(pub, WEEK, now=NOW)


def test_a_refused_recipient_is_in_the_mail_log_that_metrics_counts(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """Every handover is logged with its outcome, the refused one too (the mail log
    recorded only what was delivered, so /metrics never counted a refused recipient)."""
    _ready_to_send(pub)
    smtp.refuse_recipient("bob@pub.test")
    assert not v2.send(pub, WEEK, now=NOW).applied
    logged = {(line.label, line.recipient) for line in mail_log(pub, WEEK)}
    assert logged == {("schedule", "ann@pub.test"), ("schedule:refused", "bob@pub.test")}


def _ready_to_send(pub: Pub) -> Any:
    crew(pub, ("ann", None), ("bob", None))
    _through_approve(pub)


def test_rehearsal_mode_sends_everything_to_the_operator_only(
        db_url: str, smtp: SmtpTestServer) -> None:
    """The seed's dress rehearsal: a complete real lifecycle with sends going only to the
    operator, the intended recipient named in the subject; delivery records as usual."""
    from pubsched.engines.flags import set_v2

    rehearsing = make_pub(db_url, mail_settings(smtp, PUBSCHED_REHEARSAL="1"))
    try:
        set_v2(rehearsing, True, now=NOW)
        crew(rehearsing, ("ann", None), ("bob", None))
        _through_approve(rehearsing)
        assert v2.send(rehearsing, WEEK, now=NOW).applied
        assert {tuple(m.rcpt_tos) for m in smtp.accepted} == {(OPERATOR,)}
        subjects = sorted(str(m.message["Subject"]) for m in smtp.accepted)
        assert len(subjects) == 2
        assert "ann@pub.test" in subjects[0] and "bob@pub.test" in subjects[1]
        statuses = {d["email"]: d["status"] for d in week_show(rehearsing, WEEK)["deliveries"]}
        assert statuses == {"ann@pub.test": "sent", "bob@pub.test": "sent"}
    finally:
        rehearsing.close()


def test_resend_is_refused_before_the_week_is_sent_and_for_a_delivered_recipient(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """Issue 17 item 6: the server checks the state: resend only mails a recipient left
    uncertain or failed of a SENT week."""
    from pubsched.engines.actions import perform

    def resend(email: str) -> Any:
        return perform(pub, "resend", WEEK, now=NOW, email=email)

    crew(pub, ("ann", None), ("bob", None))
    weeks.ensure_week(pub, WEEK, now=NOW)
    got = resend("ann@pub.test")
    assert (got.applied, got.reason, state(pub)) == (False, "STATE_MISMATCH", DRAFT)
    assert v2.open_form(pub, WEEK, now=NOW)
    for t in tenders.all_tenders(pub, active_only=True):
        assert submissions.submit(pub, WEEK, t.email, shift_ids(pub), now=NOW)
    assert resend("ann@pub.test").reason == "STATE_MISMATCH" and state(pub) == COLLECTING
    assert v2.close(pub, WEEK, now=NOW)
    assert resend("ann@pub.test").reason == "STATE_MISMATCH" and state(pub) == CLOSED
    assert v2.generate(pub, WEEK, now=NOW)
    assert resend("ann@pub.test").reason == "STATE_MISMATCH" and state(pub) == ASSIGNED
    assert v2.approve(pub, WEEK, now=NOW)
    smtp.refuse_recipient("bob@pub.test")
    assert not v2.send(pub, WEEK, now=NOW).applied  # bob failed, the week APPROVED
    smtp.clear_faults()
    before = len(smtp.received)
    got = resend("bob@pub.test")  # a failed recipient, but the week is not sent
    assert (got.applied, got.reason, state(pub)) == (False, "STATE_MISMATCH", APPROVED)
    assert "not sent yet" in got.message  # the week is APPROVED
    assert len(smtp.received) == before
    assert v2.send(pub, WEEK, now=NOW).applied and state(pub) == SENT
    delivered = resend("ann@pub.test")
    assert (delivered.applied, delivered.reason) == (False, "ALREADY_SENT")
    assert len(smtp.accepted_for("ann@pub.test")) == 1


@pytest.mark.both_databases("an answer's writes (one statement on PostgreSQL)")
def test_each_answer_replaces_the_last_and_keeps_what_it_said_of_started_shifts(
        pub: Pub) -> None:
    crew(pub, ("ann", None))
    assert v2.open_form(pub, WEEK, now=NOW).applied
    thu, fri, sat = shift_ids(pub)[:3]

    def ticked() -> list[int]:
        return sorted(int(r["shift_id"]) for r in pub.query(
            "SELECT shift_id FROM pub_availability_shifts WHERE week_of = %s", [WEEK]))

    for answer in ([thu, fri], [sat], [], [fri, sat], [fri, sat], [thu]):
        assert submissions.submit(pub, WEEK, "ann@pub.test", answer, now=NOW).applied
        assert ticked() == sorted(answer)
    assert submissions.submit(pub, WEEK, "ann@pub.test", [thu, sat], now=NOW).applied
    # Thursday's shift has started: what ann said of it stays, whatever she answers now,
    # and her usual, saved with this answer, has it too
    later = weeks.shifts(pub, WEEK)[0].starts_at + timedelta(minutes=1)
    assert submissions.submit(pub, WEEK, "ann@pub.test", [fri], now=later,
                              save_usual=True).applied
    assert ticked() == [thu, fri]
    usual = pub.query("SELECT COUNT(*) AS n FROM pub_usual_shifts")[0]["n"]
    assert int(usual) == 2
    assert submissions.submit(pub, WEEK, "ann@pub.test", [], now=later).applied
    assert ticked() == [thu]
    with pytest.raises(BadInput):  # and it is not hers to tick any more
        submissions.submit(pub, WEEK, "ann@pub.test", [thu, sat], now=later)
    assert ticked() == [thu]
