"""The legacy engine (flag off): its crons and the operator's actions, on SQLite (a real
PostgreSQL where marked), with real mail to a loopback SMTP server; two instances at once on
PostgreSQL.

The legacy state lives in which timestamps are NULL; each test reads them back, because
that IS the state a rollback lands on."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import rowstate
from pubsched.db.migrate import migrate
from pubsched.deliveries.outbox import owe, to_tender
from pubsched.engines import legacy
from pubsched.engines.flags import set_v2
from pubsched.pub import Pub
from pubsched.verdicts import BadInput, Verdict
from pubsched.week.runs import ensure_week, shifts
from pubsched.week.send import deliveries
from pubsched.week.submissions import submit
from pubsched.week.time import shifts_for_week
from support.pub_db import fresh_url
from support.pub_engines import (
    AFTER,
    EMAILS,
    NEXT,
    WEEK,
    accepted_by_recipient,
    add_tenders,
    moment,
    row,
)
from support.pubs import mail_settings, make_pub
from support.smtp_server import SmtpTestServer

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]



pytestmark = pytest.mark.pub_setup("engines")


def everyone_submits(pub: Pub, week: str, at: datetime) -> None:
    ids = [s.id for s in shifts(pub, week)]
    for i, email in enumerate(EMAILS):
        assert submit(pub, week, email, ids[i % 2::2] if i % 3 else ids, now=at)


def reasons(verdicts: list[Verdict]) -> list[tuple[bool, str | None]]:
    return [(v.applied, v.reason) for v in verdicts]


def backdate_send_lease(pub: Pub, week: str, seconds: float) -> None:
    """As if the holder had claimed the lease ``seconds`` ago (and then died)."""
    stamp = row(pub, week)["send_lease_at"] - timedelta(seconds=seconds)
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_schedule_runs SET send_lease_at = %s WHERE week_of = %s",
                   [stamp, week])


# -- the crons ------------------------------------------------------------------------------


@pytest.mark.both_databases("the legacy engine's SQL by dialect: clock_timestamp(), FOR UPDATE")
def test_the_crons_open_close_and_generate_a_week_at_its_times(pub: Pub) -> None:
    ensure_week(pub, WEEK, now=moment(pub, WEEK, "opens_at", -86400))
    assert legacy.crons(pub, moment(pub, WEEK, "opens_at", -1)) == []
    [opened] = legacy.crons(pub, moment(pub, WEEK, "opens_at"))
    assert opened.applied and opened.detail["state"] == "COLLECTING"
    assert row(pub, WEEK)["opened_at"] == moment(pub, WEEK, "opens_at")
    assert legacy.crons(pub, moment(pub, WEEK, "opens_at", 60)) == []  # nothing more is due
    everyone_submits(pub, WEEK, moment(pub, WEEK, "opens_at", 3600))

    [closed] = legacy.crons(pub, moment(pub, WEEK, "deadline_at"))
    assert closed.applied and closed.detail["state"] == "CLOSED"
    assert legacy.crons(pub, moment(pub, WEEK, "deadline_at", 60)) == []
    [generated] = legacy.crons(pub, moment(pub, WEEK, "generate_at"))
    assert generated.applied and generated.detail == {"state": "ASSIGNED", "filled": 6,
                                                      "unfilled": 0}
    assert legacy.crons(pub, moment(pub, WEEK, "send_window_end", 86400)) == []  # never approves
    r = row(pub, WEEK)
    assert (r["status"], r["generated_at"]) == ("pending", moment(pub, WEEK, "generate_at"))
    assert pub.query("SELECT COUNT(*) AS n FROM pub_assignments WHERE week_of = %s",
                     [WEEK])[0]["n"] == 6


def test_a_tick_hours_late_moves_each_week_one_step(pub: Pub) -> None:
    """A cron that missed the deadline and the generate time closes first, and generates at
    the next tick: a week never jumps two steps in one call."""
    ensure_week(pub, WEEK)
    legacy.crons(pub, moment(pub, WEEK, "opens_at"))
    late = moment(pub, WEEK, "generate_at", 5 * 3600)
    assert [v.detail["state"] for v in legacy.crons(pub, late)] == ["CLOSED"]
    assert [v.detail["state"] for v in legacy.crons(pub, late)] == ["ASSIGNED"]


def test_one_survey_at_a_time_and_the_next_week_opens_when_the_first_closes(pub: Pub) -> None:
    ensure_week(pub, WEEK)
    ensure_week(pub, NEXT)
    # NEXT's opens-at falls before WEEK's deadline (a week later than WEEK's opens-at)
    assert legacy.open_form(pub, WEEK, now=moment(pub, WEEK, "opens_at"))
    refused = legacy.open_form(pub, NEXT, now=moment(pub, WEEK, "opens_at"))
    assert (refused.applied, refused.reason) == (False, "INVARIANT")
    assert WEEK in refused.message and row(pub, NEXT)["opened_at"] is None

    # the cron closes WEEK at its deadline; NEXT's window has not come yet
    assert [v.detail["state"] for v in legacy.crons(pub, moment(pub, WEEK, "deadline_at"))] == [
        "CLOSED"]
    # reopening WEEK while NEXT is open is refused too
    assert legacy.open_form(pub, NEXT, now=moment(pub, NEXT, "opens_at"))
    assert legacy.reopen(pub, WEEK, now=moment(pub, NEXT, "opens_at")).reason == "INVARIANT"
    assert legacy.close(pub, NEXT, now=moment(pub, NEXT, "opens_at", 60))
    assert legacy.reopen(pub, WEEK, now=moment(pub, NEXT, "opens_at", 120))


@pytest.mark.both_databases("the override is JSONB on PostgreSQL, text on SQLite")
def test_the_cron_opens_the_next_week_in_the_tick_that_closes_the_open_one(pub: Pub) -> None:
    for week in (WEEK, NEXT):
        ensure_week(pub, week)
    early = moment(pub, WEEK, "opens_at", 86400)  # NEXT opens early, while WEEK collects
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_schedule_runs SET settings_override = %s WHERE week_of = %s",
                   [{"opens_at": early.isoformat()}, NEXT])
    legacy.crons(pub, moment(pub, WEEK, "opens_at"))
    assert legacy.crons(pub, early) == []  # held back: one survey at a time
    got = legacy.crons(pub, moment(pub, WEEK, "deadline_at"))
    assert [(v.applied, v.message.split()[0], v.detail["state"]) for v in got] == [
        (True, WEEK, "CLOSED"), (True, NEXT, "COLLECTING")]


def test_a_week_whose_whole_window_was_missed_is_left_to_the_operator(pub: Pub) -> None:
    ensure_week(pub, WEEK)
    ensure_week(pub, NEXT)
    got = legacy.crons(pub, moment(pub, NEXT, "opens_at"))  # WEEK's deadline is long past
    assert [v.message.split()[0] for v in got] == [NEXT]
    assert row(pub, WEEK)["opened_at"] is None
    assert legacy.close(pub, NEXT, now=moment(pub, NEXT, "opens_at", 60))
    assert legacy.open_form(pub, WEEK, now=moment(pub, NEXT, "opens_at", 120))  # by hand


def test_the_crons_stand_down_when_the_flag_is_on(pub: Pub) -> None:
    ensure_week(pub, WEEK)
    set_v2(pub, True)
    assert legacy.crons(pub, moment(pub, WEEK, "opens_at")) == []
    assert row(pub, WEEK)["opened_at"] is None


@pytest.mark.both_databases("the override is JSONB on PostgreSQL, text on SQLite")
def test_a_bad_settings_override_is_reported_and_the_other_weeks_go_on(pub: Pub) -> None:
    ensure_week(pub, WEEK)
    ensure_week(pub, NEXT)
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_schedule_runs SET settings_override = %s WHERE week_of = %s",
                   [{"deadline_at": "not a time"}, WEEK])
    got = legacy.crons(pub, moment(pub, NEXT, "opens_at"))
    assert reasons(got) == [(False, "BAD_SETTINGS"), (True, None)]


# -- the operator's actions -------------------------------------------------------------------


def test_the_rehearsal_lifecycle_by_hand(pub: Pub, smtp: SmtpTestServer) -> None:
    """open -> extend -> close -> generate -> reopen -> regenerate -> approve -> send, at
    times of the operator's choosing (actions are not time-gated)."""
    t = datetime(2026, 12, 1, 12, tzinfo=UTC)  # well before any of the week's times
    assert legacy.open_form(pub, WEEK, now=t)  # creates the week
    ids = [s.id for s in shifts(pub, WEEK)]
    assert submit(pub, WEEK, EMAILS[0], ids[:1], now=t)
    new_deadline = moment(pub, WEEK, "deadline_at", 6 * 3600)
    ext = legacy.extend(pub, WEEK, new_deadline, now=t)
    assert ext and row(pub, WEEK)["settings_override"] is not None
    assert legacy.crons(pub, moment(pub, WEEK, "deadline_at")) == []  # the old deadline
    assert legacy.close(pub, WEEK, now=t)
    assert submit(pub, WEEK, EMAILS[1], ids, now=t).reason == "FORM_CLOSED"
    first = legacy.generate(pub, WEEK, now=t)
    assert first and first.detail["filled"] == 1
    assert legacy.reopen(pub, WEEK, now=t + timedelta(minutes=1))
    r = row(pub, WEEK)
    assert (r["closed_at"], r["generated_at"]) == (None, None)
    assert r["reopened_at"] == t + timedelta(minutes=1)
    assert pub.query("SELECT COUNT(*) AS n FROM pub_assignments WHERE week_of = %s",
                     [WEEK])[0]["n"] == 1  # kept until the regenerate replaces them
    for email in EMAILS[1:]:
        assert submit(pub, WEEK, email, ids, now=t)
    assert legacy.close(pub, WEEK, now=t).applied
    assert legacy.approve(pub, WEEK, now=t).reason == "STATE_MISMATCH"  # generate again first
    again = legacy.generate(pub, WEEK, now=t)
    assert again and again.detail["filled"] == 6
    assert legacy.approve(pub, WEEK, now=t)
    assert pub.query("SELECT COUNT(*) AS n FROM pub_assignments WHERE week_of = %s AND "
                     "approved_at IS NULL", [WEEK])[0]["n"] == 0
    sent = legacy.send(pub, WEEK, now=t)
    assert sent and sent.detail["state"] == "SENT" and sent.detail["sent"] == 4
    assert accepted_by_recipient(smtp) == dict.fromkeys(EMAILS, 1)
    r = row(pub, WEEK)
    assert (r["status"], r["sent_at"], r["send_lease_at"], r["send_lease_holder"]) == (
        "sent", t, None, None)
    # the legacy engine never wrote a v2 column, not even at the week's creation (issue
    # 17 #8: v2_state NULL until v2 first moves it), and the engine's history is empty
    assert (r["v2_state"], r["acting_at"], r["acting_kind"], r["acting_token"]) == (
        None, None, None, 0)
    assert [e.edge for e in pub.runs.history(WEEK)] == []
    # terminal: nothing moves a sent week, and it is never re-sent
    for action in (legacy.send, legacy.reopen, legacy.unapprove, legacy.generate,
                   legacy.close, legacy.open_form, legacy.approve):
        assert action(pub, WEEK, now=t).reason == "STATE_MISMATCH", action
    assert len(smtp.accepted) == 4


