"""Helpers of the v2 domain tests (lifecycle, tick, races): the week and instant they run
at, a pub with mail to the loopback SMTP server, and a crew of tenders.

tests/pubsched/conftest.py's ``pub`` fixture makes its default pub with ``make_pub`` (and
the v2 flag on at ``NOW``); pubs are opened the way support.pub_engines opens them.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pubsched.mail.settings import load_mail_settings
from pubsched.people import tenders
from pubsched.pub import Pub
from support import pub_engines
from support.smtp_server import SmtpTestServer

WEEK = "2026-12-07"  # a Monday; its form opens Mon 2026-11-30 10:00 New York
NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)
OPERATOR = "boss@pub.test"


def make_pub(url: str, server: SmtpTestServer, **env: str) -> Pub:
    mail = load_mail_settings(server.env(PUBSCHED_MAIL_FROM="pub@pub.test",
                                         PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                         PUBSCHED_SMTP_TIMEOUT="5", **env))
    return pub_engines.make_pub(url, mail)


def crew(pub: Pub, *people: tuple[str, int | None]) -> None:
    """Add tenders ``(name, max_shifts)``; their email is ``<name>@pub.test``."""
    for name, limit in people:
        assert tenders.add(pub, name, f"{name}@pub.test", max_shifts=limit, now=NOW)
