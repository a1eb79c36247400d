"""The cutover's dress rehearsal (#17.7) on SQLite and a real PostgreSQL, with mail to a
loopback SMTP server: a whole week on v2 on a throwaway copy, every email to the operator,
the real tables untouched, its outcome recorded; ``flag v2 on`` over real weeks refused
(REHEARSAL_REQUIRED, ``force`` or not) until one passed; a failed step, an abandoned
rehearsal, a stale copy, two presses of "next" at once."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

import rowstate
from pubsched.engines import legacy
from pubsched.engines.cutover import REHEARSAL_REQUIRED, flip, rehearsal_needed
from pubsched.engines.flags import v2_enabled
from pubsched.pub import Pub
from pubsched.rehearsal import (
    ABANDONED,
    FAILED,
    PASSED,
    STEP_TAKEN,
    STEPS,
    Refused,
    StepResult,
    run_all,
    scratch,
    start,
    step,
    stop,
)
from pubsched.rehearsal import record as records
from pubsched.verdicts import BadInput
from pubsched.week.runs import ensure_week
from support.pub_engines import EMAILS, OPERATOR, WEEK, moment
from support.pub_rehearsal import rehearse
from support.pubs import make_pub
from support.smtp_server import SmtpTestServer

pytestmark = [pytest.mark.pub_setup("engines"),
              pytest.mark.both_databases("the rehearsal's copy is of the real database's dialect")]

REAL_TABLES = ("pub_tenders", "pub_schedule_runs", "pub_shifts", "pub_availability",
               "pub_availability_shifts", "pub_assignments", "pub_mail", "pub_flags",
               "pub_mail_log", "rowstate_events", "pub_shift_template")


def snapshot(pub: Pub) -> dict[str, list[str]]:
    """Every row of every real table but the rehearsal's own record, as text."""
    with pub.atomic() as tx:
        return {t: sorted(map(repr, tx.execute(f"SELECT * FROM {t}"))) for t in REAL_TABLES}


def legacy_week_in_the_works(pub: Pub) -> None:
    """Real weeks the rehearsal must not touch: one sent by the legacy engine's crons and
    the operator, with deliveries and a mail log, and one not yet opened."""
    ensure_week(pub, WEEK)
    at = moment(pub, WEEK, "opens_at")
    legacy.crons(pub, at)
    from pubsched.week.runs import shifts
    from pubsched.week.submissions import submit

    ids = [s.id for s in shifts(pub, WEEK)]
    for email in EMAILS:
        assert submit(pub, WEEK, email, ids, now=at)
    for action in ("close", "generate", "approve", "send"):
        assert getattr(legacy, action)(pub, WEEK, now=at), action
    ensure_week(pub, "2026-12-21")


def test_a_rehearsal_passes_mails_only_the_operator_and_leaves_the_real_tables_alone(
        pub: Pub, smtp: SmtpTestServer) -> None:
    legacy_week_in_the_works(pub)
    smtp.clear_received()
    before = snapshot(pub)
    results = list(run_all(pub))
    assert [(r.number, r.name, r.ok) for r in results] == [
        (i + 1, s.name, True) for i, s in enumerate(STEPS)]
    assert results[0].words.startswith("open the form for the week of ")
    assert results[-1].message == f"4 email(s), every one to {OPERATOR}"
    done = records.latest(pub)
    assert done is not None and (done.outcome, done.step_reached) == (PASSED, len(STEPS))
    assert [s["name"] for s in done.steps] == [s.name for s in STEPS]
    assert done.finished_at is not None and done.failure is None
    # the operator's server got every email, and no tender address got any
    assert len(smtp.accepted) == len(EMAILS) == len(smtp.received)
    assert {to for m in smtp.received for to in m.rcpt_tos} == {OPERATOR}
    subjects = sorted(str(m.message["Subject"]) for m in smtp.accepted)
    for email, subject in zip(sorted(EMAILS), subjects, strict=True):
        assert subject.startswith("[rehearsal, for ") and f"<{email}>" in subject
    assert snapshot(pub) == before  # the real tables, row for row
    assert not scratch.exists(pub, done.scratch)
    assert scratch.leftovers(pub) == []


def test_flag_v2_on_over_weeks_needs_a_passed_rehearsal_forced_or_not(
        pub: Pub, smtp: SmtpTestServer) -> None:
    assert not rehearsal_needed(pub)  # an empty database: nothing to rehearse
    assert flip(pub, True) and flip(pub, False)  # a fresh install flips freely
    ensure_week(pub, WEEK)
    assert rehearsal_needed(pub)
    for force in (False, True):
        refused = flip(pub, True, force=force)
        assert (refused.applied, refused.reason) == (False, REHEARSAL_REQUIRED), force
        assert "pubsched cutover rehearse" in refused.message
        assert not v2_enabled(pub)
    rehearse(pub, smtp)
    assert not rehearsal_needed(pub)
    assert flip(pub, True) and v2_enabled(pub)
    assert flip(pub, False) and not v2_enabled(pub)  # a rollback never needs one