def test_actions_from_the_wrong_state_are_refused_with_nothing_written(pub: Pub) -> None:
    t = datetime(2026, 12, 1, 12, tzinfo=UTC)
    ensure_week(pub, WEEK, now=t)
    before = row(pub, WEEK)
    for action in (legacy.close, legacy.reopen, legacy.generate, legacy.approve,
                   legacy.unapprove, legacy.send):
        got = action(pub, WEEK, now=t)
        assert (got.applied, got.reason, got.detail["state"]) == (False, "STATE_MISMATCH",
                                                                  "DRAFT"), action
    assert legacy.extend(pub, WEEK, moment(pub, WEEK, "deadline_at", 60), now=t).reason == (
        "STATE_MISMATCH")
    assert row(pub, WEEK) == before
    legacy.open_form(pub, WEEK, now=t)
    assert legacy.open_form(pub, WEEK, now=t).reason == "STATE_MISMATCH"  # a double click
    assert legacy.generate(pub, WEEK, now=t).reason == "STATE_MISMATCH"  # still open
    legacy.close(pub, WEEK, now=t)
    legacy.generate(pub, WEEK, now=t)
    legacy.approve(pub, WEEK, now=t)
    assert legacy.generate(pub, WEEK, now=t).reason == "STATE_MISMATCH"  # unapprove first
    assert legacy.reopen(pub, WEEK, now=t).reason == "STATE_MISMATCH"
    assert legacy.unapprove(pub, WEEK, now=t)
    assert (row(pub, WEEK)["status"], row(pub, WEEK)["approved_at"]) == ("pending", None)
    assert legacy.generate(pub, WEEK, now=t)
    assert legacy.autopilot(pub, WEEK, True, now=t).reason == "NOT_IN_LEGACY"
    with pytest.raises(BadInput):
        legacy.close(pub, "2026-12-15", now=t)  # not a Monday
    with pytest.raises(BadInput):
        legacy.approve(pub, AFTER, now=t)  # no such week


