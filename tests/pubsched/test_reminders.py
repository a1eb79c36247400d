"""The tick's reminders (pubsched.tick.reminders) on SQLite (PostgreSQL where marked), with a
real SMTP server on loopback: each kind sent once at its moment and not a minute before; a refused
one retried by a later tick; one that became untrue by its turn dropped; `0` turns each
off; away tenders, inactive ones and those who switched theirs off get none; a ticker
that was down past the thing sends nothing late; and in the weeks the clocks change (New
York, London; spring, autumn) each comes at its moment on the pub's wall clock. The race
of several ticker processes is test_reminders_race.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, time, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

import pytest

from pubsched import covers
from pubsched.config import Config
from pubsched.db.instants import instant
from pubsched.engines import v2
from pubsched.engines.flags import set_v2
from pubsched.people import links, tenders, usual
from pubsched.pub import Pub
from pubsched.tick.run import tick
from pubsched.verdicts import BadInput
from pubsched.week import runs as weeks
from pubsched.week import template
from pubsched.week.runs import shifts, times_of
from pubsched.week.time import local_to_utc
from support.pub_cli import Cli
from support.pub_reminders import (
    away,
    on_shift,
    outbox,
    parts,
    reminded,
    reminded_of,
    reminders,
    run_week,
    statuses,
)
from support.pubs import NEXT, NOW, OPERATOR, WEEK, crew
from support.smtp_server import SmtpTestServer

CREW = (("ann", None), ("bob", None), ("cat", None), ("dan", None))
EMAILS = [f"{name}@pub.test" for name, _ in CREW]
EVERYONE: dict[str, list[int] | None] = {email: None for email in EMAILS}
# every shift but Saturday's has people to spare; Saturday has only Ann: one of its two
# slots stays empty, so the week is sent short
SATURDAY_SHORT: dict[str, list[int] | None] = {
    "ann@pub.test": None, "bob@pub.test": [0, 1], "cat@pub.test": [0, 1],
    "dan@pub.test": [0, 1]}
NY = ZoneInfo("America/New_York")


def ticked(pub: Pub, smtp: SmtpTestServer, at: datetime) -> list[str]:
    """Tick at ``at``; the reminders the server took in that tick, as ``KIND RECIPIENT``
    (the kind as its Message-ID says it: form, shift, review, short), sorted."""
    before = len(reminders(smtp))
    tick(pub, at)
    return sorted(f"{str(m.message['Message-ID'])[len('<remind-'):].split('.')[0]} {to}"
                  for m in reminders(smtp)[before:] for to in m.rcpt_tos)


def start_of(shift: weeks.Shift) -> datetime:
    return instant(shift.starts_at)


def deadline_of(pub: Pub, week: str) -> datetime:
    row = pub.runs.get(week)
    assert row is not None
    return instant(row["deadline_at"])


# -- before each shift -------------------------------------------------------------------------


def test_each_tender_on_a_shift_is_reminded_once_six_hours_before_it(
        pub: Pub, smtp: SmtpTestServer) -> None:
    crew(pub, *CREW)
    thursday, friday, _ = run_week(pub, WEEK, EVERYONE, at=NOW)
    smtp.clear_received()
    start = start_of(thursday)  # Thu 10 Dec 18:00 EST = 23:00 UTC
    assert ticked(pub, smtp, start - timedelta(hours=6, minutes=1)) == []
    assert ticked(pub, smtp, start - timedelta(hours=6)) == [  # 12:00 in New York
        f"shift {email}" for email in on_shift(pub, thursday.id)]
    for later in (timedelta(hours=5), timedelta(minutes=1)):
        assert ticked(pub, smtp, start - later) == []  # once per person per shift
    assert reminded(smtp, "shift") == on_shift(pub, thursday.id)
    # Friday's come at Friday's noon, not with Thursday's
    tick(pub, start_of(friday) - timedelta(hours=6))
    assert reminded(smtp, "shift") == sorted(on_shift(pub, thursday.id)
                                             + on_shift(pub, friday.id))


def test_the_shift_reminder_reads_as_a_phone_shows_it(pub: Pub, smtp: SmtpTestServer) -> None:
    pub.config = replace(pub.config, mail=replace(pub.config.mail, pub_name="The Crown",
                                                  pub_address="1 High Street, Hadley"))
    crew(pub, *CREW)
    thursday, *_ = run_week(pub, WEEK, EVERYONE, at=NOW)
    smtp.clear_received()
    tick(pub, start_of(thursday) - timedelta(hours=6))
    first, second = on_shift(pub, thursday.id)
    [mail] = [m for m in reminders(smtp) if m.rcpt_tos == (first,)]
    text, html = parts(mail)
    me, other = first.split("@")[0], second.split("@")[0]
    assert str(mail.message["Subject"]).strip() == "The Crown: your shift today at 18:00"
    assert str(mail.message["To"]) == f"{me} <{first}>"
    for words in (f"Hi {me},", "your shift at The Crown starts today at 18:00",
                  "Thu 10 Dec, 18:00 - 02:00", f"With {other}.", "New York time (EST)",
                  "Where: The Crown, 1 High Street, Hadley.",
                  "You get this email 6 hours before each of your shifts",
                  "Switch these reminders off"):
        assert words in text, words
        assert words.replace("'", "&#x27;") in html, words
    page = next(line.strip() for line in text.splitlines() if "/t/" in line)
    assert f'href="{page}"' in html  # the button is the same link
    assert f"{page}#reminders" in text and f'href="{page}#reminders"' in html  # the switch
    tender = links.tender_for_link(pub, page.rsplit("/t/", 1)[1])
    assert tender is not None and tender.email == first  # their own working link
    for engine_word in ("COLLECTING", "SENT", "lease", "remind_shift", "tender:"):
        assert engine_word not in text and engine_word not in html


def test_no_reminder_for_a_tender_who_switched_them_off_is_away_or_inactive(
        pub: Pub, smtp: SmtpTestServer) -> None:
    crew(pub, *CREW)
    thursday, friday, saturday = run_week(pub, WEEK, EVERYONE, at=NOW)
    off, on = on_shift(pub, thursday.id)
    assert tenders.edit(pub, off, shift_reminders=False)
    gone, stays = on_shift(pub, friday.id)
    assert tenders.deactivate(pub, gone)
    away_one, there = on_shift(pub, saturday.id)
    away(pub, away_one, date(2026, 12, 12), date(2026, 12, 12))  # Saturday off
    smtp.clear_received()
    for shift in (thursday, friday, saturday):
        tick(pub, start_of(shift) - timedelta(hours=6))
    assert reminded_of(smtp, thursday.id) == [on]  # not the one who switched it off
    assert reminded_of(smtp, friday.id) == [stays]  # not the one deactivated
    assert reminded_of(smtp, saturday.id) == [  # not the one away that night
        e for e in (away_one, there) if e not in (away_one, gone)]


def test_a_refused_reminder_is_retried_by_a_later_tick_and_sent_once(
        pub: Pub, smtp: SmtpTestServer) -> None:
    crew(pub, *CREW)
    thursday, *_ = run_week(pub, WEEK, EVERYONE, at=NOW)
    smtp.clear_received()
    first, second = on_shift(pub, thursday.id)
    smtp.refuse_recipient(first)
    moment = start_of(thursday) - timedelta(hours=6)
    out = tick(pub, moment)
    [failed] = [v for v in out if v.failed]  # the tick says which, and exits 1 for it
    assert failed.message.startswith("tick: an email did not go through (")
    assert first in failed.message and failed.message.endswith("the next tick tries again")
    assert reminded(smtp, "shift") == [second]
    smtp.clear_faults()
    again = tick(pub, moment + timedelta(minutes=1))
    assert not any(v.failed for v in again)
    assert reminded(smtp, "shift") == sorted([first, second])
    tick(pub, moment + timedelta(minutes=2))
    assert reminded(smtp, "shift") == sorted([first, second])  # once each
    assert statuses(pub, "remind_shift") == ["sent", "sent"]


def test_a_reminder_untrue_by_its_turn_is_dropped(pub: Pub, smtp: SmtpTestServer) -> None:
    """Owed, refused, then no longer true (the tender deactivated; the shift started before
    the retry): the next tick drops it instead of sending it."""
    crew(pub, *CREW)
    thursday, friday, _ = run_week(pub, WEEK, EVERYONE, at=NOW)
    smtp.clear_received()
    first, second = on_shift(pub, thursday.id)
    for email in (first, second):
        smtp.refuse_recipient(email)
    moment = start_of(thursday) - timedelta(hours=6)
    tick(pub, moment)
    assert statuses(pub, "remind_shift") == ["failed", "failed"]
    smtp.clear_faults()
    assert tenders.deactivate(pub, first)
    assert ticked(pub, smtp, moment + timedelta(minutes=1)) == [f"shift {second}"]
    assert ("remind_shift", f"shift:{thursday.id}", f"tender:{_id(pub, first)}",
            "dropped") in outbox(pub)
    # a reminder refused until its shift began is not sent after it began
    late = on_shift(pub, friday.id)[0]
    smtp.refuse_recipient(late)
    tick(pub, start_of(friday) - timedelta(hours=6))
    smtp.clear_faults()
    tick(pub, start_of(friday) + timedelta(minutes=1))
    assert late not in [to for m in reminders(smtp) for to in m.rcpt_tos
                        if f"remind-shift.{friday.id}" in str(m.message["Message-ID"])]
    assert ("remind_shift", f"shift:{friday.id}", f"tender:{_id(pub, late)}",
            "dropped") in outbox(pub)


def _id(pub: Pub, email: str) -> int:
    return tenders.get(pub, email).id


def test_a_ticker_down_past_the_shift_sends_nothing_late(pub: Pub, smtp: SmtpTestServer
                                                         ) -> None:
    """The window: owed from the moment until the shift starts. A ticker back a minute
    before the start still reminds; one back after it owes nothing for that shift."""
    crew(pub, *CREW)
    thursday, friday, _ = run_week(pub, WEEK, EVERYONE, at=NOW)
    smtp.clear_received()
    tick(pub, start_of(thursday) + timedelta(minutes=1))  # down all Thursday afternoon
    assert reminded(smtp, "shift") == []
    assert not [row for row in outbox(pub) if row[1] == f"shift:{thursday.id}"]
    tick(pub, start_of(friday) - timedelta(minutes=1))  # down until just before Friday's
    assert reminded(smtp, "shift") == on_shift(pub, friday.id)


# -- the form --------------------------------------------------------------------------------


def test_who_has_not_answered_is_reminded_once_a_day_before_the_deadline(
        pub: Pub, smtp: SmtpTestServer) -> None:
    crew(pub, *CREW, ("eve", None))
    assert tenders.deactivate(pub, "eve@pub.test")
    away(pub, "cat@pub.test", date(2026, 12, 10), date(2026, 12, 12))  # every shift night
    away(pub, "dan@pub.test", date(2026, 12, 11), date(2026, 12, 11))  # one of them
    with pub.atomic() as tx:  # Bob saved a usual answer (Thursdays): the close uses it
        usual.write(tx, tenders.get(pub, "bob@pub.test").id, [(3, "18:00")], None, NOW)
    assert v2.open_form(pub, WEEK, now=NOW)
    from pubsched.week.submissions import submit
    assert submit(pub, WEEK, "ann@pub.test", [], now=NOW)  # "none of them" is an answer
    deadline = deadline_of(pub, WEEK)  # Wed 2 Dec 20:00 EST
    moment = deadline - timedelta(hours=24)
    assert ticked(pub, smtp, moment - timedelta(minutes=1)) == []
    assert ticked(pub, smtp, moment) == ["form bob@pub.test", "form dan@pub.test"]
    assert ticked(pub, smtp, moment + timedelta(hours=3)) == []  # once
    [bob] = [m for m in reminders(smtp) if m.rcpt_tos == ("bob@pub.test",)]
    text, html = parts(bob)
    assert str(bob.message["Subject"]).strip() == (
        "The pub: which shifts can you work? The form closes Wed 2 Dec 20:00 EST")
    for words in ("Hi bob,", "week of Mon 7 Dec 2026 closes Wed 2 Dec 20:00 EST",
                  "Open your form", "your usual answer is used for you"):
        assert words in text and words in html
    [dan] = [m for m in reminders(smtp) if m.rcpt_tos == ("dan@pub.test",)]
    assert "usual" not in parts(dan)[0]  # Dan has none
    page = next(line.strip() for line in text.splitlines() if "/t/" in line)
    assert links.tender_for_link(pub, page.rsplit("/t/", 1)[1]) == tenders.get(
        pub, "bob@pub.test")


def test_an_extension_tells_those_reminded_the_new_deadline_once_after_a_quiet_hour(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """Issue 29, item 2: each tender reminded of a deadline that then moved is told the new
    one, once, answered or not (the email says which), when the hour after the move is
    over; the reminder before the new deadline is that same email, never a second one."""
    crew(pub, *CREW)
    assert v2.open_form(pub, WEEK, now=NOW)
    first = deadline_of(pub, WEEK)
    smtp.refuse_recipient("ann@pub.test")
    tick(pub, first - timedelta(hours=24))
    assert reminded(smtp, "form") == ["bob@pub.test", "cat@pub.test", "dan@pub.test"]
    smtp.clear_faults()
    from pubsched.week.submissions import submit
    assert submit(pub, WEEK, "ann@pub.test", [], now=first - timedelta(hours=23))
    assert submit(pub, WEEK, "bob@pub.test", [], now=first - timedelta(hours=23))
    tick(pub, first - timedelta(hours=22))  # Ann's refused reminder: she has answered
    assert reminded(smtp, "form") == ["bob@pub.test", "cat@pub.test", "dan@pub.test"]
    later = first + timedelta(days=2)  # Fri 4 Dec 20:00 EST
    moved = first - timedelta(hours=2)
    assert v2.extend(pub, WEEK, later, now=moved)
    assert ticked(pub, smtp, moved + timedelta(minutes=59)) == []  # the quiet hour
    assert ticked(pub, smtp, moved + timedelta(hours=1)) == [
        "moved bob@pub.test", "moved cat@pub.test", "moved dan@pub.test"]
    told = {m.rcpt_tos[0]: parts(m)[0] for m in reminders(smtp)[-3:]}
    for text in told.values():
        assert "now closes Fri 4 Dec 20:00 EST, not Wed 2 Dec 20:00 EST" in text
    assert "Your answer is in" in told["bob@pub.test"]
    assert "Your answer is not in yet" in told["cat@pub.test"]
    # once: not again later, nor before the new deadline (the same email)
    assert ticked(pub, smtp, moved + timedelta(hours=2)) == []
    assert ticked(pub, smtp, later - timedelta(hours=24)) == []
    assert reminded(smtp).count("cat@pub.test") == 2


# -- the operator --------------------------------------------------------------------------------


@pytest.mark.both_databases("the review note's queries")
def test_the_operator_hears_once_that_an_autopilot_roster_waits(pub: Pub,
                                                                 smtp: SmtpTestServer) -> None:
    crew(pub, *CREW)
    row = weeks.ensure_week(pub, WEEK, now=NOW)
    weeks.set_autopilot(pub, WEEK, True)
    opens = instant(row["opens_at"])
    tick(pub, opens)
    from pubsched.week.submissions import submit
    for email in EMAILS[:3]:
        assert submit(pub, WEEK, email, [s.id for s in shifts(pub, WEEK)][:2], now=opens)
    assert submit(pub, WEEK, "dan@pub.test", [], now=opens)
    times = times_of(pub, WEEK)
    assert not reminded(smtp, "review")
    # the close, then the generate, then the note, in one tick
    assert ticked(pub, smtp, times.generate_at) == [f"review {OPERATOR}"]
    tick(pub, times.generate_at + timedelta(hours=5))
    [note] = [m for m in reminders(smtp) if "remind-review" in str(m.message["Message-ID"])]
    assert note.rcpt_tos == (OPERATOR,)
    text, html = parts(note)
    assert str(note.message["Subject"]).strip() == ("The pub, week of Mon 7 Dec 2026: a "
                                                    "roster to review")
    for words in ("Autopilot made the roster for the week of Mon 7 Dec 2026 at Thu 3 Dec "
                  "10:00 EST: 4 of 6 slots filled, 2 empty.",
                  "then approve it and send it before Fri 4 Dec 18:00 EST",
                  f"/admin/weeks/{WEEK}"):
        assert words in text and words in html
    assert "Review the roster" in html


def test_a_roster_made_by_hand_needs_no_review_note(pub: Pub, smtp: SmtpTestServer) -> None:
    crew(pub, *CREW)
    run_week(pub, WEEK, EVERYONE, at=NOW, send=False)  # the operator generated it
    assert v2.unapprove(pub, WEEK, now=NOW)  # back to ASSIGNED, waiting
    tick(pub, NOW + timedelta(days=3))
    assert reminded(smtp, "review") == []


def test_the_legacy_crons_roster_is_a_review_note_too(pub: Pub, smtp: SmtpTestServer) -> None:
    set_v2(pub, False, now=NOW)  # no weeks yet: the legacy engine runs, its crons generate
    crew(pub, *CREW)
    assert weeks.create_week(pub, WEEK, now=NOW, door=False)
    times = times_of(pub, WEEK)
    tick(pub, times.opens_at)
    tick(pub, times.deadline_at)
    tick(pub, times.generate_at)
    tick(pub, times.generate_at + timedelta(minutes=1))
    assert reminded(smtp, "review") == [OPERATOR]


def test_the_operator_is_told_a_day_before_a_short_shift_once(pub: Pub,
                                                               smtp: SmtpTestServer) -> None:
    crew(pub, *CREW)
    thursday, friday, saturday = run_week(pub, WEEK, SATURDAY_SHORT, at=NOW)
    assert len(on_shift(pub, saturday.id)) == 1
    smtp.clear_received()
    for shift in (thursday, friday):
        tick(pub, start_of(shift) - timedelta(hours=24))
    moment = start_of(saturday) - timedelta(hours=24)
    tick(pub, moment - timedelta(minutes=1))
    assert reminded(smtp, "short") == []  # Thursday and Friday are full
    assert [x for x in ticked(pub, smtp, moment) if x.startswith("short")] == [
        f"short {OPERATOR}"]
    tick(pub, moment + timedelta(hours=1))
    [note] = [m for m in reminders(smtp) if "remind-short" in str(m.message["Message-ID"])]
    assert note.rcpt_tos == (OPERATOR,)
    text, html = parts(note)
    assert str(note.message["Subject"]).strip() == "The pub: Sat 12 Dec 18:00 is short"
    for words in ("Sat 12 Dec, 18:00 - 02:00 starts tomorrow at 18:00 and is short. Times "
                  "are New York time (EST).", "1 of 2 on the roster (ann): 1 more needed.",
                  f"/admin/weeks/{WEEK}"):
        assert words in text and words in html


def test_an_open_cover_is_short_and_a_taken_one_moves_the_reminder(
        pub: Pub, smtp: SmtpTestServer) -> None:
    """A cover asked and not taken: the shift, full on the roster, is short to the operator
    a day before, and the asker (still on it) is told so in their reminder. A cover taken
    in time: no note, and the reminder goes to the taker, not the asker."""
    crew(pub, *CREW)
    thursday, friday, _ = run_week(pub, WEEK, EVERYONE, at=NOW)
    asker, stays = on_shift(pub, thursday.id)
    asked = covers.ask(pub, WEEK, thursday.id, asker, now=NOW + timedelta(days=1))
    assert asked
    tick(pub, start_of(thursday) - timedelta(hours=24))
    [note] = [m for m in reminders(smtp) if "remind-short" in str(m.message["Message-ID"])]
    text = parts(note)[0]
    assert "is short." in text and "on the roster" not in text  # full, but for the cover
    assert f"{tenders.get(pub, asker).name} asked for cover and nobody has taken it yet." in text
    tick(pub, start_of(thursday) - timedelta(hours=6))
    assert reminded_of(smtp, thursday.id) == sorted([asker, stays])
    [theirs] = [m for m in reminders(smtp) if m.rcpt_tos == (asker,)]
    assert "You asked for cover and nobody has taken it yet" in parts(theirs)[0]
    [other] = [m for m in reminders(smtp) if m.rcpt_tos == (stays,)]
    assert "asked for cover" not in parts(other)[0]

    f_asker, f_stays = on_shift(pub, friday.id)
    taker = next(e for e in EMAILS if e not in (f_asker, f_stays))
    made = covers.ask(pub, WEEK, friday.id, f_asker, now=NOW + timedelta(days=1))
    assert covers.take(pub, int(made.detail["cover_id"]), taker,
                       now=NOW + timedelta(days=2)).applied
    tick(pub, start_of(friday) - timedelta(hours=24))
    assert reminded(smtp, "short") == [OPERATOR]  # Thursday's only
    tick(pub, start_of(friday) - timedelta(hours=6))
    assert reminded_of(smtp, friday.id) == sorted([taker, f_stays])


def test_no_operator_address_owes_no_operator_note(pub: Pub, smtp: SmtpTestServer) -> None:
    pub.config = replace(pub.config, mail=replace(pub.config.mail, operator_email=None))
    crew(pub, *CREW)
    _, _, saturday = run_week(pub, WEEK, SATURDAY_SHORT, at=NOW)
    tick(pub, start_of(saturday) - timedelta(hours=24))
    assert [k for k, *_ in outbox(pub) if k in ("remind_short", "remind_review")] == []


# -- the settings ------------------------------------------------------------------------------


@pytest.mark.parametrize("off", [None, "remind_unanswered_hours", "remind_shift_hours",
                                 "short_hours"])
def test_zero_turns_each_reminder_off(pub: Pub, smtp: SmtpTestServer, off: str | None) -> None:
    """One setup that owes one of each kind (the next week's form unanswered, a shift, a
    short Saturday); with one lead at 0, that kind is not sent and the others are."""
    if off is not None:
        pub.config = replace(pub.config, **cast(dict[str, Any], {off: 0.0}))
    crew(pub, *CREW)
    thursday, _, saturday = run_week(pub, WEEK, SATURDAY_SHORT, at=NOW)
    assert v2.open_form(pub, NEXT, now=NOW + timedelta(days=7))
    for at in (deadline_of(pub, NEXT) - timedelta(hours=24),
               start_of(thursday) - timedelta(hours=6),
               start_of(saturday) - timedelta(hours=24)):
        tick(pub, at)
    got = {kind for kind in ("form", "shift", "short") if reminded(smtp, kind)}
    expected = {"remind_unanswered_hours": "form", "remind_shift_hours": "shift",
                "short_hours": "short"}
    assert got == {"form", "shift", "short"} - ({expected[off]} if off else set())


def test_the_settings_are_read_and_checked_at_start_up() -> None:
    config = Config.from_env({})
    assert (config.remind_unanswered_hours, config.remind_shift_hours,
            config.short_hours) == (24.0, 6.0, 24.0)
    config = Config.from_env({"PUBSCHED_REMIND_UNANSWERED_HOURS": "12",
                              "PUBSCHED_REMIND_SHIFT_HOURS": "1.5",
                              "PUBSCHED_SHORT_HOURS": "0"})
    assert (config.remind_unanswered_hours, config.remind_shift_hours,
            config.short_hours) == (12.0, 1.5, 0.0)
    for name in ("PUBSCHED_REMIND_UNANSWERED_HOURS", "PUBSCHED_REMIND_SHIFT_HOURS",
                 "PUBSCHED_SHORT_HOURS"):
        for bad in ("soon", "-1", "337", "nan"):
            with pytest.raises(BadInput, match=f"{name} must be a number of hours from 0 "
                               "to 336"):
                Config.from_env({name: bad})


def test_the_cli_switches_a_tenders_reminders_and_a_bad_setting_is_exit_2(
        db_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    run = Cli(db_url, capsys)
    run.ok("tender", "add", "Ann", "ann@pub.example")
    assert run.tenders()["ann@pub.example"]["shift_reminders"] is True
    run.ok("tender", "edit", "ann@pub.example", "--shift-reminders", "off")
    assert run.tenders()["ann@pub.example"]["shift_reminders"] is False
    assert run("tender", "edit", "ann@pub.example", "--shift-reminders", "maybe").code == 2
    monkeypatch.setenv("PUBSCHED_REMIND_SHIFT_HOURS", "six")
    bad = run("tick", "--now", "2026-12-10T17:00:00Z")
    assert bad.code == 2 and "PUBSCHED_REMIND_SHIFT_HOURS must be a number" in bad.err


# -- the weeks the clocks change ---------------------------------------------------------------

# (zone, the Sunday the clocks change, +1: spring forward / -1: fall back)
CHANGES = [("America/New_York", date(2027, 3, 14), 1), ("America/New_York", date(2026, 11, 1), -1),
           ("Europe/London", date(2027, 3, 28), 1), ("Europe/London", date(2026, 10, 25), -1)]


@pytest.mark.parametrize(("zone", "sunday", "spring"), CHANGES,
                         ids=["new-york-spring", "new-york-autumn", "london-spring",
                              "london-autumn"])
def test_in_the_weeks_the_clocks_change_reminders_come_at_the_wall_clock_moment(
        pub: Pub, smtp: SmtpTestServer, zone: str, sunday: date, spring: int) -> None:
    """A Sunday lunch, 12:00-16:00, on the day the clocks change; the leads span the
    change: the short note (24 h: Saturday 12:00), the shift reminder (12 h: Sunday 00:00),
    and the next week's form with its deadline moved to that Sunday 20:00 (24 h: Saturday
    20:00). Each comes when the pub's clock shows that time, an hour before or after the
    elapsed-time moment, and not a minute earlier."""
    tz = ZoneInfo(zone)
    pub.config = replace(pub.config, tz=tz, remind_shift_hours=12.0)
    with pub.atomic() as tx:
        tx.execute("DELETE FROM pub_shift_template")
    assert template.add(pub, "Sunday lunch", "sun", "12:00", "16:00", slots=2)
    crew(pub, ("ann", None), ("bob", None))
    week = (sunday - timedelta(days=6)).isoformat()
    following = (sunday + timedelta(days=1)).isoformat()
    [lunch] = run_week(pub, week, {"ann@pub.test": None}, at=times_of(pub, week).opens_at)
    assert v2.open_form(pub, following, now=times_of(pub, following).opens_at)
    deadline = local_to_utc(sunday, time(20, 0), tz)
    assert v2.extend(pub, following, deadline, now=times_of(pub, following).opens_at)
    start = start_of(lunch)
    saturday = sunday - timedelta(days=1)
    moments = {"short": local_to_utc(saturday, time(12, 0), tz),
               "shift": local_to_utc(sunday, time(0, 0), tz),
               "form": local_to_utc(saturday, time(20, 0), tz)}
    elapsed = {"short": start - timedelta(hours=24), "shift": start - timedelta(hours=12),
               "form": deadline - timedelta(hours=24)}
    for kind, at in sorted(moments.items(), key=lambda kv: kv[1]):
        # the test means something: the clocks change between the moment and its thing
        assert at - elapsed[kind] == timedelta(hours=spring), kind
        before = len(reminded(smtp, kind))
        tick(pub, at - timedelta(minutes=1))
        assert len(reminded(smtp, kind)) == before == 0, kind
        tick(pub, at)
        assert reminded(smtp, kind), kind
    assert reminded(smtp, "shift") == ["ann@pub.test"]
    assert reminded(smtp, "short") == [OPERATOR]
    assert reminded(smtp, "form") == ["ann@pub.test", "bob@pub.test"]
    [shift_mail] = [m for m in reminders(smtp) if "remind-shift" in str(m.message["Message-ID"])]
    text = parts(shift_mail)[0]
    assert "starts today at 12:00" in text
    assert f"{sunday:%a} {sunday.day} {sunday:%b}, 12:00 - 16:00" in text
    [short] = [m for m in reminders(smtp) if "remind-short" in str(m.message["Message-ID"])]
    assert "starts tomorrow at 12:00" in parts(short)[0]
    form = next(m for m in reminders(smtp) if "remind-form" in str(m.message["Message-ID"]))
    assert f"closes {sunday:%a} {sunday.day} {sunday:%b} 20:00" in parts(form)[0]


# -- the switch on the web, in-process -----------------------------------------------------------


@pytest.mark.both_databases("the reminders switch's update")
@pytest.mark.pub_setup("web")
def test_the_tenders_switch_posts_and_refuses_what_it_must(pub: Pub) -> None:
    from starlette.testclient import TestClient

    from pubsched.web.app import create_app
    from pubsched.web.logs import loggable_path
    from support.pub_web import people, web_settings

    alice = people(pub)["Alice"]
    page = alice.form(pub)
    with TestClient(create_app(pub, web_settings(), clock=lambda: NOW),
                    base_url="https://testserver") as client:
        shown = client.get(page).text
        assert 'id="reminders"' in shown and "You get an email 6 hours before" in shown
        off = client.post(page + "/reminders", data={"on": "0"}, follow_redirects=False)
        assert off.status_code == 303
        assert off.headers["location"] == f"{page}?reminders=off#reminders"
        assert tenders.get(pub, alice.email).shift_reminders is False
        after = client.get(off.headers["location"]).text
        assert "Saved: reminders before your shifts are off." in after
        assert "Turn reminders on" in after
        for bad in ({"on": "yes"}, {}):
            refused = client.post(page + "/reminders", data=bad, follow_redirects=False)
            assert refused.status_code == 400 and "Nothing changed" in refused.text
        assert tenders.get(pub, alice.email).shift_reminders is False
        stranger = client.post("/t/not-a-link/reminders", data={"on": "1"},
                               follow_redirects=False)
        assert (stranger.status_code, stranger.headers["location"]) == (303, "/t/not-a-link")
        assert client.get("/t/not-a-link").status_code == 404
        assert tenders.get(pub, alice.email).shift_reminders is False
        from_elsewhere = client.post(page + "/reminders", data={"on": "1"},
                                     headers={"origin": "https://evil.example"},
                                     follow_redirects=False)
        assert from_elsewhere.status_code == 403
        assert tenders.get(pub, alice.email).shift_reminders is False
        assert client.post(page + "/reminders", data={"on": "1"},
                           follow_redirects=False).status_code == 303
        assert tenders.get(pub, alice.email).shift_reminders is True
    # a log line names the tender, never the token, and keeps what the post did
    assert loggable_path(page + "/reminders", pub.config) == (
        f"/t/<tender {alice.id}>/reminders")
    assert loggable_path("/t/not-a-link/reminders", pub.config) == "/t/<bad link>/reminders"