def test_a_failed_step_is_recorded_and_the_flag_stays_refused(
        pub: Pub, smtp: SmtpTestServer) -> None:
    ensure_week(pub, WEEK)
    before = snapshot(pub)
    smtp.refuse_recipient(OPERATOR)
    results = list(run_all(pub))
    assert [r.ok for r in results] == [True] * (len(STEPS) - 1) + [False]
    assert results[-1].name == "send" and OPERATOR in results[-1].message
    done = records.latest(pub)
    assert done is not None and done.outcome == FAILED
    assert done.failure is not None and done.failure.startswith("failed at send: ")
    assert done.step_reached == len(STEPS) - 1 and done.steps[-1]["ok"] is False
    assert not scratch.exists(pub, done.scratch)
    assert flip(pub, True).reason == REHEARSAL_REQUIRED
    assert smtp.accepted == [] and snapshot(pub) == before


def test_no_operator_address_refuses_the_rehearsal_and_writes_nothing(
        pub: Pub, db_url: str) -> None:
    bare = make_pub(db_url, replace(pub.config.mail, operator_email=None))
    try:
        with pytest.raises(BadInput, match="set PUBSCHED_OPERATOR_EMAIL"):
            start(bare)
        assert bare.query("SELECT * FROM pub_rehearsals") == []
        assert scratch.leftovers(bare) == []
    finally:
        bare.close()


def test_an_abandoned_rehearsal_drops_its_copy(pub: Pub) -> None:
    made = start(pub)
    assert scratch.exists(pub, made.scratch)
    first = step(pub, made.id, 0)
    assert first.ok and first.rehearsal.step_reached == 1
    assert stop(pub, made.id)
    done = records.get(pub, made.id)
    assert done is not None and done.outcome == ABANDONED
    assert not scratch.exists(pub, made.scratch)
    with pytest.raises(Refused) as late:  # the wizard's next press after the stop
        step(pub, made.id, 1)
    assert late.value.reason == STEP_TAKEN
    assert not stop(pub, made.id)  # stopping twice does nothing


def test_a_stale_copy_is_dropped_when_the_next_rehearsal_starts(pub: Pub) -> None:
    crashed = start(pub)  # its runner died after a step: unfinished, no claim live
    assert step(pub, crashed.id, 0).ok
    ended = start(pub)  # abandons the crashed one; then a crash before its drop:
    assert records.finish(pub, ended.id, FAILED, moment(pub, WEEK, "opens_at"))
    stray: list[str] = []
    if pub.dialect == "postgresql":  # a schema made by a start that died before its record
        stray.append(scratch.new_name(pub))
        with pub.atomic() as tx:
            tx.execute(f"CREATE SCHEMA {stray[0]}")
    assert scratch.exists(pub, ended.scratch)
    fresh = start(pub)
    first = records.get(pub, crashed.id)
    assert first is not None and first.outcome == ABANDONED
    assert first.failure == "a new rehearsal was started"
    for gone in (crashed.scratch, ended.scratch, *stray):
        assert not scratch.exists(pub, gone), gone
    assert scratch.exists(pub, fresh.scratch)
    assert scratch.leftovers(pub) == ([fresh.scratch] if pub.dialect == "postgresql" else [])
    stop(pub, fresh.id)


def test_a_step_being_run_refuses_a_second_start(pub: Pub) -> None:
    made = start(pub)
    assert records.claim(pub, made.id, 0, moment(pub, WEEK, "opens_at"))
    with pytest.raises(Refused) as busy:
        start(pub, now=moment(pub, WEEK, "opens_at", 60))
    assert busy.value.reason == "REHEARSAL_RUNNING"
    # a start racing past that check meets the one-unfinished index, and writes nothing
    with pytest.raises(rowstate.InvariantViolation):
        records.insert(pub, week=WEEK, scratch="x", now=moment(pub, WEEK, "opens_at", 60),
                       by=None)
    assert [r["id"] for r in pub.query("SELECT id FROM pub_rehearsals")] == [made.id]
    stop(pub, made.id)