# -- send and its lease -------------------------------------------------------------------------


def approved_week(pub: Pub, week: str = WEEK) -> datetime:
    t = moment(pub, week, "opens_at")
    assert legacy.open_form(pub, week, now=t)
    everyone_submits(pub, week, t)
    for action in (legacy.close, legacy.generate, legacy.approve):
        assert action(pub, week, now=t), action
    return t


def test_a_refused_recipient_fails_the_send_and_the_retry_sends_only_to_them(
        pub: Pub, smtp: SmtpTestServer) -> None:
    t = approved_week(pub)
    smtp.refuse_recipient(EMAILS[1])
    failed = legacy.send(pub, WEEK, now=t)
    assert (failed.applied, failed.reason) == (False, "ACT_FAILED")
    assert failed.failed and EMAILS[1] in failed.failed
    r = row(pub, WEEK)
    assert (r["status"], r["sent_at"], r["send_lease_at"]) == ("approved", None, None)
    assert EMAILS[1] in r["last_error"]
    smtp.clear_faults()
    assert legacy.send(pub, WEEK, now=t)
    assert accepted_by_recipient(smtp) == dict.fromkeys(EMAILS, 1)
    assert row(pub, WEEK)["last_error"] is None


@pytest.mark.both_databases("the legacy send's failed finish")
def test_smtp_down_fails_the_send_and_the_retry_sends_once(
        pub: Pub, smtp: SmtpTestServer) -> None:
    t = approved_week(pub)
    smtp.stop()
    failed = legacy.send(pub, WEEK, now=t)
    assert failed.failed and row(pub, WEEK)["status"] == "approved"
    assert row(pub, WEEK)["last_error"]
    smtp.start()
    assert legacy.send(pub, WEEK, now=t)
    assert accepted_by_recipient(smtp) == dict.fromkeys(EMAILS, 1)


