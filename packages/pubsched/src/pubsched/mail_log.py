"""``pub_mail_log``: one line for every message pubsched handed to the mail server (the
schedule, an invitation, a nudge, the late-open note), written in one place so every
sender records the same fields the same way."""

from __future__ import annotations

from datetime import datetime

from .mail.compose import Outgoing
from .pub import Pub


def log_mail(pub: Pub, week: str | None, kind: str, outgoing: Outgoing,
             now: datetime) -> None:
    """Record ``outgoing`` under ``kind`` (``week`` None: a message of no week)."""
    with pub.atomic() as tx:
        tx.execute("INSERT INTO pub_mail_log (week_of, kind, recipient, subject, at) "
                   "VALUES (%s, %s, %s, %s, %s)",
                   [week, kind, outgoing.envelope_to, str(outgoing.message["Subject"]), now])


__all__ = ["log_mail"]
