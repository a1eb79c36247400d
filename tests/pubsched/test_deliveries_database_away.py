"""Sending when the database stops answering mid-send (pubsched.deliveries.deliver, "When
the database stops answering"): the sender waits for it, so an email the mail server
accepted ends SENT rather than of unknown fate, and one whose handover could not be
marked is given back, owed again, and sent by the next pass, once.

The database "stops answering" for real, on PostgreSQL: the test holds the email's row
locked (``SELECT ... FOR UPDATE`` on a connection of its own) for a while, and the pub's
connections have a ``lock_timeout`` of 200 ms, so each of the sender's writes to that row
is cancelled by the server (``StatementCancelled``: nothing landed) until the lock is
let go. The lock is taken from the SMTP server, at the moment that matters: as the
message's data arrives (after the handover mark, before the server's answer), or as its
recipient does (before the mark). A failover's outage is the same to the sender (no
answer, then an answer), with a dead connection instead of a cancelled statement:
tests/failover/test_pubsched_failover.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from pubsched.deliveries import outbox
from pubsched.deliveries.deliver import deliver
from pubsched.pub import Pub
from rowstate import StatementCancelled
from support.pubs import NOW, OPERATOR, mail_settings, make_pub, note_to_operator
from support.smtp_server import SmtpTestServer

KIND = "test_note"
HELD = 1.5  # seconds the row stays locked: several of the sender's tries (every 0.5 s)


@pytest.fixture
def pub(pg_db_url: str, smtp: SmtpTestServer) -> Iterator[Pub]:
    sep = "&" if "?" in pg_db_url else "?"
    made = make_pub(f"{pg_db_url}{sep}options=-c%20lock_timeout%3D200",
                    mail_settings(smtp))
    try:
        yield made
    finally:
        made.close()


class RowLock:
    """The email's row locked from a connection of the test's own for ``HELD`` seconds,
    taken when the SMTP server calls it; ``taken`` and ``released`` say when."""

    def __init__(self, url: str, about: str) -> None:
        self.url, self.about = url, about
        self.taken = threading.Event()
        self.released = threading.Event()
        self._timer: threading.Timer | None = None

    def __call__(self, _what: object) -> None:
        if self.taken.is_set():
            return
        conn = psycopg.connect(self.url)
        conn.execute("SELECT 1 FROM pub_mail WHERE kind = %s AND about = %s FOR UPDATE",
                     [KIND, self.about])
        self.taken.set()

        def release() -> None:
            conn.commit()
            conn.close()
            self.released.set()

        self._timer = threading.Timer(HELD, release)
        self._timer.start()

    def join(self) -> None:
        if self._timer is not None:
            self._timer.join()


def owe(pub: Pub, about: str) -> None:
    with pub.atomic():
        assert outbox.owe(pub, KIND, about, outbox.OPERATOR, week_of=None, now=NOW)


def row(pub: Pub, about: str) -> dict[str, object]:
    (found,) = pub.query("SELECT state, acting_at, handover_at, attempts FROM pub_mail "
                         "WHERE kind = %s AND about = %s", [KIND, about])
    return found


def test_an_email_the_server_accepted_ends_sent_when_the_database_answers_again(
        pub: Pub, pg_db_url: str, smtp: SmtpTestServer) -> None:
    owe(pub, "a")
    lock = RowLock(pg_db_url, "a")
    smtp.on_data(lock)  # after the mark, before the server's 250
    started = time.monotonic()
    (verdict,) = deliver(pub, {KIND: note_to_operator}, NOW)
    waited = time.monotonic() - started
    lock.join()
    assert lock.taken.is_set() and verdict.applied, verdict
    assert waited >= HELD * 0.9  # it waited for the database, then finished
    assert row(pub, "a") == {"state": "SENT", "acting_at": None, "handover_at": None,
                             "attempts": 1}
    assert [m.rcpt_tos for m in smtp.accepted] == [(OPERATOR,)]
    assert deliver(pub, {KIND: note_to_operator}, NOW) == []  # nothing owed: never twice
    assert len(smtp.accepted) == 1


def test_an_email_whose_handover_could_not_be_marked_is_given_back_and_sent_next_pass(
        pub: Pub, pg_db_url: str, smtp: SmtpTestServer) -> None:
    owe(pub, "b")
    lock = RowLock(pg_db_url, "b")
    smtp.on_recipient(lock)  # before the 354 and the mark
    with pytest.raises(StatementCancelled):
        deliver(pub, {KIND: note_to_operator}, NOW)
    lock.join()
    assert smtp.received == []  # no byte of the message's data went
    # given back: owed again, no lease, no mark (it would make the sweep call it unknown)
    assert row(pub, "b") == {"state": "OWED", "acting_at": None, "handover_at": None,
                             "attempts": 0}
    smtp.on_recipient(None)
    (verdict,) = deliver(pub, {KIND: note_to_operator}, NOW)
    assert verdict.applied, verdict
    assert [m.rcpt_tos for m in smtp.accepted] == [(OPERATOR,)]
    assert row(pub, "b")["state"] == "SENT"