@pytest.mark.both_databases("the legacy send lease: clock_timestamp() and FOR UPDATE on PostgreSQL")
def test_a_live_send_lease_blocks_unapprove_and_a_second_send_until_its_ttl(
        pub: Pub, smtp: SmtpTestServer) -> None:
    t = approved_week(pub)
    claim = legacy.claim_send(pub, WEEK, holder="worker-1")
    assert isinstance(claim, legacy.SendClaim)
    assert legacy.unapprove(pub, WEEK, now=t).reason == "LEASE_HELD"  # H4
    busy = legacy.send(pub, WEEK, now=t)
    assert busy.reason == "LEASE_HELD" and "worker-1" in busy.message
    backdate_send_lease(pub, WEEK, legacy.SEND_LEASE_TTL + 1)  # worker-1 died long ago
    assert legacy.send(pub, WEEK, now=t)
    assert accepted_by_recipient(smtp) == dict.fromkeys(EMAILS, 1)


@pytest.mark.both_databases("a lease taken over under a zombie")
def test_a_zombie_sender_hands_nothing_over_once_its_lease_was_taken(
        pub: Pub, smtp: SmtpTestServer) -> None:
    approved_week(pub)
    zombie = legacy.claim_send(pub, WEEK, holder="zombie")
    assert isinstance(zombie, legacy.SendClaim)
    backdate_send_lease(pub, WEEK, legacy.SEND_LEASE_TTL + 1)
    stamp = row(pub, WEEK)["send_lease_at"]
    zombie = legacy.SendClaim(WEEK, zombie.holder, stamp)  # what the zombie still holds
    taker = legacy.claim_send(pub, WEEK, holder="taker")
    assert isinstance(taker, legacy.SendClaim)
    with pytest.raises(rowstate.UnitRefusedError) as lost, legacy.fenced_by(pub, zombie) as tx:
        tx.execute("UPDATE pub_schedule_runs SET last_error = 'zombie' WHERE week_of = %s",
                   [WEEK])
    assert lost.value.reason == "LEASE_LOST"
    assert row(pub, WEEK)["last_error"] is None and smtp.accepted == []
    with legacy.fenced_by(pub, taker) as tx:  # the taker's units still commit
        tx.execute("SELECT 1")


