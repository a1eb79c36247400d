"""The schedule email and the nudges, parsed back as a mail client would read them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage

import pytest
from icalendar import Calendar

from pubsched.mail.compose import (
    Nudge,
    Outgoing,
    Recipient,
    Roster,
    ShiftLine,
    TenderLinks,
    compose_nudge,
    compose_schedule,
)
from pubsched.mail.settings import MailSettings
from pubsched.people.calendar import shift_uid
from support.mail_samples import (
    ALICE,
    BOB,
    COMPOSED_AT,
    FRI,
    OPERATOR,
    OWN,
    ROSTER,
    SAT,
    THU,
    TZ,
    WEEK,
)

SETTINGS = MailSettings(mail_from="pub@example.com", operator_email=OPERATOR)
REHEARSAL = replace(SETTINGS, rehearsal=True)


def reparsed(outgoing: Outgoing) -> EmailMessage:
    """The message as the far end sees it: bytes, parsed with the modern policy."""
    parsed = message_from_bytes(outgoing.message.as_bytes(), policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def text_html_ics(message: EmailMessage) -> tuple[str, str, Calendar]:
    text = message.get_body(("plain",))
    html = message.get_body(("html",))
    assert text is not None and html is not None
    [attachment] = list(message.iter_attachments())
    assert attachment.get_content_type() == "text/calendar"
    assert attachment.get_param("method") == "PUBLISH"
    assert attachment.get_filename() == f"pub-shifts-{WEEK}.ics"
    ics = attachment.get_payload(decode=True)
    assert isinstance(ics, bytes)
    return str(text.get_content()), str(html.get_content()), Calendar.from_ical(ics)


def schedule_for(tender: Recipient, settings: MailSettings = SETTINGS) -> Outgoing:
    return compose_schedule(ROSTER, tender, OWN[tender], settings=settings, now=COMPOSED_AT)


def test_the_schedule_has_text_html_and_a_calendar_of_the_tenders_own_shifts() -> None:
    message = reparsed(schedule_for(ALICE))
    assert message["To"] == "Alice <alice@example.com>"
    assert message["From"] == "The pub <pub@example.com>"  # PUBSCHED_PUB_NAME's default
    assert message["Subject"] == "The pub: your shifts, week of Mon 7 Dec 2026"
    assert message.get_content_type() == "multipart/mixed"
    text, html, calendar = text_html_ics(message)

    # their own shifts first, then the whole roster in time order, Friday (not theirs) too
    own_part, roster_part = text.split("The whole roster (* = you):")
    # ("Thursday night" on a Thursday says nothing the times do not: left out)
    assert "* Thu 10 Dec, 18:00 - 02:00\n" in own_part and "night" not in text
    assert "\nTimes are New York time (EST).\n" in own_part
    assert "Sat 12 Dec" in own_part and "Fri 11 Dec" not in own_part
    assert roster_part.index("Thu 10") < roster_part.index("Fri 11") < roster_part.index("Sat 12")
    assert "- Fri 11 Dec, 18:00 - 02:00\n    Carol" in roster_part
    assert html.index("Your shifts") < html.index("The whole roster")
    assert "Carol" in html

    assert calendar["METHOD"] == "PUBLISH"
    events = calendar.walk("VEVENT")
    assert [(e.decoded("DTSTART"), e.decoded("DTEND")) for e in events] == [
        (THU.starts_at, THU.ends_at),
        (SAT.starts_at, SAT.ends_at),
    ]
    assert all(e.decoded("DTSTART").utcoffset().total_seconds() == 0 for e in events)
    assert b"DTSTART:20261210T230000Z" in calendar.to_ical()
    assert [str(e["UID"]) for e in events] == [
        shift_uid(WEEK, 101, ALICE.email),
        shift_uid(WEEK, 103, ALICE.email),
    ]
    assert [str(e["SUMMARY"]) for e in events] == [
        "Shift at The pub",  # "Thursday night": the event's own time says it
        "Shift at The pub",
    ]


def test_calendar_uids_are_stable_per_week_shift_and_tender() -> None:
    """Re-importing a later copy updates the events instead of adding new ones."""
    later = compose_schedule(
        ROSTER, ALICE, OWN[ALICE], settings=SETTINGS, now=datetime(2026, 12, 6, tzinfo=UTC)
    )
    first = text_html_ics(reparsed(schedule_for(ALICE)))[2]
    again = text_html_ics(reparsed(later))[2]
    assert [e["UID"] for e in first.walk("VEVENT")] == [e["UID"] for e in again.walk("VEVENT")]
    assert shift_uid(WEEK, 101, "Alice@Example.com") == shift_uid(WEEK, 101, ALICE.email)
    uids = {
        shift_uid(WEEK, 101, ALICE.email),
        shift_uid(WEEK, 101, BOB.email),
        shift_uid(WEEK, 102, ALICE.email),
        shift_uid(date(2026, 12, 14), 101, ALICE.email),
    }
    assert len(uids) == 4
    assert all("alice" not in uid for uid in uids)


def test_html_escapes_every_name_and_label() -> None:
    # a recipient's own name obeys the address rule (no < > "), but a roster name stored
    # before the rule need not: each is escaped
    hostile = Recipient("eve@example.com", "Eve & co's")
    stored = 'Mal <script>alert("x")</script>'
    shift = replace(THU, label="<b>Thu</b>", assigned=(hostile.name, stored))
    roster = Roster(WEEK, (shift,))
    html = text_html_ics(
        reparsed(compose_schedule(roster, hostile, {101}, settings=SETTINGS, now=COMPOSED_AT))
    )[1]
    assert "<script>" not in html and "<b>Thu</b>" not in html
    assert "Hi Eve &amp; co&#x27;s," in html
    assert "Mal &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "&lt;b&gt;Thu&lt;/b&gt;" in html


def test_a_tenders_message_is_addressed_to_that_tender_alone() -> None:
    for tender in OWN:
        outgoing = schedule_for(tender)
        assert outgoing.envelope_to == tender.email and not outgoing.rehearsal
        message = reparsed(outgoing)
        addressed = " ".join(str(message.get(h, "")) for h in ("To", "Cc", "Bcc"))
        assert tender.email in addressed
        assert OPERATOR not in addressed
        assert OPERATOR not in message.as_string()


def test_rehearsal_sends_to_the_operator_and_names_the_intended_tender_in_the_subject() -> None:
    outgoing = schedule_for(BOB, REHEARSAL)
    assert outgoing.intended == BOB
    assert outgoing.envelope_to == OPERATOR and outgoing.rehearsal
    message = reparsed(outgoing)
    assert message["To"] == f"Operator <{OPERATOR}>"
    assert message["Subject"] == (
        "[rehearsal, for Bob <bob@example.com>] The pub: your shifts, week of Mon 7 Dec 2026"
    )
    assert message["X-Pubsched-Intended-For"] == BOB.email
    assert message["Message-ID"] != reparsed(schedule_for(BOB))["Message-ID"]


def test_the_message_id_is_the_same_each_time_a_message_is_composed() -> None:
    """An operator's resend of an uncertain recipient then looks like the same message."""
    assert schedule_for(ALICE).message["Message-ID"] == schedule_for(ALICE).message["Message-ID"]
    assert schedule_for(ALICE).message["Message-ID"] != schedule_for(BOB).message["Message-ID"]


