"""Helpers for the engine tests (legacy, cutover): a migrated database of each kind, a pub
on it, tenders, a week's moments, and SQL by hand.

Each test module defines its own small fixtures from these (pytest fixtures imported into a
module would shadow its arguments), e.g.::

    @pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
    def db_url(request, tmp_path):
        return migrated_url(request, tmp_path)
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from smtp_server import SmtpTestServer

import services
from pubsched import tenders
from pubsched.db import open_store
from pubsched.db.migrate import migrate
from pubsched.mail.settings import MailSettings, load_mail_settings
from pubsched.pub import Config, Pub
from pubsched.weeks import times_of

OPERATOR = "ops@pub.example"
WEEK = "2026-12-14"      # opens Mon 12-07 10:00 NY, deadline Wed 12-09 20:00, generate Thu 10:00
NEXT = "2026-12-21"
AFTER = "2026-12-28"
EMAILS = [f"tender{i}@pub.example" for i in range(1, 5)]


def fresh_url(request: pytest.FixtureRequest, kind: str, tmp_path: Path,
              name: str = "pub") -> str:
    """A fresh, empty database: a SQLite file ``name`` in ``tmp_path``, or a PostgreSQL
    database of its own (cloned from the session's template, dropped after the test)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/{name}.db"
    admin = str(request.getfixturevalue("pg_admin_dsn"))
    db = services.make_database(admin, template=request.getfixturevalue("pg_template"))
    request.addfinalizer(lambda: services.drop_database(admin, db))
    return services.database_dsn(admin, db)


def migrated_url(request: pytest.FixtureRequest, tmp_path: Path, to: str | None = None) -> str:
    """A database of the kind the fixture is parametrized with, migrated (up to ``to``)."""
    url = fresh_url(request, request.param, tmp_path)
    migrate(url, to=to)
    return url


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