@pytest.mark.both_databases("a crash: the legacy send lease's TTL")
def test_a_send_that_died_midway_is_taken_over_after_the_ttl_and_mails_no_one_twice(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """The dead sender had marked one recipient in flight (its message's fate unknown):
    after the TTL a new send takes the lease, mails the others once, and leaves that one
    uncertain for the operator (never re-sent on its own)."""
    t = approved_week(pub)
    dead = legacy.claim_send(pub, WEEK, holder="dead")
    assert isinstance(dead, legacy.SendClaim)
    (first,) = pub.query("SELECT id FROM pub_tenders WHERE email = %s", [EMAILS[0]])
    key = ("schedule", WEEK, to_tender(first["id"]))
    with legacy.fenced_by(pub, dead):  # owed and claimed: the handover under way
        owe(pub, *key, week_of=WEEK, now=t)
        assert pub.mail.claim(key, "send").claimed
    assert legacy.send(pub, WEEK, now=t).reason == "LEASE_HELD"  # not before the TTL
    backdate_send_lease(pub, WEEK, legacy.SEND_LEASE_TTL + 1)
    got = legacy.send(pub, WEEK, now=t)
    assert got and got.detail["uncertain"] == [EMAILS[0]] and got.detail["sent"] == 3
    assert accepted_by_recipient(smtp) == dict.fromkeys(EMAILS[1:], 1)
    assert legacy.send(pub, WEEK, now=t).reason == "STATE_MISMATCH"


@pytest.mark.both_databases("the legacy send reads the v2 lease")
def test_the_legacy_send_refuses_while_a_v2_lease_is_live(pub: Pub) -> None:
    """Only a forced flip can leave one there; the legacy engine stands back from it."""
    t = approved_week(pub)
    now = legacy.run_row(pub, WEEK)
    assert now is not None
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_schedule_runs SET acting_at = %s, acting_kind = 'send' "
                   "WHERE week_of = %s", [now["db_now"], WEEK])
    assert legacy.send(pub, WEEK, now=t).reason == "LEASE_HELD"
    assert row(pub, WEEK)["send_lease_at"] is None


# -- 0035 changes nothing for the legacy engine -------------------------------------------------


def legacy_data(pub: Pub) -> None:
    """Rows as the legacy app left them, written by hand with legacy columns only: tenders,
    a sent week, an approved one with a stale lease and an error, an open one, a new one."""
    t = datetime(2026, 11, 2, 15, tzinfo=UTC)
    with pub.atomic() as tx:
        for i, email in enumerate(EMAILS, 1):
            tx.execute("INSERT INTO pub_tenders (id, name, email, email_key, active, "
                       "created_at) VALUES (%s, %s, %s, %s, 1, %s)",
                       [i, f"T{i}", email, email, t])
        runs: list[tuple[str, dict[str, Any]]] = [
            ("2026-11-30", {"status": "sent", "opened_at": t, "closed_at": t,
                            "generated_at": t, "approved_at": t, "sent_at": t}),
            ("2026-12-07", {"status": "approved", "opened_at": t, "closed_at": t,
                            "generated_at": t, "approved_at": t, "send_lease_holder": "old",
                            "send_lease_at": t, "last_error": "SMTP 451"}),
            (WEEK, {"status": "pending", "opened_at": t}),
            (NEXT, {"status": "pending"})]
        shift_id = 0
        for week, cols in runs:
            names = ["week_of", "created_at", *cols]
            tx.execute(f"INSERT INTO pub_schedule_runs ({', '.join(names)}) VALUES "
                       f"({', '.join(['%s'] * len(names))})", [week, t, *cols.values()])
            for s in shifts_for_week(week, pub.config.tz):
                shift_id += 1
                tx.execute("INSERT INTO pub_shifts (id, week_of, night, label, starts_at, "
                           "ends_at, slots) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                           [shift_id, week, s.night.isoformat(), f"s{shift_id}", s.starts_at,
                            s.ends_at, s.slots])
                if week in ("2026-12-07", WEEK):
                    for tender in range(1, 5):
                        if (tender + shift_id) % 3:
                            tx.execute("INSERT INTO pub_availability_shifts (week_of, "
                                       "tender_id, shift_id) VALUES (%s, %s, %s)",
                                       [week, tender, shift_id])
            for tender in range(1, 5):
                tx.execute("INSERT INTO pub_availability (week_of, tender_id, submitted_at, "
                           "updated_at) VALUES (%s, %s, %s, %s)", [week, tender, t, t])
        tx.execute("INSERT INTO pub_assignments (week_of, shift_id, tender_id, assigned_at) "
                   "SELECT week_of, shift_id, tender_id, %s FROM pub_availability_shifts "
                   "WHERE week_of = '2026-12-07'", [t])


