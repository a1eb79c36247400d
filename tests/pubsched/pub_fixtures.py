"""Fixtures of the pubsched domain tests: a migrated database (a SQLite file, or a fresh
real PostgreSQL database), a real SMTP server on loopback, and a ``Pub`` wired to both.

Import the fixtures into a test module (``from pub_fixtures import db_url, pub, smtp``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from smtp_server import SmtpTestServer

from pubsched import tenders
from pubsched.app import Config, Pub
from pubsched.db import open_store
from pubsched.flags import set_v2
from pubsched.mailconfig import load_mail_settings
from pubsched.migrate import migrate

WEEK = "2026-12-07"  # a Monday; its form opens Mon 2026-11-30 10:00 New York
NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)
OPERATOR = "boss@pub.test"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/pub.db"
    else:
        url = str(request.getfixturevalue("pg_dsn"))
    migrate(url)
    return url


@pytest.fixture
def smtp() -> Iterator[SmtpTestServer]:
    with SmtpTestServer() as server:
        yield server


def make_pub(url: str, server: SmtpTestServer, **env: str) -> Pub:
    mail = load_mail_settings(server.env(PUBSCHED_MAIL_FROM="pub@pub.test",
                                         PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                         PUBSCHED_SMTP_TIMEOUT="5", **env))
    return Pub(open_store(url), Config(db_url=url, mail=mail))


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
