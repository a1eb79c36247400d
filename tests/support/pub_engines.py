"""Helpers for the engine tests (legacy, cutover, the tick's timings): their weeks, their
tenders, a week's moments, and SQL by hand.

tests/pubsched/conftest.py makes the pub these tests get (support.pubs' ``make_pub``, mail to
``OPERATOR``, ``add_tenders``) for a module marked ``pub_setup("engines")``; the databases
are support.pub_db's.

Their weeks are their own, not support.pubs' ``WEEK`` (a week later, and two more after
it): these tests take their moments from the pub's own settings (``moment``) rather than
support.pubs' ``NOW``, and their assertions read these dates ("the week of 14 Dec").
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.week.runs import times_of
from support.smtp_server import SmtpTestServer

OPERATOR = "ops@pub.example"
WEEK = "2026-12-14"      # opens Mon 12-07 10:00 NY, deadline Wed 12-09 20:00, generate Thu 10:00
NEXT = "2026-12-21"
AFTER = "2026-12-28"
EMAILS = [f"tender{i}@pub.example" for i in range(1, 5)]


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
