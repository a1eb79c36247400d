"""The cutover: the idle gap, the flip in both directions, and each engine running the week
after the other's, on SQLite and on a real PostgreSQL, with mail to a loopback SMTP server."""

from __future__ import annotations

import pytest

from pubsched.engines import actions, legacy, v2
from pubsched.engines.cutover import cutover_check, flip
from pubsched.engines.flags import v2_enabled
from pubsched.pub import Pub
from pubsched.week.runs import ensure_week, shifts
from pubsched.week.submissions import submit
from pubsched.week.view import state_of
from support.pub_engines import (
    EMAILS,
    NEXT,
    WEEK,
    accepted_by_recipient,
    moment,
    row,
)
from support.pub_rehearsal import rehearse
from support.smtp_server import SmtpTestServer

pytestmark = [pytest.mark.pub_setup("engines"),
              pytest.mark.both_databases("the flip takes the flag's lock, PostgreSQL's own")]


def everyone_submits(pub: Pub, week: str) -> None:
    ids = [s.id for s in shifts(pub, week)]
    for email in EMAILS:
        assert submit(pub, week, email, ids, now=moment(pub, week, "opens_at", 60))


def run_legacy_week(pub: Pub, week: str) -> None:
    """The legacy crons open, close and generate; the operator approves and sends."""
    ensure_week(pub, week)
    assert [v.detail["state"] for v in legacy.crons(pub, moment(pub, week, "opens_at"))] == [
        "COLLECTING"]
    everyone_submits(pub, week)
    for name, state in (("deadline_at", "CLOSED"), ("generate_at", "ASSIGNED")):
        got = legacy.crons(pub, moment(pub, week, name))
        assert [(v.applied, v.detail["state"]) for v in got] == [(True, state)], got
    at = moment(pub, week, "send_window_end", -3600)
    for name in ("approve", "send"):
        assert actions.perform(pub, name, week, now=at), name


def run_v2_week(pub: Pub, week: str) -> None:
    """The operator runs the week on v2, through the same buttons."""
    at = moment(pub, week, "opens_at")
    assert actions.perform(pub, "open", week, now=at)
    everyone_submits(pub, week)
    for name in ("close", "generate", "approve", "send"):
        got = actions.perform(pub, name, week, now=at)
        assert got, (name, got)


def test_a_fresh_install_is_idle(pub: Pub) -> None:
    assert cutover_check(pub) == cutover_check(pub, moment(pub, WEEK, "opens_at"))
    check = cutover_check(pub)
    assert (check.idle, check.reasons) == (True, [])
    ensure_week(pub, WEEK)  # a week not yet opened is idle too
    assert cutover_check(pub).idle


def test_an_open_week_is_not_idle_and_the_flip_is_refused_unless_forced(
        pub: Pub, smtp: SmtpTestServer) -> None:
    rehearse(pub, smtp)  # turning v2 on over weeks needs a passed rehearsal (#17.7)
    legacy.open_form(pub, WEEK, now=moment(pub, WEEK, "opens_at"))
    check = cutover_check(pub)
    assert not check.idle
    assert check.reasons == [f"week {WEEK} is in flight (COLLECTING to legacy)"]
    refused = flip(pub, True)
    assert (refused.applied, refused.reason) == (False, "NOT_IDLE")
    assert check.reasons[0] in refused.message and not v2_enabled(pub)
    forced = flip(pub, True, force=True)
    assert forced and forced.detail["forced"] and v2_enabled(pub)
    assert "forced over" in forced.message


@pytest.mark.parametrize("step", ["close", "generate", "approve"])
def test_every_legacy_step_short_of_sent_is_in_flight(pub: Pub, step: str) -> None:
    at = moment(pub, WEEK, "opens_at")
    legacy.open_form(pub, WEEK, now=at)
    everyone_submits(pub, WEEK)
    for name in ("close", "generate", "approve")[:("close", "generate", "approve").index(step)
                                                 + 1]:
        assert getattr(legacy, name)(pub, WEEK, now=at)
    assert not cutover_check(pub).idle
    assert flip(pub, True).reason == "NOT_IDLE"


def test_live_leases_are_not_idle(pub: Pub) -> None:
    at = moment(pub, WEEK, "opens_at")
    legacy.open_form(pub, WEEK, now=at)
    everyone_submits(pub, WEEK)
    for name in ("close", "generate", "approve"):
        assert getattr(legacy, name)(pub, WEEK, now=at)
    assert isinstance(legacy.claim_send(pub, WEEK, holder="w1"), legacy.SendClaim)
    assert any("live legacy send lease" in r for r in cutover_check(pub).reasons)
    ensure_week(pub, NEXT)
    clock = legacy.run_row(pub, NEXT)
    assert clock is not None
    with pub.atomic() as tx:  # a v2 close in flight on a week otherwise not opened
        tx.execute("UPDATE pub_schedule_runs SET acting_at = %s, acting_kind = 'close' "
                   "WHERE week_of = %s", [clock["db_now"], NEXT])
    reasons = cutover_check(pub).reasons
    assert [r for r in reasons if NEXT in r] == [f"week {NEXT} has a live v2 close lease "
                                                 f"(since {clock['db_now'].isoformat()})"]