@pytest.mark.parametrize(
    ("nudge", "subject", "says"),
    [
        (Nudge.READY_TO_CLOSE, "The pub, week of Mon 7 Dec 2026: ready to close and generate?",
         "deadline"),
        (Nudge.APPROVED_NOT_SENT, "The pub, week of Mon 7 Dec 2026: approved but not sent",
         "send window"),
    ],
)
def test_nudges_go_to_the_operator(nudge: Nudge, subject: str, says: str) -> None:
    due = datetime(2026, 12, 3, 23, tzinfo=UTC)
    outgoing = compose_nudge(
        nudge, WEEK, due_at=due, tz=TZ, settings=SETTINGS, now=COMPOSED_AT, admin_url="https://pub/admin"
    )
    assert outgoing.envelope_to == OPERATOR == outgoing.intended.email
    message = reparsed(outgoing)
    assert message["Subject"] == subject
    body = message.get_body(("plain",))
    assert body is not None
    content = str(body.get_content())
    assert says in content and "Thu 3 Dec 18:00 EST" in content and "https://pub/admin" in content


def test_a_nudge_with_no_operator_to_send_to_is_an_error() -> None:
    with pytest.raises(ValueError, match="PUBSCHED_OPERATOR_EMAIL"):
        compose_nudge(
            Nudge.READY_TO_CLOSE, WEEK, due_at=COMPOSED_AT, tz=TZ, settings=MailSettings(),
            now=COMPOSED_AT,
        )


