"""Cover requests' rules (pubsched.covers, issue 19) on SQLite (PostgreSQL where marked), with the
pub's real mailer and a real SMTP server on loopback.

Who may take a request, in which order; the take re-judged at its moment; one take moves
the roster once and owes each email once; a cancel drops the offers not yet sent; the
tick ends a request when its shift starts (whatever engine runs the weeks); the emails
read as a tender's phone shows them (plain and HTML, the pub, local times, the note, a
link that names the request and the tender) and carry the calendar change with the UID
the schedule email gave the event; the feed follows the roster."""

from __future__ import annotations

from datetime import date, timedelta
from email.message import EmailMessage
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from icalendar import Calendar

from pubsched import covers
from pubsched.deliveries import outbox as notices
from pubsched.engines.flags import set_v2
from pubsched.people import tenders
from pubsched.people.calendar import shift_uid
from pubsched.pub import Pub
from pubsched.tick.run import tick
from pubsched.verdicts import BadInput
from pubsched.week.view import tender_calendar, week_show
from support.pub_covers import FRI, SAT, THU, cover_mail, email, roster, sent_week
from support.pubs import NOW, OPERATOR, WEEK, make_pub
from support.smtp_server import SmtpTestServer

THURSDAY_START = NOW.replace(month=12, day=10, hour=23)  # Thu 10 Dec 18:00 New York


def names(found: list[tenders.Tender]) -> list[str]:
    return [t.name for t in found]


def ask_ann(pub: Pub, ids: list[int], **kw: Any) -> int:
    asked = covers.ask(pub, WEEK, ids[THU], email("ann"), now=NOW, **kw)
    assert asked.applied, asked
    return int(asked.detail["cover_id"])


def attachment(message: EmailMessage) -> Calendar:
    [part] = [p for p in message.iter_attachments()
              if p.get_content_type() == "text/calendar"]
    return Calendar.from_ical(part.get_content())


def bodies(message: EmailMessage) -> tuple[str, str]:
    plain = message.get_body(("plain",))
    html = message.get_body(("html",))
    assert plain is not None and html is not None
    return plain.get_content(), html.get_content()


# -- who may take it --------------------------------------------------------------------------


def test_offered_to_the_free_least_recently_covering_first(pub: Pub) -> None:
    ids = sent_week(pub)
    cover_id = ask_ann(pub, ids)
    # Bob works that night; the rest are free, none has covered yet: by name
    assert names(covers.eligible(pub, cover_id)) == ["Cat", "Dan", "Eve", "Fay", "Gus"]
    assert covers.take(pub, cover_id, email("fay"), now=NOW)
    eve = covers.ask(pub, WEEK, ids[SAT], email("eve"), now=NOW)
    # Fay covered last: she goes to the end; Dan works Saturday; Ann and Bob are free now
    assert names(covers.eligible(pub, int(eve.detail["cover_id"]))) == [
        "Ann", "Bob", "Cat", "Gus", "Fay"]
    assert eve.detail["offered"] == [email(n) for n in ("ann", "bob", "cat", "gus", "fay")]
    assert covers.eligible(pub, cover_id) == []  # taken: nobody may take it any more


def test_away_inactive_at_their_most_and_the_weeks_own_maximum_are_left_out(pub: Pub) -> None:
    ids = sent_week(pub)
    cover = ask_ann(pub, ids)
    gus = tenders.get(pub, email("gus"))
    with pub.atomic() as tx:  # Eve is away on Thursday (and only then)
        tx.execute("INSERT INTO pub_time_off (tender_id, starts_on, ends_on, created_at) "
                   "VALUES (%s, %s, %s, %s)",
                   [tenders.get(pub, email("eve")).id, "2026-12-09", "2026-12-10", NOW])
        # Cat said "at most 1 this week" on her form, and works Friday
        tx.execute("UPDATE pub_availability SET max_shifts = 1 WHERE tender_id = %s",
                   [tenders.get(pub, email("cat")).id])
        tx.execute("UPDATE pub_tenders SET max_shifts = 0 WHERE id = %s", [gus.id])
    assert tenders.deactivate(pub, email("fay"))
    assert names(covers.eligible(pub, cover)) == ["Dan"]
    why = {j.tender.name: j.why_not for j in _judged(pub, cover)}
    assert why == {"Bob": "they already work that night", "Cat": (
        "they already have as many shifts that week as they can work (1)"), "Dan": None,
        "Eve": "they are away that day", "Fay": "they are not an active tender",
        "Gus": "they already have as many shifts that week as they can work (0)"}


