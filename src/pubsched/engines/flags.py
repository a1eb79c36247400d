"""The ``PUB_SCHEDULER_V2`` flag, kept in the database (``pub_flags``) so that every
instance of the app (web, CLI, ticker) sees the same engine. Off by default: the legacy
engine runs until an operator flips it in the idle gap (:mod:`pubsched.engines.cutover`)."""

from __future__ import annotations

from datetime import datetime

from ..pub import Pub, utc

V2_FLAG = "PUB_SCHEDULER_V2"


def v2_enabled(pub: Pub) -> bool:
    rows = pub.query("SELECT value FROM pub_flags WHERE name = %s", [V2_FLAG])
    return bool(rows) and rows[0]["value"] == "on"


def set_v2(pub: Pub, on: bool, *, now: datetime | None = None) -> None:
    """Write the flag (the cutover's checks come first: :func:`pubsched.engines.cutover.flip`)."""
    with pub.atomic() as tx:
        tx.execute("INSERT INTO pub_flags (name, value, changed_at) VALUES (%s, %s, %s) "
                   "ON CONFLICT (name) DO UPDATE SET value = excluded.value, "
                   "changed_at = excluded.changed_at",
                   [V2_FLAG, "on" if on else "off", utc(now)])