def test_a_v2_week_in_flight_refuses_the_rollback(pub: Pub) -> None:
    assert flip(pub, True)
    assert v2.open_form(pub, WEEK, now=moment(pub, WEEK, "opens_at"))
    got = flip(pub, False)
    assert got.reason == "NOT_IDLE" and "COLLECTING to v2" in got.message
    assert v2_enabled(pub)


def test_flipping_to_the_value_it_has_changes_nothing(pub: Pub) -> None:
    got = flip(pub, False)
    assert got and got.detail == {"v2": False, "changed": False}
    assert not v2_enabled(pub)


def test_rollback_after_a_v2_week_was_sent_lands_the_legacy_engine_on_coherent_rows(
        pub: Pub, smtp: SmtpTestServer) -> None:
    assert flip(pub, True)
    ensure_week(pub, NEXT)  # created while v2 ran, not opened: the legacy engine's to run
    run_v2_week(pub, WEEK)
    assert (row(pub, WEEK)["v2_state"], row(pub, WEEK)["status"]) == ("SENT", "sent")
    assert accepted_by_recipient(smtp) == dict.fromkeys(EMAILS, 1)

    assert cutover_check(pub).idle
    assert flip(pub, False)
    assert state_of(pub, row(pub, WEEK)) == "SENT"  # the legacy view of the v2 week
    # the legacy engine leaves the sent week alone, and runs the next one through to sent
    for action in (legacy.send, legacy.reopen, legacy.open_form, legacy.close):
        assert action(pub, WEEK, now=moment(pub, NEXT, "opens_at")).reason == (
            "STATE_MISMATCH")
    run_legacy_week(pub, NEXT)
    assert accepted_by_recipient(smtp) == dict.fromkeys(EMAILS, 2)
    r = row(pub, NEXT)
    assert (r["status"], r["send_lease_at"]) == ("sent", None)
    # the v2 week counts as history for the legacy week's picker (its status is 'sent')
    history = pub.query("SELECT COUNT(*) AS n FROM pub_schedule_runs WHERE status = 'sent'")
    assert history[0]["n"] == 2
    assert cutover_check(pub).idle


def test_turning_v2_on_after_a_legacy_week_was_sent_and_v2_runs_the_next(
        pub: Pub, smtp: SmtpTestServer) -> None:
    rehearse(pub, smtp)  # turning v2 on over weeks needs a passed rehearsal (#17.7)
    run_legacy_week(pub, WEEK)
    ensure_week(pub, NEXT)
    with pub.atomic() as tx:  # a legacy row from before 0035: no v2 due times, v2_state NULL
        tx.execute("UPDATE pub_schedule_runs SET v2_state = NULL, opens_at = NULL, "
                   "deadline_at = NULL, generate_at = NULL, send_window_at = NULL "
                   "WHERE week_of = %s", [NEXT])
    assert row(pub, WEEK)["v2_state"] == "DRAFT"  # created through the door, then legacy-run
    assert cutover_check(pub).idle
    assert flip(pub, True)
    sent = row(pub, WEEK)
    assert (sent["v2_state"], state_of(pub, sent)) == (None, "SENT")  # derived from status
    assert v2.send(pub, WEEK).reason == "STATE_MISMATCH"  # never re-sent
    assert v2.open_form(pub, WEEK).reason == "STATE_MISMATCH"
    fresh = row(pub, NEXT)
    assert (fresh["v2_state"], fresh["deadline_at"]) == (None, moment(pub, NEXT, "deadline_at"))
    run_v2_week(pub, NEXT)  # v2_state NULL: seeded from status 'pending' (DRAFT)
    assert (row(pub, NEXT)["v2_state"], row(pub, NEXT)["status"]) == ("SENT", "sent")
    assert accepted_by_recipient(smtp) == dict.fromkeys(EMAILS, 2)
    assert legacy.crons(pub, moment(pub, NEXT, "opens_at")) == []  # stood down


def test_an_unapproved_v2_week_reads_unapproved_to_the_legacy_engine_after_a_rollback(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """#17.1: leaving APPROVED writes the legacy status back to 'pending' (and clears
    ``approved_at``) in the same write, so a rollback cannot let the legacy engine send a
    week the operator took back, also after reopen and regenerate."""
    assert flip(pub, True)
    at = moment(pub, WEEK, "opens_at")
    assert actions.perform(pub, "open", WEEK, now=at)
    everyone_submits(pub, WEEK)
    for name in ("close", "generate", "approve"):
        assert actions.perform(pub, name, WEEK, now=at), name
    assert row(pub, WEEK)["status"] == "approved"
    assert v2.unapprove(pub, WEEK, now=at)
    r = row(pub, WEEK)
    assert (r["v2_state"], r["status"], r["approved_at"]) == ("ASSIGNED", "pending", None)
    for name in ("reopen", "close", "generate"):  # and so after reopen and regenerate
        assert actions.perform(pub, name, WEEK, now=at), name
        assert row(pub, WEEK)["status"] == "pending", name
    assert flip(pub, False, force=True)  # the rollback (forced: the week is in flight)
    assert state_of(pub, row(pub, WEEK)) == "ASSIGNED"  # the legacy view: not approved
    refused = legacy.send(pub, WEEK, now=at)
    assert (refused.applied, refused.reason) == (False, "STATE_MISMATCH")
    assert smtp.accepted == []  # nobody mailed the week the operator took back
    assert row(pub, WEEK)["status"] == "pending"
