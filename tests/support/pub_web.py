"""What the web tests share: the app's settings, a login, the tenders' links and reading a
page. Their pub is support.pubs' ``make_pub(url, web=True)``: three tenders, signed links."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from argon2 import PasswordHasher
from starlette.testclient import TestClient

from pubsched.people import links, tenders
from pubsched.pub import Pub
from pubsched.web.auth import AdminPassword, LoginThrottle
from pubsched.web.settings import WebSettings

PASSWORD = "correct horse battery staple"
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
