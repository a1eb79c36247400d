"""The tick's steps stand alone (issue 29, item 17): one that fails for real (here the
database refuses the covers' expiry: a trigger raises on the move to EXPIRED) is reported
and logged, and the reminders due and the emails queued still go that minute; the tick
is recorded as failed; the next tick, the database willing, does the failed step."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pubsched import covers
from pubsched.pub import Pub
from pubsched.tick.run import STEP_FAILED
from pubsched.tick.status import last, run_tick
from support.pub_covers import SAT, THU, email, sent_week
from support.pubs import NOW, WEEK
from support.smtp_server import SmtpTestServer

THURSDAY_START = NOW.replace(month=12, day=10, hour=23)  # Thu 10 Dec 18:00 New York
# Fri 10 Dec 13:00 New York: Thursday's shift has started, Friday's starts in 5 hours (the
# reminder's lead is 6), Saturday's tomorrow
FRIDAY_NOON = THURSDAY_START + timedelta(hours=19)

REFUSE_EXPIRY = {
    "sqlite": ["CREATE TRIGGER test_no_expiry BEFORE UPDATE OF state ON pub_covers "
               "WHEN NEW.state = 'EXPIRED' BEGIN SELECT RAISE(ABORT, 'expiry refused by "
               "the test'); END"],
    "postgresql": ["CREATE FUNCTION test_no_expiry() RETURNS trigger LANGUAGE plpgsql AS "
                   "$f$ BEGIN RAISE EXCEPTION 'expiry refused by the test'; END $f$",
                   "CREATE TRIGGER test_no_expiry BEFORE UPDATE OF state ON pub_covers "
                   "FOR EACH ROW WHEN (NEW.state = 'EXPIRED') "
                   "EXECUTE FUNCTION test_no_expiry()"],
}
ALLOW_EXPIRY = {"sqlite": ["DROP TRIGGER test_no_expiry"],
                "postgresql": ["DROP TRIGGER test_no_expiry ON pub_covers"]}


def _run(pub: Pub, statements: list[str]) -> None:
    with pub.atomic() as tx:
        for sql in statements:
            tx.execute(sql)


def _subjects(smtp: SmtpTestServer, address: str) -> list[str]:
    return [str(m.message["Subject"]) for m in smtp.accepted_for(address)]


@pytest.mark.both_databases("the database's own refusal (a trigger) inside a real tick")
def test_a_failing_step_does_not_stop_the_reminders_and_the_mail(
        pub: Pub, smtp: SmtpTestServer, caplog: pytest.LogCaptureFixture) -> None:
    ids = sent_week(pub)
    thursday = covers.ask(pub, WEEK, ids[THU], email("ann"), now=NOW)
    saturday = covers.ask(pub, WEEK, ids[SAT], email("eve"), now=NOW)  # offers queued
    assert thursday and saturday
    _run(pub, REFUSE_EXPIRY[pub.dialect])
    before = len(smtp.accepted)

    said = run_tick(pub, FRIDAY_NOON)

    [failed] = [v for v in said if v.reason == STEP_FAILED]
    assert failed.failed and "expiry refused by the test" in failed.failed
    assert failed.message.startswith("tick: ending the requests for cover whose shift has "
                                     "started failed (")
    assert "the rest of the tick ran" in failed.message
    assert "Traceback" not in failed.message
    assert any("ending the requests for cover" in r.getMessage() and r.exc_info
               for r in caplog.records)  # logged with its traceback
    assert covers.get(pub, thursday.detail["cover_id"]).state == covers.OPEN  # type: ignore[union-attr]
    # the steps after it ran: the reminders of Friday (Cat's and Dan's) owed and sent,
    # the offers of Saturday sent
    for name in ("cat", "dan"):
        assert "The pub: your shift today at 18:00" in _subjects(smtp, email(name)), name
    assert "The pub: can you cover Sat 12 Dec?" in _subjects(smtp, email("fay"))
    assert len(smtp.accepted) > before
    record = last(pub)
    assert record is not None and record["last_failure_at"] is not None
    assert "expiry refused by the test" in str(record["last_error"])

    _run(pub, ALLOW_EXPIRY[pub.dialect])
    again = run_tick(pub, FRIDAY_NOON + timedelta(minutes=1))
    assert not [v for v in again if v.reason == STEP_FAILED]
    assert covers.get(pub, thursday.detail["cover_id"]).state == covers.EXPIRED  # type: ignore[union-attr]
