"""Issue #18: the emails in the pub's words. A real week is sent through the real SMTP
server on loopback (SQLite) and what arrived is read as a tender reads it:
the pub's name in the subject and the sender, each shift once, the zone named once, the
tender's links (their page, their calendar as https and as a webcal:// subscription), the
pub's address in the calendar's LOCATION, the unfilled slots in the operator's copy only;
then the HTML is rendered in Chromium at 375 px, looked at (screenshots under
``PUBSCHED_ARTIFACTS``/screenshots) and measured."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from icalendar import Calendar

from pubsched.engines import v2
from pubsched.mail.compose import Recipient, compose_late_open, compose_schedule
from pubsched.mail.mailer import Delivery, mailer_for
from pubsched.mail.settings import load_mail_settings
from pubsched.mail.wording import own_label, shift_text, zone_words
from pubsched.pub import Pub
from pubsched.week import runs as weeks
from pubsched.week import submissions
from support.browser import PHONE, fits, phone, shot
from support.mail_samples import COMPOSED_AT, ROSTER, THU, TZ
from support.mail_samples import WEEK as SAMPLE_WEEK
from support.pub_web import people
from support.pubs import NOW, WEEK, make_pub
from support.smtp_server import ReceivedMail, SmtpTestServer

PUB_NAME = "The Crown"
ADDRESS = "1 High Street, Hadley"
OPERATOR = "boss@crown.example"
TIMES = re.compile(r"\b\d\d:\d\d\b")
SHIFT_LINE = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{1,2} [A-Z][a-z]{2}, "
                        r"\d\d:\d\d - \d\d:\d\d\b")


def crown(smtp: SmtpTestServer, **extra: str) -> dict[str, str]:
    return smtp.env(PUBSCHED_MAIL_FROM="rota@crown.example", PUBSCHED_PUB_NAME=PUB_NAME,
                    PUBSCHED_PUB_ADDRESS=ADDRESS, PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                    PUBSCHED_SMTP_TIMEOUT="5", **extra)


def sent_week(db_url: str, smtp: SmtpTestServer, **extra: str) -> Iterator[Pub]:
    """A week rostered and sent: Alice offers every shift, Bob only Thursday, Carol none,
    so Friday and Saturday each keep one of their two slots open."""
    pub = make_pub(db_url, load_mail_settings(crown(smtp, **extra)), web=True)
    try:
        team = people(pub)
        assert v2.open_form(pub, WEEK, now=NOW).applied
        ids = [s.id for s in weeks.shifts(pub, WEEK)]
        assert submissions.submit(pub, WEEK, team["Alice"].email, ids, now=NOW).applied
        assert submissions.submit(pub, WEEK, team["Bob"].email, ids[:1], now=NOW).applied
        for step in (v2.close, v2.generate, v2.approve, v2.send):
            assert step(pub, WEEK, now=NOW).applied, step
        yield pub
    finally:
        pub.close()


@pytest.fixture
def sent(db_url: str, smtp: SmtpTestServer) -> Iterator[Pub]:
    yield from sent_week(db_url, smtp)


def parts(mail: ReceivedMail) -> tuple[str, str, Calendar]:
    text, html = mail.message.get_body(("plain",)), mail.message.get_body(("html",))
    assert text is not None and html is not None
    [attachment] = list(mail.message.iter_attachments())
    ics = attachment.get_payload(decode=True)
    assert isinstance(ics, bytes)
    return str(text.get_content()), str(html.get_content()), Calendar.from_ical(ics)


def test_the_schedule_email_speaks_in_the_pubs_name_and_lists_each_shift_once(
        sent: Pub, smtp: SmtpTestServer) -> None:
    mails = {m.rcpt_tos[0]: m for m in smtp.accepted}
    assert sorted(mails) == ["alice@example.com", "bob@example.com"]  # Carol works none
    for address, mail in mails.items():
        message = mail.message
        assert message["Subject"] == f"{PUB_NAME}: your shifts, week of Mon 7 Dec 2026"
        assert str(message["From"]) == f"{PUB_NAME} <rota@crown.example>"
        text, html, calendar = parts(mail)
        assert text.startswith(f"{PUB_NAME}\n\n")
        # each shift once: no line holds more than one shift's pair of times
        assert all(len(TIMES.findall(line)) <= 2 for line in text.splitlines()), text
        assert "18:00-02:00" not in text and "18:00-02:00" not in html  # the stored label
        own, roster = text.split("The whole roster (* = you):")
        events = calendar.walk("VEVENT")
        assert len(SHIFT_LINE.findall(own)) == len(events) >= 1
        assert len(SHIFT_LINE.findall(roster)) == 3
        # the zone named once, in the heading, not after every time
        assert text.count("EST") == 1 and "Times are New York time (EST)." in text
        assert "Still unfilled" not in text and "Still unfilled" not in html  # a tender's copy
        assert text.rstrip().endswith(f"{PUB_NAME}, {ADDRESS}")
        assert {str(e["LOCATION"]) for e in events} == {ADDRESS}
        assert {str(e["SUMMARY"]) for e in events} == {f"Shift at {PUB_NAME}"}
        # the tender's links, written out in the text and drawn as buttons in the HTML
        page, = re.findall(r"https://pub\.example/t/\S+", text)
        webcal, = re.findall(r"webcal://pub\.example/cal/\S+\.ics", text)
        assert "https://" + webcal.removeprefix("webcal://") in text
        assert f'href="{page}"' in html and f'href="{webcal}"' in html
        assert address in mail.rcpt_tos


def test_the_html_is_inline_styled_one_column_with_the_pubs_name_on_top(
        sent: Pub, smtp: SmtpTestServer) -> None:
    _, html, _ = parts(smtp.accepted[0])
    assert "<style" not in html and "class=" not in html  # mail apps drop both
    assert "max-width:600px" in html and "font-size:16px" in html
    assert html.index(PUB_NAME) < html.index("Your shifts</h2>") < html.index(
        "The whole roster</h2>")
    for tag in re.findall(r"<(?:a|td|p|h2|ul)\b[^>]*>", html):
        assert "style=" in tag, tag


def test_the_operators_copy_lists_the_unfilled_slots(db_url: str,
                                                     smtp: SmtpTestServer) -> None:
    for pub in sent_week(db_url, smtp, PUBSCHED_REHEARSAL="1"):
        mails = smtp.accepted
        assert {m.rcpt_tos for m in mails} == {(OPERATOR,)}
        shifts = {s.night: s for s in weeks.shifts(pub, WEEK)}
        assert len(shifts) == 3
        text, html, _ = parts(mails[0])
        _, unfilled = text.split("Still unfilled (this list is only in the operator's copy):")
        assert unfilled.count("1 of 2 slots open") == 2, unfilled  # Friday and Saturday
        assert "Fri 11 Dec, 18:00 - 02:00: 1 of 2 slots open" in unfilled
        assert "Thu 10 Dec" not in unfilled  # filled: Alice and Bob
        assert "Still unfilled</h2>" in html and html.count("1 of 2 slots open") == 2


def test_the_senders_name_in_mail_from_wins_over_the_pubs_name(smtp: SmtpTestServer) -> None:
    settings = load_mail_settings(crown(smtp) | {
        "PUBSCHED_MAIL_FROM": "Rota at the Crown <rota@crown.example>"})
    alice = Recipient("alice@example.com", "Alice")
    with mailer_for(settings).session() as mail:
        outcome = mail.send(compose_schedule(ROSTER, alice, {101}, settings=settings,
                                             now=COMPOSED_AT))
    assert outcome.delivery is Delivery.DELIVERED
    [got] = smtp.accepted
    assert str(got.message["From"]) == "Rota at the Crown <rota@crown.example>"
    assert str(got.message["Subject"]).startswith(f"{PUB_NAME}: ")


def test_the_late_open_note_is_composed_like_the_others(smtp: SmtpTestServer) -> None:
    settings = load_mail_settings(crown(smtp))
    opened = datetime(2026, 12, 2, 14, tzinfo=UTC)
    outgoing = compose_late_open(SAMPLE_WEEK, opened_at=opened,
                                 old_deadline=opened - timedelta(days=1),
                                 new_deadline=opened + timedelta(hours=24), tz=TZ,
                                 settings=settings, now=opened,
                                 admin_url="https://pub.example/admin/weeks/2026-12-07")
    with mailer_for(settings).session() as mail:
        assert mail.send(outgoing).delivery is Delivery.DELIVERED
    [got] = smtp.accepted
    assert got.rcpt_tos == (OPERATOR,)
    assert got.message["Subject"] == (
        f"{PUB_NAME}, week of Mon 7 Dec 2026: form opened late, deadline moved")
    assert str(got.message["From"]) == f"{PUB_NAME} <rota@crown.example>"
    text = got.message.get_body(("plain",))
    html = got.message.get_body(("html",))
    assert text is not None and html is not None
    says = str(text.get_content())
    assert "moved to Thu 3 Dec 09:00 EST (it was Tue 1 Dec 09:00 EST)" in says
    assert "https://pub.example/admin/weeks/2026-12-07" in says
    assert 'href="https://pub.example/admin/weeks/2026-12-07"' in str(html.get_content())
    again = compose_late_open(SAMPLE_WEEK, opened_at=opened + timedelta(days=7),
                              old_deadline=None, new_deadline=opened + timedelta(days=8),
                              tz=TZ, settings=settings, now=opened)
    assert again.message["Message-ID"] != outgoing.message["Message-ID"]  # a second open


def test_a_label_is_shown_beside_the_times_only_when_it_says_more() -> None:
    """The stored label is the times today ('Thu 10 Dec 18:00-02:00') and will be the
    template's words ('Friday night'): the times are always made from the instants."""
    start, end = THU.starts_at, THU.ends_at
    assert shift_text("Thu 10 Dec 18:00-02:00", start, end, TZ) == "Thu 10 Dec, 18:00 - 02:00"
    assert own_label("Thursday 10 December, 18:00 - 02:00", start, end, TZ) is None
    assert shift_text("Late bar", start, end, TZ) == "Thu 10 Dec, 18:00 - 02:00 (Late bar)"
    assert shift_text("Thursday night", start, end, TZ) == "Thu 10 Dec, 18:00 - 02:00"
    assert shift_text("Monday night", start, end, TZ) == (  # on a Thursday: it says more
        "Thu 10 Dec, 18:00 - 02:00 (Monday night)")
    long = shift_text("Festival", start, end + timedelta(days=1), TZ)
    assert long == "Thu 10 Dec, 18:00 - Sat 12 Dec 02:00 (Festival)"  # a day or more: named
    assert zone_words(TZ, [start]) == "New York time (EST)"
    assert zone_words("Europe/London", [start, datetime(2026, 6, 1, tzinfo=UTC)]) == (
        "London time (BST/GMT)")
    assert zone_words("UTC", [start]) == "UTC"