def _judged(pub: Pub, cover_id: int) -> list[Any]:
    from pubsched.covers.eligible import judged

    cover = covers.existing(pub, cover_id)
    with pub.atomic() as tx:
        return judged(tx, {"week_of": cover.week_of, "shift_id": cover.shift_id,
                           "asked_by": cover.asked_by})


def test_a_needed_skill_the_asker_held_is_needed_of_the_taker(pub: Pub) -> None:
    ids = sent_week(pub)
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_shifts SET needs = %s WHERE id = %s", ['["keys"]', ids[THU]])
    for name in ("ann", "gus"):
        assert tenders.edit(pub, email(name), skills=["keys"])
    cover = ask_ann(pub, ids)
    assert names(covers.eligible(pub, cover)) == ["Gus"]
    refused = covers.take(pub, cover, email("cat"), now=NOW)
    assert refused.reason == "CANNOT_TAKE" and "the shift needs keys" in refused.message
    # once Bob, who stays on the shift, holds the keys, anyone may take Ann's place
    assert tenders.edit(pub, email("bob"), skills=["keys"])
    assert names(covers.eligible(pub, cover)) == ["Cat", "Dan", "Eve", "Fay", "Gus"]


# -- asking -----------------------------------------------------------------------------------


def test_only_someone_on_a_shift_of_a_sent_week_not_started_may_ask(pub: Pub) -> None:
    ids = sent_week(pub, send=False)
    refused = covers.ask(pub, WEEK, ids[THU], email("ann"), now=NOW)
    assert (refused.applied, refused.reason) == (False, "WEEK_NOT_SENT")
    from pubsched.engines import actions

    assert actions.perform(pub, "send", WEEK, now=NOW)
    assert covers.ask(pub, WEEK, ids[FRI], email("ann"), now=NOW).reason == "NOT_ON_SHIFT"
    started = covers.ask(pub, WEEK, ids[THU], email("ann"), now=THURSDAY_START)
    assert started.reason == "SHIFT_STARTED"
    assert covers.listed(pub) == []
    assert [m for m in notices.listed(pub) if m.kind != "schedule"] == []  # no cover mail
    with pytest.raises(BadInput, match="no tender"):
        covers.ask(pub, WEEK, ids[THU], "nobody@pub.test", now=NOW)
    with pytest.raises(BadInput, match="not a shift of week"):
        covers.ask(pub, WEEK, 9999, email("ann"), now=NOW)
    with pytest.raises(BadInput, match="at most 500"):
        covers.ask(pub, WEEK, ids[THU], email("ann"), note="x" * 501, now=NOW)
    assert covers.listed(pub) == []


@pytest.mark.both_databases("the ask: the request, its offers and notes in one unit")
def test_asking_owes_each_offer_and_the_operators_note_once(pub: Pub,
                                                            smtp: SmtpTestServer) -> None:
    ids = sent_week(pub)
    cover = ask_ann(pub, ids, note="  Sick, sorry!  ")
    owed = [(n.kind, n.recipient, n.status) for n in notices.listed(pub, about=f"cover:{cover}")]
    crew = {t.name: t.id for t in tenders.all_tenders(pub)}
    assert owed == [("cover_offer", notices.to_tender(crew[n]), "pending")
                    for n in ("Cat", "Dan", "Eve", "Fay", "Gus")] + [
        ("cover_asked", "operator", "pending")]
    assert cover_mail(smtp) == []  # owed, not sent, by the ask
    assert len(covers.deliver(pub, NOW)) == 6
    assert covers.deliver(pub, NOW) == []
    assert sorted(m.rcpt_tos[0] for m in cover_mail(smtp)) == sorted(
        [email(n) for n in ("cat", "dan", "eve", "fay", "gus")] + [OPERATOR])
    assert covers.get(pub, cover) is not None
    assert covers.get(pub, cover).note == "Sick, sorry!"  # type: ignore[union-attr]