LEGACY_COLUMNS = ("week_of, status, opened_at, closed_at, generated_at, approved_at, sent_at, "
                  "send_lease_at, send_lease_holder, last_error, settings_override, "
                  "reopened_at, created_at")


def legacy_script(pub: Pub) -> list[Any]:
    """Crons and actions over the legacy data; everything they answered and left behind."""
    trace: list[Any] = []

    def step(name: str, got: Verdict | list[Verdict]) -> None:
        verdicts = got if isinstance(got, list) else [got]
        trace.append((name, [(v.applied, v.reason, v.failed, v.message) for v in verdicts]))

    t = moment(pub, WEEK, "deadline_at")
    step("send the approved week (its old lease is stale)",
         legacy.send(pub, "2026-12-07", now=t))
    step("resend the sent week", legacy.send(pub, "2026-11-30", now=t))
    step("crons at the deadline", legacy.crons(pub, t))
    step("crons at generate", legacy.crons(pub, moment(pub, WEEK, "generate_at")))
    step("reopen", legacy.reopen(pub, WEEK, now=moment(pub, WEEK, "generate_at", 60)))
    step("extend", legacy.extend(pub, WEEK, moment(pub, WEEK, "generate_at", 3600)))
    step("crons", legacy.crons(pub, moment(pub, WEEK, "generate_at", 3600)))
    step("crons", legacy.crons(pub, moment(pub, WEEK, "generate_at", 3660)))
    step("approve", legacy.approve(pub, WEEK, now=moment(pub, WEEK, "generate_at", 3700)))
    step("unapprove", legacy.unapprove(pub, WEEK, now=moment(pub, WEEK, "generate_at", 3800)))
    step("approve", legacy.approve(pub, WEEK, now=moment(pub, WEEK, "generate_at", 3900)))
    step("send", legacy.send(pub, WEEK, now=moment(pub, WEEK, "generate_at", 4000)))
    step("crons open the next week", legacy.crons(pub, moment(pub, NEXT, "opens_at")))
    trace.append(pub.query(f"SELECT {LEGACY_COLUMNS} FROM pub_schedule_runs ORDER BY week_of"))
    trace.append(pub.query("SELECT week_of, shift_id, tender_id, assigned_at, approved_at "
                           "FROM pub_assignments ORDER BY week_of, shift_id, tender_id"))
    trace.append([{"week_of": w, "tender_id": tid, **record}  # the schedule's deliveries
                  for w in ("2026-11-30", "2026-12-07", WEEK, NEXT)
                  for tid, record in sorted(deliveries(pub, w).items())])
    return trace