def test_bad_input_is_refused_before_any_message_is_made() -> None:
    with pytest.raises(ValueError, match="aware UTC"):
        replace(THU, starts_at=datetime(2026, 12, 10, 18))
    with pytest.raises(ValueError, match="after starts_at"):
        replace(THU, ends_at=THU.starts_at)
    with pytest.raises(ValueError, match="time zone"):
        replace(THU, tz="Mars/Olympus")
    with pytest.raises(ValueError, match="repeat"):
        Roster(WEEK, (THU, THU))
    with pytest.raises(ValueError, match="not a bare address"):
        Recipient("alice", "Alice")
    with pytest.raises(ValueError, match="no shift"):
        compose_schedule(ROSTER, ALICE, set(), settings=SETTINGS, now=COMPOSED_AT)
    with pytest.raises(ValueError, match="not in the roster"):
        compose_schedule(ROSTER, ALICE, {999}, settings=SETTINGS, now=COMPOSED_AT)
    with pytest.raises(ValueError, match="aware"):
        compose_schedule(ROSTER, ALICE, {101}, settings=SETTINGS, now=datetime(2026, 12, 5))


def test_a_shift_within_one_day_shows_one_day() -> None:
    afternoon = ShiftLine(
        7,
        "Sunday brunch",
        datetime(2026, 12, 13, 16, tzinfo=UTC),
        datetime(2026, 12, 13, 20, tzinfo=UTC),
        TZ,
        (),
    )
    text = text_html_ics(
        reparsed(
            compose_schedule(Roster(WEEK, (afternoon, FRI)), ALICE, {7}, settings=SETTINGS,
                             now=COMPOSED_AT)
        )
    )[0]
    assert "* Sun 13 Dec, 11:00 - 15:00 (Sunday brunch)" in text
    assert "- Fri 11 Dec, 18:00 - 02:00\n    Carol" in text


def test_the_tenders_links_are_in_both_parts_and_the_subscription_is_webcal() -> None:
    links = TenderLinks("https://pub.example/t/tok", "https://pub.example/cal/cal.ics",
                        "webcal://pub.example/cal/cal.ics")
    outgoing = compose_schedule(ROSTER, ALICE, OWN[ALICE], settings=SETTINGS, now=COMPOSED_AT,
                                links=links)
    text, html, _ = text_html_ics(reparsed(outgoing))
    for link in (links.page, links.calendar, links.webcal):
        assert link in text and f'href="{link}"' in html
    assert "Open your page" in html and "Add your shifts to your calendar" in html
    with pytest.raises(ValueError, match="webcal"):
        TenderLinks(links.page, links.calendar, links.calendar)
    with pytest.raises(ValueError, match="http"):
        TenderLinks("ftp://pub.example/t/tok", links.calendar, links.webcal)