# -- taking -----------------------------------------------------------------------------------


def test_a_take_moves_the_assignment_once_and_owes_three_emails(pub: Pub) -> None:
    ids = sent_week(pub)
    cover = ask_ann(pub, ids)
    stamped = pub.query("SELECT approved_at FROM pub_assignments WHERE shift_id = %s "
                        "ORDER BY tender_id", [ids[THU]])
    taken = covers.take(pub, cover, email("dan"), now=NOW + timedelta(hours=1))
    assert taken.applied and taken.detail == {"cover_id": cover, "taken_by": email("dan"),
                                              "from": email("ann")}
    assert roster(pub)[ids[THU]] == ["Bob", "Dan"]
    after = pub.query("SELECT approved_at FROM pub_assignments WHERE shift_id = %s",
                      [ids[THU]])
    assert {str(r["approved_at"]) for r in after} == {str(r["approved_at"]) for r in stamped}
    got = covers.get(pub, cover)
    assert got is not None and (got.state, got.taker_name) == ("TAKEN", "Dan")
    assert got.taken_at == NOW + timedelta(hours=1) == got.closed_at
    [event] = [e for e in pub.covers.history(cover) if e.edge == "take"]
    assert (event.from_state, event.to_state) == ("OPEN", "TAKEN")
    owed = [(n.kind, n.recipient) for n in notices.listed(pub, about=f"cover:{cover}")
            if n.kind == "cover_taken"]
    crew = {t.name: t.id for t in tenders.all_tenders(pub)}
    assert owed == [("cover_taken", notices.to_tender(crew["Ann"])),
                    ("cover_taken", notices.to_tender(crew["Dan"])),
                    ("cover_taken", "operator")]
    assert week_show(pub, WEEK)["state"] == "SENT"  # the week stays sent
    again = covers.take(pub, cover, email("cat"), now=NOW)
    assert (again.reason, "taken by Dan" in again.message) == ("COVER_TAKEN", True)
    assert roster(pub)[ids[THU]] == ["Bob", "Dan"]


def test_covers_work_the_same_under_the_legacy_engine(pub: Pub) -> None:
    """A request is not the week's: ask, take and cancel hold the sent week through the
    engine in charge, whichever it is."""
    ids = sent_week(pub)
    set_v2(pub, False)
    cover = ask_ann(pub, ids)
    assert covers.take(pub, cover, email("cat"), now=NOW)
    assert roster(pub)[ids[THU]] == ["Bob", "Cat"]
    eve = covers.ask(pub, WEEK, ids[SAT], email("eve"), now=NOW)
    assert eve.applied and covers.cancel(pub, int(eve.detail["cover_id"]), now=NOW)
    assert week_show(pub, WEEK)["state"] == "SENT"


def test_the_take_judges_anew_and_a_stale_offer_is_dropped(pub: Pub,
                                                           smtp: SmtpTestServer) -> None:
    ids = sent_week(pub)
    cover = ask_ann(pub, ids)
    cat = tenders.get(pub, email("cat"))
    with pub.atomic() as tx:  # Cat goes away on Thursday after the offer was owed
        tx.execute("INSERT INTO pub_time_off (tender_id, starts_on, ends_on, created_at) "
                   "VALUES (%s, %s, %s, %s)", [cat.id, "2026-12-10", "2026-12-10", NOW])
    refused = covers.take(pub, cover, email("cat"), now=NOW)
    assert refused.reason == "CANNOT_TAKE" and "they are away that day" in refused.message
    covers.deliver(pub, NOW)
    assert cover_mail(smtp, email("cat")) == []  # her offer was dropped, not sent
    statuses = {n.recipient: n.status for n in notices.listed(pub, about=f"cover:{cover}")}
    assert statuses[notices.to_tender(cat.id)] == "dropped"
    assert roster(pub)[ids[THU]] == ["Ann", "Bob"]
    late = covers.take(pub, cover, email("dan"), now=THURSDAY_START)
    assert late.reason == "SHIFT_STARTED"
    with pytest.raises(BadInput, match="no cover request 99"):
        covers.take(pub, 99, email("dan"), now=NOW)
    with pytest.raises(BadInput, match="no tender"):
        covers.take(pub, cover, "nobody@pub.test", now=NOW)