@pytest.mark.parametrize("kind", KINDS)
def test_applying_0035_changes_no_behaviour_of_the_legacy_engine(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The same legacy data and the same script, on a database at 0034 (the legacy schema:
    the engine runs there) and on one migrated past 0035/0036 after the data was written:
    the same verdicts, the same rows, the same mail."""
    traces: list[list[Any]] = []
    for migrated_after in (False, True):
        url = fresh_url(request, kind, tmp_path, f"pub{int(migrated_after)}")
        migrate(url, to="0034")
        with SmtpTestServer() as server:
            pub = make_pub(url, mail_settings(server))
            try:
                legacy_data(pub)
                if migrated_after:  # as a deployment does: migrate, then open the pub again
                    assert migrate(url)[:2] == ["0035", "0036"]
                    pub.close()
                    pub = make_pub(url, mail_settings(server))
                trace = legacy_script(pub)
                trace.append(sorted(accepted_by_recipient(server).items()))
            finally:
                pub.close()
        traces.append(trace)
    assert traces[0] == traces[1]
    steps = dict(traces[1][:13])  # the script did what the legacy rules say
    assert steps["send the approved week (its old lease is stale)"][0][:2] == (True, None)
    assert steps["resend the sent week"][0][1] == "STATE_MISMATCH"
    assert [v[0] for v in steps["crons open the next week"]] == [True]
    assert all(r["status"] == "sent" for r in traces[1][13][:3])


# -- two instances at once (PostgreSQL) -----------------------------------------------------------


def at_once(pubs: list[Pub], call: Callable[[Pub], Any]) -> list[Any]:
    """``call`` in one thread per pub, released together."""
    barrier = threading.Barrier(len(pubs))
    out: list[Any] = [None] * len(pubs)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            out[i] = call(pubs[i])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(pubs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    return out


@pytest.fixture
def instances(pg_db_url: str, smtp: SmtpTestServer) -> Iterator[list[Pub]]:
    """Two app instances on one PostgreSQL database, each with its own store."""
    pubs = [make_pub(pg_db_url, mail_settings(smtp)) for _ in range(2)]
    add_tenders(pubs[0])
    yield pubs
    for p in pubs:
        p.close()


WEEKS = ["2026-12-14", "2026-12-21", "2026-12-28", "2027-01-04", "2027-01-11"]


def test_two_instances_running_the_crons_at_once_act_once(instances: list[Pub]) -> None:
    pub = instances[0]
    for week in WEEKS:
        ensure_week(pub, week)
        for name, state in (("opens_at", "COLLECTING"), ("deadline_at", "CLOSED"),
                            ("generate_at", "ASSIGNED")):
            at = moment(pub, week, name)
            got = [v for vs in at_once(instances, lambda p, at=at: legacy.crons(p, at))
                   for v in vs]
            applied = [v for v in got if v.applied]
            assert [v.detail["state"] for v in applied] == [state], (week, name, got)
            assert all(v.reason == "STATE_MISMATCH" for v in got if not v.applied)
            if name == "opens_at":
                everyone_submits(pub, week, at)
        assert legacy.approve(pub, week, now=at)
        assert legacy.send(pub, week, now=at)
    generated = pub.query("SELECT week_of, COUNT(*) AS n FROM pub_assignments "
                          "GROUP BY week_of ORDER BY week_of")
    assert [r["n"] for r in generated] == [6] * len(WEEKS)


def test_two_concurrent_legacy_sends_send_one_email_per_tender(
        instances: list[Pub], smtp: SmtpTestServer) -> None:
    pub = instances[0]
    for n, week in enumerate(WEEKS, 1):
        approved_week(pub, week)
        got = at_once(instances, lambda p, week=week: legacy.send(p, week))
        assert sorted(v.applied for v in got) == [False, True], got
        [lost] = [v for v in got if not v.applied]
        assert lost.reason in ("LEASE_HELD", "STATE_MISMATCH")
        assert accepted_by_recipient(smtp) == dict.fromkeys(EMAILS, n)
        assert row(pub, week)["status"] == "sent"


def test_two_instances_opening_different_weeks_at_once_open_one(instances: list[Pub]) -> None:
    """One survey at a time under concurrency: READ COMMITTED alone would let each open's
    NOT EXISTS miss the other's uncommitted open; the survey lock serialises them."""
    pub = instances[0]
    for n, (first, second) in enumerate(zip(WEEKS[::2], WEEKS[1::2], strict=False)):
        for week in (first, second):
            ensure_week(pub, week)
        at = moment(pub, first, "opens_at", n)
        weeks = {id(instances[0]): first, id(instances[1]): second}

        def open_one(p: Pub, weeks: dict[int, str] = weeks, at: datetime = at) -> Verdict:
            return legacy.open_form(p, weeks[id(p)], now=at)

        got = at_once(instances, open_one)
        assert sorted((v.applied, v.reason) for v in got) == [(False, "INVARIANT"),
                                                              (True, None)], got
        assert len(pub.query(f"SELECT week_of FROM pub_schedule_runs WHERE {legacy.OPEN}")) == 1
        for week in (first, second):
            legacy.close(pub, week, now=at)
