"""What the covers' web tests share (tests/pubsched/test_web_covers.py in-process,
test_browser_covers.py in Chromium): a pub with real mail, a sent week with a roster, and
reading the offer link out of an email the SMTP server received.

The week: WEEK (support.pubs', shifts Thu 10, Fri 11 and Sat 12 Dec from 18:00 New
York), sent with Alice on Thursday, Bob on Friday and Carol on Saturday (each offered only
that one), so that a request of Alice's for Thursday is offered to Bob and Carol.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from pubsched.engines import v2
from pubsched.mail.settings import load_mail_settings
from pubsched.pub import Pub
from pubsched.week import submissions
from pubsched.week.runs import Shift, shifts
from support.pub_web import Tender, people
from support.pubs import NOW, WEEK, make_pub
from support.smtp_server import ReceivedMail, SmtpTestServer

OPERATOR = "boss@pub.example"


def cover_pub(url: str, smtp: SmtpTestServer) -> Pub:
    """The web tests' pub (three tenders, signed links, v2) with mail to ``smtp``."""
    mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@pub.example",
                                       PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                       PUBSCHED_PUB_NAME="The Crown",
                                       PUBSCHED_SMTP_TIMEOUT="5"))
    return make_pub(url, mail, web=True)


def sent_week(pub: Pub) -> list[Shift]:
    """WEEK sent: Alice on Thursday, Bob on Friday, Carol on Saturday."""
    assert v2.open_form(pub, WEEK, now=NOW).applied
    week_shifts = shifts(pub, WEEK)
    team = people(pub)
    for name, shift in zip(("Alice", "Bob", "Carol"), week_shifts, strict=False):
        assert submissions.submit(pub, WEEK, team[name].email, [shift.id], now=NOW).applied
    for step in (v2.close, v2.generate, v2.approve, v2.send):
        assert step(pub, WEEK, now=NOW).applied, step
    return week_shifts


def team(pub: Pub) -> dict[str, Tender]:
    return people(pub)


def after_start(shift: Shift) -> datetime:
    """A minute after ``shift`` starts."""
    start = shift.starts_at
    moment = start if isinstance(start, datetime) else datetime.fromisoformat(str(start))
    return moment + timedelta(minutes=1)


OFFER_LINK = re.compile(r"https?://[^\s\"'<>]+/c/[A-Za-z0-9_.\-]+")


def text_of(mail: ReceivedMail) -> str:
    """The plain-text part of a received email."""
    body = mail.message.get_body(preferencelist=("plain",))
    assert body is not None, mail.message
    return str(body.get_content())


def html_of(mail: ReceivedMail) -> str:
    body = mail.message.get_body(preferencelist=("html",))
    assert body is not None, mail.message
    return str(body.get_content())


def offers_to(smtp: SmtpTestServer, email: str) -> list[str]:
    """The offer links in the emails ``email`` received (plain text), oldest first."""
    found: list[str] = []
    for mail in smtp.received:
        if email in mail.rcpt_tos:
            found += OFFER_LINK.findall(text_of(mail))
    return found


def path_of(url: str) -> str:
    """An absolute link's path (the tests' app is not at the pub's base URL)."""
    return "/" + url.split("://", 1)[1].split("/", 1)[1]