# -- cancelling and expiring -------------------------------------------------------------------


@pytest.mark.both_databases("the cancel's compare-and-set")
def test_a_cancel_drops_unsent_offers_and_tells_the_asker_and_the_operator(
        pub: Pub, smtp: SmtpTestServer) -> None:
    ids = sent_week(pub)
    cover = ask_ann(pub, ids)
    assert covers.cancel(pub, cover, now=NOW)
    covers.deliver(pub, NOW)
    subjects = sorted((m.rcpt_tos[0], str(m.message["Subject"])) for m in cover_mail(smtp))
    assert subjects == [
        ("ann@pub.test", "The pub: your cover request for Thu 10 Dec is called off"),
        (OPERATOR, "The pub: Ann asked for cover, Thu 10 Dec"),
        (OPERATOR, "The pub: Ann's cover request for Thu 10 Dec is called off")]
    assert roster(pub)[ids[THU]] == ["Ann", "Bob"]
    assert covers.cancel(pub, cover, now=NOW).reason == "COVER_CANCELLED"
    assert ask_ann(pub, ids) == cover + 1  # a new request may follow


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "legacy"])
def test_the_tick_ends_a_request_when_its_shift_starts(pub: Pub, smtp: SmtpTestServer,
                                                       v2: bool) -> None:
    ids = sent_week(pub)
    cover = ask_ann(pub, ids)
    set_v2(pub, v2)
    assert covers.expire_due(pub, THURSDAY_START - timedelta(seconds=1)) == []
    assert covers.get(pub, cover).state == "OPEN"  # type: ignore[union-attr]
    said = [v.message for v in tick(pub, THURSDAY_START)]
    assert f"tick: request {cover} ended, nobody took Ann's Thu 10 Dec, 18:00 - 02:00, " \
           "New York time (EST)" in said
    got = covers.get(pub, cover)
    assert got is not None and (got.state, got.closed_at) == ("EXPIRED", THURSDAY_START)
    expired = sorted((m.rcpt_tos[0], str(m.message["Subject"])) for m in cover_mail(smtp)
                     if "nobody covered" in str(m.message["Subject"]))
    assert expired == [("ann@pub.test", "The pub: nobody covered your shift on Thu 10 Dec"),
                       (OPERATOR, "The pub: nobody covered Ann, Thu 10 Dec")]
    # the offers were not sent once it had ended; a second tick sends nothing more
    assert not any("can you cover" in str(m.message["Subject"]) for m in cover_mail(smtp))
    before = len(smtp.accepted)
    assert [v for v in tick(pub, THURSDAY_START) if "request" in v.message] == []
    assert len(smtp.accepted) == before
    assert roster(pub)[ids[THU]] == ["Ann", "Bob"]
    assert week_show(pub, WEEK)["covers"][0]["state"] == "EXPIRED"


def test_the_operators_notes_wait_for_an_address(db_url: str, smtp: SmtpTestServer) -> None:
    from pubsched.mail.settings import load_mail_settings

    pub = make_pub(db_url, load_mail_settings(
        smtp.env(PUBSCHED_MAIL_FROM="pub@pub.test")))
    try:
        set_v2(pub, True, now=NOW)
        ids = sent_week(pub)
        cover = ask_ann(pub, ids)
        out = covers.deliver(pub, NOW)
        assert [v.failed for v in out if v.failed] == [
            "the operator's note has nowhere to go: set PUBSCHED_OPERATOR_EMAIL"]
        [asked] = [n for n in notices.listed(pub, about=f"cover:{cover}")
                   if n.kind == "cover_asked"]
        assert (asked.status, asked.attempts) == ("failed", 1)  # tried again later
    finally:
        pub.close()


# -- the emails, read as a phone shows them ----------------------------------------------------


