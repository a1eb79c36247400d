"""What the web tests share: a migrated pub with tenders, the app's settings, a login."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from argon2 import PasswordHasher
from starlette.testclient import TestClient

from pubsched.config import Config
from pubsched.db import open_store
from pubsched.engines import flags
from pubsched.mail.settings import MailSettings
from pubsched.people import links, tenders
from pubsched.pub import Pub
from pubsched.web.auth import AdminPassword, LoginThrottle
from pubsched.web.settings import WebSettings

PASSWORD = "correct horse battery staple"
SECRET = "web-tests-secret-0123456789abcdef"
WEEK = "2026-12-07"
NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)  # the week's form is due to be open
TENDERS = (("Alice", "alice@example.com"), ("Bob", "bob@example.com"),
           ("Carol", "carol@example.com"))
# a cheap hash for tests (the default parameters cost ~50 ms a check, by design)
FAST_HASH = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


@dataclass
class Tender:
    id: int
    name: str
    email: str

    def version(self, pub: Pub) -> int:
        found = tenders.by_id(pub, self.id)
        assert found is not None
        return found.link_version

    def form(self, pub: Pub) -> str:
        return "/t/" + links.tender_token(pub.config, self.id, self.version(pub))

    def calendar(self, pub: Pub) -> str:
        return "/cal/" + links.tender_token(pub.config, self.id, self.version(pub),
                                            "calendar") + ".ics"


def make_pub(url: str, mail: MailSettings | None = None, *, v2: bool = True) -> Pub:
    extra: dict[str, Any] = {"mail": mail} if mail is not None else {}
    config = Config(db_url=url, secret=SECRET, base_url="https://pub.example", **extra)
    pub = Pub(open_store(url, migrate=True), config)
    for name, email in TENDERS:
        tenders.add(pub, name, email, now=NOW)
    if v2:
        flags.set_v2(pub, True, now=NOW)
    return pub


def people(pub: Pub) -> dict[str, Tender]:
    return {t.name: Tender(t.id, t.name, t.email) for t in tenders.all_tenders(pub)}


def web_settings(*, insecure: bool = False, throttle: LoginThrottle | None = None
                 ) -> WebSettings:
    return WebSettings(AdminPassword(PASSWORD, FAST_HASH), insecure_cookies=insecure,
                       throttle=throttle or LoginThrottle())


def login(client: TestClient, password: str = PASSWORD, email: str = "admin") -> Any:
    """Log in as ``email`` (the quick start's ``admin`` by default, or an operator's)."""
    return client.post("/admin/login", data={"email": email, "password": password,
                                             "next": "/admin/"}, follow_redirects=False)


def seen(html: str) -> str:
    """The run fingerprint the week page's buttons carry."""
    found = re.search(r'name="seen" value="([0-9a-f]+)"', html)
    assert found, "the page has no button"
    return found.group(1)


def buttons(html: str) -> list[str]:
    """The edges the week page drew a button for, in order."""
    return re.findall(r'data-edge="([a-z_]+)"', html)


def write(pub: Pub, sql: str, params: list[Any]) -> None:
    """One statement that changes the database, as a test sets a case up (``pub.query``
    only reads)."""
    with pub.atomic() as tx:
        tx.execute(sql, params)
