"""Ended operator sessions: a logout recorded in the database, so it holds everywhere.

A session is a signed cookie (:mod:`pubsched.web.auth`): any instance with the secret
accepts it until its max age. A logout kept in one process's memory left the cookie
opening ``/admin/`` on another instance, and on the same one after a restart, for up to
two hours. So the logout writes the session's id here, with the instant the cookie would
have expired anyway (``until``), and the operator gate asks :func:`ended` at every
request, as it asks whether the account still exists. Rows past their ``until`` can no
longer matter (the signature check refuses the cookie first) and each logout deletes
them, so the table holds at most the logouts of the last max age.
"""

from __future__ import annotations

from datetime import datetime

from ..pub import Pub, utc

TABLE = "pub_ended_sessions"


def record(pub: Pub, sid: str, *, until: datetime, now: datetime) -> None:
    """End the session ``sid`` for good (until its cookie's expiry, ``until``), in one unit
    with the clean-up of the rows that expired. Ending it twice is ending it once."""
    with pub.atomic() as tx:
        tx.execute(f"DELETE FROM {TABLE} WHERE ends_at <= %s", [utc(now)])
        tx.execute(f"INSERT INTO {TABLE} (sid, ends_at) VALUES (%s, %s) "
                   "ON CONFLICT (sid) DO NOTHING", [sid, utc(until)])


def ended(pub: Pub, sid: str) -> bool:
    """Whether the session ``sid`` was logged out (on any instance, at any time)."""
    return bool(pub.query(f"SELECT 1 FROM {TABLE} WHERE sid = %s", [sid]))


__all__ = ["ended", "record"]
