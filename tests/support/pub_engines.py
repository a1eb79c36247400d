"""Helpers for the engine tests (legacy, cutover): a pub on a migrated database, tenders,
a week's moments, and SQL by hand.

tests/pubsched/conftest.py makes the pub these tests get (``make_pub`` with
``mail_settings`` and ``add_tenders``) for a module marked ``pub_setup("engines")``; the
databases are support.pub_db's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pubsched.config import Config
from pubsched.db import open_store
from pubsched.mail.settings import MailSettings, load_mail_settings
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.week.runs import times_of
from support.smtp_server import SmtpTestServer

OPERATOR = "ops@pub.example"
WEEK = "2026-12-14"      # opens Mon 12-07 10:00 NY, deadline Wed 12-09 20:00, generate Thu 10:00
NEXT = "2026-12-21"
AFTER = "2026-12-28"
EMAILS = [f"tender{i}@pub.example" for i in range(1, 5)]


def mail_settings(server: SmtpTestServer) -> MailSettings:
    return load_mail_settings(server.env(PUBSCHED_MAIL_FROM="pub@pub.example",
                                         PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                         PUBSCHED_SMTP_TIMEOUT="2"))


def make_pub(url: str, mail: MailSettings | None = None) -> Pub:
    """A pub on ``url``, as one app instance opens it (its own store)."""
    config = Config(db_url=url) if mail is None else Config(db_url=url, mail=mail)
    return Pub(open_store(url), config)


def add_tenders(pub: Pub, emails: list[str] = EMAILS) -> None:
    for email in emails:
        assert tenders.add(pub, email.split("@")[0].title(), email)


def moment(pub: Pub, week: str, name: str, delta: float = 0.0) -> datetime:
    """One of the week's moments (opens_at, deadline_at, generate_at, send_window_end) by the
    pub's default settings, ``delta`` seconds after it."""
    at: datetime = getattr(times_of(pub, week), name)
    return at + timedelta(seconds=delta)


def row(pub: Pub, week: str) -> dict[str, Any]:
    rows = pub.query("SELECT * FROM pub_schedule_runs WHERE week_of = %s", [week])
    assert rows, week
    return rows[0]


def accepted_by_recipient(server: SmtpTestServer) -> dict[str, int]:
    """How many messages the server accepted per envelope recipient."""
    out: dict[str, int] = {}
    for mail in server.accepted:
        for to in mail.rcpt_tos:
            out[to] = out.get(to, 0) + 1
    return out