def test_two_presses_of_next_at_once_run_the_step_once(pub: Pub) -> None:
    made = start(pub)
    gate = threading.Barrier(2)
    got: list[Any] = []

    def press() -> None:
        gate.wait()
        try:
            got.append(step(pub, made.id, 0))
        except Refused as exc:
            got.append(exc)

    threads = [threading.Thread(target=press) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ran = [g for g in got if isinstance(g, StepResult)]
    lost = [g for g in got if isinstance(g, Refused)]
    assert len(ran) == 1 and ran[0].ok and [e.reason for e in lost] == [STEP_TAKEN]
    after = records.get(pub, made.id)
    assert after is not None and after.step_reached == 1 and len(after.steps) == 1
    copy = scratch.open_copy(pub, made.scratch)
    try:
        opened = copy.query("SELECT COUNT(*) AS n FROM rowstate_events WHERE edge = 'open'")
        assert opened[0]["n"] == 1
    finally:
        copy.close()
    stop(pub, made.id)


def test_the_copy_holds_the_active_tenders_and_the_shift_template_and_no_weeks(
        pub: Pub) -> None:
    from pubsched.people import tenders

    legacy_week_in_the_works(pub)
    assert tenders.deactivate(pub, EMAILS[0])
    with pub.atomic() as tx:  # the pub's own template, not the one the migrations seed
        tx.execute("DELETE FROM pub_shift_template WHERE weekday = 5")
        tx.execute("INSERT INTO pub_shift_template (label, weekday, start_time, end_time, "
                   "slots, needs) VALUES ('Sunday lunch', 6, '12:00', '16:00', 3, "
                   "'[\"kitchen\"]')")
    made = start(pub)
    copy = scratch.open_copy(pub, made.scratch)
    try:
        def rows(p: Pub, sql: str) -> list[str]:
            return sorted(map(repr, p.query(sql)))

        assert rows(copy, "SELECT * FROM pub_tenders") == rows(
            pub, "SELECT * FROM pub_tenders WHERE active <> 0")
        assert len(copy.query("SELECT id FROM pub_tenders")) == len(EMAILS) - 1
        assert rows(copy, "SELECT * FROM pub_shift_template") == rows(
            pub, "SELECT * FROM pub_shift_template")
        for table in ("pub_schedule_runs", "pub_shifts", "pub_mail", "pub_mail_log",
                      "rowstate_events", "pub_rehearsals"):
            assert copy.query(f"SELECT * FROM {table}") == [], table
        assert v2_enabled(copy) and copy.config.mail.rehearsal
    finally:
        copy.close()
        stop(pub, made.id)


def test_the_copys_mailer_refuses_anyone_but_the_operator(pub: Pub,
                                                          smtp: SmtpTestServer) -> None:
    """The second lock: even a message addressed to a tender (were rehearsal mode ever
    bypassed) never leaves; the operator's goes through the real mailer."""
    from email.message import EmailMessage

    from pubsched.mail.compose import Outgoing, Recipient
    from pubsched.mail.mailer import Delivery

    guard = scratch.OperatorOnly(pub.mailer, OPERATOR)
    message = EmailMessage()
    message["Subject"] = "test"
    message.set_content("hello")
    ann = Recipient(EMAILS[0], "Ann")
    with guard.session() as mail:
        refused = mail.send(Outgoing(ann, EMAILS[0], message))
        assert refused.delivery is Delivery.REFUSED and "only the operator" in refused.detail
        assert smtp.received == []
        assert mail.send(Outgoing(ann, OPERATOR.upper(), message)).delivery is (
            Delivery.DELIVERED)
    assert [m.rcpt_tos for m in smtp.accepted] == [(OPERATOR.upper(),)]


def test_the_scratch_url_keeps_the_real_urls_options_and_adds_the_search_path() -> None:
    from psycopg.conninfo import conninfo_to_dict

    from pubsched.config import Config

    class Real:  # only what url_of reads: the dialect and the URL
        dialect = "postgresql"
        config = Config(db_url="postgresql://u:pw@db.example:5433/pub?sslmode=require"
                               "&options=-c%20statement_timeout%3D5000")

    name = "pubsched_rehearsal_0123456789ab"
    parts = conninfo_to_dict(scratch.url_of(Real, name))  # type: ignore[arg-type]
    assert parts["options"] == f"-c statement_timeout=5000 -c search_path={name}"
    assert (parts["dbname"], parts["host"], parts["sslmode"]) == ("pub", "db.example", "require")
    for bad in ("public", "pubsched_rehearsal_x; DROP TABLE pub_tenders"):
        with pytest.raises(BadInput):
            scratch.url_of(Real, bad)  # type: ignore[arg-type]
    Real.config = Config(db_url="host=db1,db2 port=5432,5433 dbname=pub "
                                "options='-c statement_timeout=5000'")  # libpq's other form
    parts = conninfo_to_dict(scratch.url_of(Real, name))  # type: ignore[arg-type]
    assert parts["options"] == f"-c statement_timeout=5000 -c search_path={name}"
    assert (parts["host"], parts["port"]) == ("db1,db2", "5432,5433")