def test_the_offer_names_the_pub_the_shift_the_note_and_a_link_to_take_it(
        pub: Pub, smtp: SmtpTestServer) -> None:
    ids = sent_week(pub)
    cover = ask_ann(pub, ids, note="Sick, sorry! <b>")
    covers.deliver(pub, NOW)
    [offer] = cover_mail(smtp, email("cat"))
    message = offer.message
    assert message["Subject"] == "The pub: can you cover Thu 10 Dec?"
    assert message["To"] == "Cat <cat@pub.test>"
    plain, html = bodies(message)
    for text in (plain, html):
        assert "Thu 10 Dec, 18:00 - 02:00, New York time (EST)" in text
        assert "Ann can&#x27;t work" in text or "Ann can't work" in text
    assert "Sick, sorry! <b>" in plain and "Sick, sorry! &lt;b&gt;" in html
    [link] = [line for line in plain.splitlines() if "/c/" in line]
    token = link.strip().rsplit("/c/", 1)[1]
    cat = tenders.get(pub, email("cat"))
    assert covers.verify_offer(pub.config, token) == (cover, cat.id, cat.link_version)
    assert f'href="{link.strip()}"' in html and "I&#x27;ll take it" in html
    assert covers.verify_offer(pub.config, token[:-2] + "xx") is None
    from pubsched.people.links import tender_token

    assert covers.verify_offer(pub.config, tender_token(pub.config, cat.id)) is None


@pytest.mark.both_databases("the take, and both calendars read back")
def test_the_take_cancels_the_askers_event_by_its_uid_and_adds_the_takers(
        pub: Pub, smtp: SmtpTestServer) -> None:
    ids = sent_week(pub)
    [schedule] = [m for m in smtp.accepted_for(email("ann"))]  # the schedule email
    [published] = attachment(schedule.message).walk("VEVENT")
    cover = ask_ann(pub, ids)
    assert covers.take(pub, cover, email("dan"), now=NOW)
    covers.deliver(pub, NOW)
    week = date.fromisoformat(WEEK)

    [to_ann] = [m for m in cover_mail(smtp, email("ann"))]
    cancel = attachment(to_ann.message)
    [gone] = cancel.walk("VEVENT")
    assert str(cancel["METHOD"]) == "CANCEL" and str(gone["STATUS"]) == "CANCELLED"
    assert str(gone["UID"]) == str(published["UID"]) == shift_uid(week, ids[THU],
                                                                  email("ann"))
    assert int(gone["SEQUENCE"]) > int(published.get("SEQUENCE", 0))
    plain, html = bodies(to_ann.message)
    assert "Dan is taking your shift, Thu 10 Dec, 18:00 - 02:00" in plain
    assert "Dan is taking your shift" in html

    [to_dan] = [m for m in cover_mail(smtp, email("dan")) if "working" in
                str(m.message["Subject"])]
    added = attachment(to_dan.message)
    [event] = added.walk("VEVENT")
    assert str(added["METHOD"]) == "PUBLISH"
    assert str(event["UID"]) == shift_uid(week, ids[THU], email("dan"))
    assert event.decoded("DTSTART") == THURSDAY_START
    plain, _ = bodies(to_dan.message)
    assert "Thanks for covering for Ann" in plain and "/t/" in plain

    [to_boss] = [m for m in cover_mail(smtp, OPERATOR) if "covers" in
                 str(m.message["Subject"])]
    assert to_boss.message["Subject"] == "The pub: Dan covers Ann, Thu 10 Dec"
    assert "/admin/covers" in bodies(to_boss.message)[0]

    # the feeds follow the roster: Ann's has no Thursday, Dan's has it, same UIDs
    def uids(name: str) -> set[str]:
        feed = Calendar.from_ical(tender_calendar(pub, tenders.get(pub, email(name))))
        return {str(e["UID"]) for e in feed.walk("VEVENT")}

    assert shift_uid(week, ids[THU], email("ann")) not in uids("ann")
    assert shift_uid(week, ids[THU], email("dan")) in uids("dan")


