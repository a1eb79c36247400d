"""Fixtures of the pubsched domain tests: a migrated database (a SQLite file, or a fresh
real PostgreSQL database), a real SMTP server on loopback, and a ``Pub`` wired to both.

tests/pubsched/conftest.py registers the fixtures; databases come from pub_setup's
``migrated_url`` and pubs from its ``make_pub``, as the legacy and cutover tests make them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pub_setup
import pytest
from pub_setup import migrated_url
from smtp_server import SmtpTestServer

from pubsched import tenders
from pubsched.engines.flags import set_v2
from pubsched.mail.settings import load_mail_settings
from pubsched.pub import Pub

WEEK = "2026-12-07"  # a Monday; its form opens Mon 2026-11-30 10:00 New York
NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)
OPERATOR = "boss@pub.test"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return migrated_url(request, tmp_path)


@pytest.fixture
def smtp() -> Iterator[SmtpTestServer]:
    with SmtpTestServer() as server:
        yield server


def make_pub(url: str, server: SmtpTestServer, **env: str) -> Pub:
    mail = load_mail_settings(server.env(PUBSCHED_MAIL_FROM="pub@pub.test",
                                         PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                         PUBSCHED_SMTP_TIMEOUT="5", **env))
    return pub_setup.make_pub(url, mail)


@pytest.fixture
def pub(db_url: str, smtp: SmtpTestServer) -> Iterator[Pub]:
    made = make_pub(db_url, smtp)
    set_v2(made, True, now=NOW)
    try:
        yield made
    finally:
        made.close()


def crew(pub: Pub, *people: tuple[str, int | None]) -> None:
    """Add tenders ``(name, max_shifts)``; their email is ``<name>@pub.test``."""
    for name, limit in people:
        assert tenders.add(pub, name, f"{name}@pub.test", max_shifts=limit, now=NOW)
