"""What the operator reads: each action's verdict in the pub's words and local time, on both
engines (and PostgreSQL where marked); never a state name, a reason code or UTC in the
sentence."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from pubsched import words
from pubsched.engines import actions
from pubsched.engines.flags import set_v2
from pubsched.pub import Pub
from pubsched.verdicts import Verdict
from pubsched.week.runs import shifts
from pubsched.week.submissions import submit
from support.pub_engines import EMAILS, NEXT, WEEK, moment
from support.smtp_server import SmtpTestServer

pytestmark = pytest.mark.pub_setup("engines")
MACHINE = re.compile(r"DRAFT|COLLECTING|CLOSED|ASSIGNED|APPROVED|SENT|->|UTC|\+00:00|"
                     r"INVARIANT|STATE_MISMATCH|LEASE_HELD|(?<!show )\d{4}-\d\d-\d\d")


def said(pub: Pub, name: str, week: str = WEEK, **options: object) -> Verdict:
    """``perform``'s verdict, which it says in words (only a date in a command hint)."""
    at = options.pop("now", moment(pub, week, "opens_at"))
    got = actions.perform(pub, name, week, now=at, **options)
    assert not MACHINE.search(got.message), got.message
    return got


@pytest.mark.both_databases("sentences from the moments each database hands back")
@pytest.mark.parametrize("v2", [True, False], ids=["v2", "legacy"])
def test_the_lifecycle_is_told_in_words_and_local_time(pub: Pub, v2: bool) -> None:
    set_v2(pub, v2)
    assert said(pub, "open").message == (
        "The form for the week of 14 Dec is open until Wed 9 Dec, 20:00 EST.")
    later = moment(pub, WEEK, "deadline_at") + timedelta(hours=13)
    assert said(pub, "extend", deadline=later).message == (
        "The form for the week of 14 Dec now stays open until Thu 10 Dec, 09:00 EST.")
    ids = [s.id for s in shifts(pub, WEEK)]
    for email in EMAILS[:2]:
        assert submit(pub, WEEK, email, ids[:2], now=moment(pub, WEEK, "opens_at", 60))
    assert said(pub, "close").message == (
        "The form for the week of 14 Dec is closed: make the roster next.")
    assert said(pub, "generate").message == (
        "The roster for the week of 14 Dec is made: 4 of 6 slots filled, 2 left empty. "
        "Check it, then approve it.")
    assert said(pub, "approve").message == (
        "The roster for the week of 14 Dec is approved: send it before Fri 11 Dec, 18:00 EST.")
    assert said(pub, "unapprove").message == (
        "The roster for the week of 14 Dec is no longer approved: change it, then approve "
        "it again.")


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "legacy"])
def test_refusals_say_why_and_what_to_do(pub: Pub, v2: bool) -> None:
    set_v2(pub, v2)
    assert said(pub, "open")
    other = said(pub, "open", NEXT, now=moment(pub, WEEK, "opens_at"))
    assert (other.reason, other.message) == (
        "INVARIANT", "Another week's form is open (the week of 14 Dec): close it first.")
    early = said(pub, "approve")
    assert (early.reason, early.message) == (
        "STATE_MISMATCH", "Cannot approve the roster of the week of 14 Dec: it is taking "
        "availability: its form is open.")
    assert early.detail["engine_message"] != early.message  # the engine's text is kept


def test_the_legacy_engine_asked_for_autopilot_points_to_the_cutover(pub: Pub) -> None:
    set_v2(pub, False)
    assert said(pub, "open")
    got = said(pub, "autopilot", on=True)
    assert got.reason == "NOT_IN_LEGACY" and "cutover page" in got.message


def test_the_words_need_no_database() -> None:
    """Wording is pure: the facts of the week are handed over (what ``perform`` reads)."""
    facts = words.WeekFacts(ZoneInfo("America/New_York"), state="COLLECTING",
                            times={"deadline_at": datetime(2026, 12, 10, 1, tzinfo=UTC)},
                            open_week="2026-12-14")
    opened = words.told("open", "2026-12-21", Verdict(True), facts)
    assert opened.message == "The form for the week of 21 Dec is open until Wed 9 Dec, 20:00 EST."
    refused = words.told("open", "2026-12-21", Verdict(False, "INVARIANT", message="x"), facts)
    assert refused.message == "Another week's form is open (the week of 14 Dec): close it first."
    assert refused.detail["engine_message"] == "x"
    busy = words.told("approve", "2026-12-21", Verdict(False, "LEASE_HELD"),
                      words.WeekFacts(UTC, state="ASSIGNED", acting_kind="send"))
    assert busy.message == ("Cannot approve the roster of the week of 21 Dec right now: the "
                            "schedule is being sent. Wait a minute and look again.")


def test_when_names_the_zone_of_the_pub(pub: Pub) -> None:
    at = moment(pub, WEEK, "deadline_at")
    assert words.when(at, pub.config.tz) == "Wed 9 Dec, 20:00 EST"
    assert words.week_words("2027-01-04") == "the week of 4 Jan"


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "legacy"])
def test_a_send_says_who_it_reached_and_who_it_did_not(pub: Pub, smtp: SmtpTestServer,
                                                        v2: bool) -> None:
    """A refused recipient is named, the SMTP server's words and Python's are not."""
    set_v2(pub, v2)
    assert said(pub, "open")
    ids = [s.id for s in shifts(pub, WEEK)]
    for email in EMAILS[:2]:
        assert submit(pub, WEEK, email, ids[:1], now=moment(pub, WEEK, "opens_at", 60))
    for name in ("close", "generate", "approve"):
        assert said(pub, name), name
    smtp.refuse_recipient(EMAILS[1])
    failed = said(pub, "send")
    assert failed.failed and failed.message == (
        f"The schedule for the week of 14 Dec did not reach 1 tender ({EMAILS[1]}); 1 got "
        f"it. Each one's reason is on the week's page (`pubsched week show {WEEK}`); fix "
        "it, then send again: only those are mailed.")
    assert "550" not in failed.message and "SMTP" not in failed.message
    smtp.clear_faults()  # the refused one is accepted again: only they are mailed
    assert said(pub, "send").message == (
        "The schedule for the week of 14 Dec is sent (1 email delivered).")
