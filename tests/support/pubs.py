"""The pub a test makes, and the week and the moment the pub scheduler's tests run at.

``WEEK`` is a Monday; its week has the default template's three nights (Thursday, Friday
and Saturday 10-12 Dec, 18:00-02:00 New York, two slots each), and its form is due to open
Mon 30 Nov, 10:00 New York: ``NOW``. ``NEXT`` is the Monday after. A test that needs another
week or moment keeps its own, named for why (support.pub_engines' weeks, support.mail_samples'
roster, a form already open on Tuesday...).

``make_pub`` opens a pub as one app instance does (its own store: close it); the options
are what the test families need: mail (``mail_settings`` for the loopback SMTP server),
``web`` (the web tests' pub: signed links, three tenders, the v2 flag on) or the flag alone.
tests/pubsched/conftest.py's ``pub`` fixture makes its pubs with it. ``crew`` adds tenders.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from email.message import EmailMessage

from pubsched.config import Config
from pubsched.db import open_store
from pubsched.deliveries.outbox import Mail
from pubsched.engines.flags import set_v2
from pubsched.mail.compose import Outgoing, Recipient
from pubsched.mail.settings import MailSettings, load_mail_settings
from pubsched.people import tenders
from pubsched.pub import Pub
from support.smtp_server import SmtpTestServer

WEEK = "2026-12-07"
NEXT = "2026-12-14"
NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)
NOW_ISO = "2026-11-30T15:00:00Z"  # NOW, as a command line's --now

OPERATOR = "boss@pub.test"  # the operator of mail_settings' pub

# the web tests' pub (make_pub(web=True)): its links are signed with SECRET for BASE_URL
SECRET = "web-tests-secret-0123456789abcdef"
BASE_URL = "https://pub.example"
TENDERS = (("Alice", "alice@example.com"), ("Bob", "bob@example.com"),
           ("Carol", "carol@example.com"))


def mail_settings(server: SmtpTestServer, *, operator: str = OPERATOR, **env: str
                  ) -> MailSettings:
    """Mail to ``server`` from ``pub@pub.test``, the operator's copy to ``operator``, a 5 s
    SMTP timeout; ``env``: more PUBSCHED_ settings (or other values of these)."""
    return load_mail_settings(server.env(**{"PUBSCHED_MAIL_FROM": "pub@pub.test",
                                            "PUBSCHED_OPERATOR_EMAIL": operator,
                                            "PUBSCHED_SMTP_TIMEOUT": "5", **env}))


def make_pub(url: str, mail: MailSettings | None = None, *, web: bool = False,
             v2: bool | None = None) -> Pub:
    """A pub on ``url`` (migrated: a clone of support.pub_db's), sending ``mail`` if given.

    ``web``: the web tests' pub: the database migrated first if it is not (a browser test's
    new file), its links signed with ``SECRET`` for ``BASE_URL``, the three ``TENDERS``
    added, and the v2 flag turned on unless ``v2=False``. Otherwise ``v2=True`` turns the
    flag on (at ``NOW``) and the flag is left as the database has it."""
    config = Config(db_url=url)
    if mail is not None:
        config = replace(config, mail=mail)
    if web:
        config = replace(config, secret=SECRET, base_url=BASE_URL)
    pub = Pub(open_store(url, migrate=web), config)
    if web:
        for name, email in TENDERS:
            tenders.add(pub, name, email, now=NOW)
    if v2 or (web and v2 is None):
        set_v2(pub, True, now=NOW)
    return pub


def crew(pub: Pub, *people: tuple[str, int | None]) -> None:
    """Add tenders ``(name, max_shifts)`` at ``NOW``; their email is ``<name>@pub.test``."""
    for name, limit in people:
        assert tenders.add(pub, name, f"{name}@pub.test", max_shifts=limit, now=NOW)


def note_to_operator(pub: Pub, mail: Mail, now: datetime) -> Outgoing:
    """A composer of a plain note to the operator, "note <about>": the mail the outbox
    tests owe and deliver when what they test is the delivery, not a feature's words."""
    message = EmailMessage()
    message["From"] = "pub@pub.test"
    message["To"] = OPERATOR
    message["Subject"] = f"note {mail.about}"
    message.set_content("hello")
    return Outgoing(Recipient(OPERATOR, "Boss"), OPERATOR, message)