def _emails(message: EmailMessage) -> str:
    html = message.get_body(("html",))
    assert html is not None
    return str(html.get_content())


def test_every_email_reads_on_a_phone(db_url: str, smtp: SmtpTestServer, tmp_path: Path,
                                      browser: Any) -> None:
    """Each kind of email as received, opened at 375 px: no sideways scrolling, 16px
    text, buttons a thumb can hit; screenshots to look at."""
    kinds: dict[str, str] = {}
    for _ in sent_week(db_url, smtp):
        kinds["schedule"] = _emails(smtp.accepted[0].message)
    smtp.clear_received()
    for _ in sent_week(f"sqlite:///{tmp_path}/rehearsal.db", smtp, PUBSCHED_REHEARSAL="1"):
        kinds["schedule-operators-copy"] = _emails(smtp.accepted[0].message)
    smtp.clear_received()
    test_the_late_open_note_is_composed_like_the_others(smtp)
    kinds["late-open"] = _emails(smtp.accepted[0].message)
    for kind, html in kinds.items():
        path = tmp_path / f"{kind}.html"
        path.write_text(html, encoding="utf-8")
        page = phone(browser)
        page.goto(path.as_uri())
        shot(page, f"email-{kind}-375")
        assert fits(page) <= PHONE["width"], kind  # nothing scrolls sideways
        sizes = page.eval_on_selector_all(
            "p, td", "els => els.map(e => parseFloat(getComputedStyle(e).fontSize))")
        assert min(sizes) >= 14 and max(sizes) >= 16, (kind, sizes)
        buttons = page.eval_on_selector_all(
            "a[href]", "els => els.filter(e => getComputedStyle(e).display == "
            "'inline-block').map(e => e.getBoundingClientRect().height)")
        assert buttons and min(buttons) >= 44, (kind, buttons)
        page.context.close()