def test_every_cover_email_reads_on_a_phone(pub: Pub, smtp: SmtpTestServer, tmp_path: Any,
                                            browser: Any) -> None:
    """Each kind of cover email as received, opened in Chromium at 375 px: nothing scrolls
    sideways, the text is 16px, a button a thumb can hit; screenshots to look at."""
    from support.browser import PHONE, fits, phone, shot

    ids = sent_week(pub)
    first = ask_ann(pub, ids, note="Sick, sorry! Back on Saturday.")
    covers.deliver(pub, NOW)
    assert covers.take(pub, first, email("dan"), now=NOW)
    second = covers.ask(pub, WEEK, ids[SAT], email("eve"), now=NOW).detail["cover_id"]
    assert covers.cancel(pub, second, now=NOW)
    third = covers.ask(pub, WEEK, ids[FRI], email("cat"), now=NOW).detail["cover_id"]
    covers.deliver(pub, NOW)
    tick(pub, NOW.replace(month=12, day=11, hour=23))  # Friday's shift starts: it ends
    assert covers.get(pub, third).state == "EXPIRED"  # type: ignore[union-attr]
    kinds: dict[str, EmailMessage] = {}
    for m in cover_mail(smtp):
        kind = str(m.message["Message-ID"]).split(".")[2]  # <cover.ID.KIND.WHO@...>
        who = "operator" if m.rcpt_tos[0] == OPERATOR else "tender"
        if kind == "taken" and who == "tender":
            who = "taker" if "working" in str(m.message["Subject"]) else "asker"
        kinds.setdefault(f"{kind}-{who}", m.message)
    assert sorted(kinds) == [  # every kind of email, each recipient's
        "asked-operator", "cancelled-operator", "cancelled-tender", "expired-operator",
        "expired-tender", "offer-tender", "taken-asker", "taken-operator", "taken-taker"]
    for kind, message in kinds.items():
        path = tmp_path / f"{kind}.html"
        path.write_text(bodies(message)[1], encoding="utf-8")
        page = phone(browser)
        page.goto(path.as_uri())
        shot(page, f"email-cover-{kind}-375")
        assert fits(page) <= PHONE["width"], kind
        sizes = page.eval_on_selector_all(
            "p, td", "els => els.map(e => parseFloat(getComputedStyle(e).fontSize))")
        assert min(sizes) >= 14 and max(sizes) >= 16, (kind, sizes)
        buttons = page.eval_on_selector_all(
            "a[href]", "els => els.filter(e => getComputedStyle(e).display == "
            "'inline-block').map(e => e.getBoundingClientRect().height)")
        assert not buttons or min(buttons) >= 44, (kind, buttons)
        page.context.close()


@pytest.mark.parametrize(("tz", "starts", "hours", "said"), [
    ("America/New_York", "2026-03-08T22:00:00+00:00", 8,
     "Sun 8 Mar, 18:00 - 02:00, New York time (EDT)"),
    # through the spring-forward at 02:00: eight hours end at 03:00 EDT
    ("America/New_York", "2026-03-07T23:00:00+00:00", 8,
     "Sat 7 Mar, 18:00 - 03:00, New York time (EST)"),
    ("Europe/London", "2026-03-29T17:00:00+00:00", 8,
     "Sun 29 Mar, 18:00 - 02:00, London time (BST)"),
    # through the fall-back at 02:00 BST: nine hours end at 02:00 GMT
    ("Europe/London", "2026-10-24T17:00:00+00:00", 9,
     "Sat 24 Oct, 18:00 - 02:00, London time (BST)"),
])
def test_a_cover_email_says_the_shift_in_the_pubs_time_across_the_clock_change(
        tz: str, starts: str, hours: int, said: str) -> None:
    """The words come from the shift's instants in the pub's zone, on the nights the
    clocks change too; the calendar file is named by the local day."""
    from datetime import datetime

    from pubsched.mail import cover as words
    from pubsched.mail.compose import CoverFacts, Recipient, ShiftLine, compose_cover
    from pubsched.mail.settings import load_mail_settings

    start = datetime.fromisoformat(starts)
    shift = ShiftLine(7, "Night", start, start + timedelta(hours=hours), tz)
    facts = CoverFacts(3, date(2026, 3, 2), shift, "Ann", note=None)
    settings = load_mail_settings({"PUBSCHED_MAIL_FROM": "pub@pub.test",
                                   "PUBSCHED_PUB_NAME": "The Crown"})
    note = words.offer(facts, "The Crown", "Cat", "https://pub.test/c/x")
    sent = compose_cover(note, Recipient("cat@pub.test", "Cat"), facts, kind="offer",
                         settings=settings, now=start, calendar="add")
    plain, html = bodies(sent.message)
    assert said in plain and said in html
    [part] = list(sent.message.iter_attachments())
    assert part.get_filename() == f"pub-shift-{start.astimezone(ZoneInfo(tz)):%Y-%m-%d}-add.ics"
