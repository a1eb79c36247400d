"""Every link in every email pubsched sends opens the page it names (issue 17 item 4: the
nudge linked ``BASE/weeks/WEEK``, a 404). Each kind of email is produced for real (the
schedule email of a send, both of the tick's nudges, an operator's resend) through the real
SMTP server on loopback, and each link in it, text and HTML alike, is fetched from the real
app (Starlette's TestClient on ``create_app``), logged in as the operator, on SQLite and
PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import pytest
from starlette.testclient import TestClient

from pubsched.db.instants import maybe_instant
from pubsched.deliveries.deliver import deliver
from pubsched.engines import operator_notes, v2
from pubsched.engines.actions import perform
from pubsched.engines.v2_tick import v2_tick
from pubsched.mail.settings import load_mail_settings
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from pubsched.week import submissions
from pubsched.week.view import week_show
from support.pub_web import login, people, web_settings
from support.pubs import BASE_URL, NOW, WEEK, make_pub
from support.smtp_server import ReceivedMail, SmtpTestServer

OPERATOR = "boss@pub.example"
BASE = BASE_URL  # the web pub's PUBSCHED_BASE_URL: the client is that host
URL = re.compile(r"https?://[^\s<>\"']+")
WEBCAL = re.compile(r"webcal://[^\s<>\"']+")


@pytest.fixture
def pub(db_url: str, smtp: SmtpTestServer) -> Iterator[Pub]:
    mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@pub.example",
                                       PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                       PUBSCHED_SMTP_TIMEOUT="2"))
    made = make_pub(db_url, mail, web=True)
    try:
        yield made
    finally:
        made.close()


def links_of(mail: ReceivedMail, pattern: re.Pattern[str] = URL) -> list[str]:
    found: list[str] = []
    for part in mail.message.walk():
        if part.get_content_type() in ("text/plain", "text/html"):
            found += pattern.findall(part.get_content())
    return sorted(set(found))


@pytest.mark.both_databases("the tick's unsent-alert claim reaches PostgreSQL only here")
def test_every_link_of_every_email_opens_the_page_it_names(
        pub: Pub, smtp: SmtpTestServer) -> None:
    team = people(pub)
    assert v2.open_form(pub, WEEK, now=NOW).applied
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    for tender in team.values():
        assert submissions.submit(pub, WEEK, tender.email, ids, now=NOW).applied
    kinds: dict[str, list[ReceivedMail]] = {}

    def mailed(kind: str) -> None:
        kinds[kind] = list(smtp.accepted)
        smtp.clear_received()

    def nudged(at: datetime) -> None:  # the engine's tick owes it, the deliveries send it
        v2_tick(pub, at)
        deliver(pub, operator_notes.COMPOSERS, at)

    shown = week_show(pub, WEEK)
    nudged(_instant(shown["deadline_at"]) + timedelta(minutes=1))
    mailed("nudge: ready to close")
    assert v2.close(pub, WEEK, now=NOW).applied and v2.generate(pub, WEEK, now=NOW).applied
    assert v2.approve(pub, WEEK, now=NOW).applied
    nudged(_instant(shown["send_window_at"]) + timedelta(minutes=1))
    mailed("nudge: approved not sent")
    alice = team["Alice"].email
    smtp.drop_after_data(for_recipient=alice)  # left uncertain: the operator resends it
    assert v2.send(pub, WEEK, now=NOW).applied
    mailed("schedule")
    smtp.clear_faults()
    assert perform(pub, "resend", WEEK, now=NOW, email=alice).applied
    mailed("resend")
    assert all(kinds.values()), {k: len(v) for k, v in kinds.items()}
    assert all(m.rcpt_tos == (OPERATOR,) for k in kinds if k.startswith("nudge")
               for m in kinds[k])

    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url=BASE) as client:
        login(client)
        for kind, mails in kinds.items():
            for mail in mails:
                found = links_of(mail)
                if kind.startswith("nudge"):  # the nudge is how the operator gets there
                    assert found, (kind, mail.message.get_content())
                else:  # the tender's page and calendar, the calendar also as webcal://
                    paths = {urlsplit(link).path.split("/")[1] for link in found}
                    assert paths == {"t", "cal"}, (kind, found)
                    subscribe = links_of(mail, WEBCAL)
                    assert len(subscribe) == 1, (kind, subscribe)
                    https = "https://" + subscribe[0].removeprefix("webcal://")
                    assert https in found, (kind, subscribe, found)
                    feed = client.get(https)
                    assert feed.headers["content-type"].startswith("text/calendar")
                for link in found:
                    assert link.startswith(BASE + "/"), (kind, link)
                    page = client.get(link, follow_redirects=False)
                    assert page.status_code == 200, (kind, link, page.status_code)
                    path = urlsplit(link).path
                    if path.startswith("/admin/weeks/"):  # names a week: opens that week
                        assert path.rsplit("/", 1)[1] in page.text or WEEK in page.text


def _instant(raw: object) -> datetime:
    moment = maybe_instant(raw)
    assert moment is not None
    return moment
