"""Helpers of the reminders' tests (test_reminders.py, test_reminders_race.py,
test_browser_reminders.py): a week run to SENT through the engine's actions, time off
written as ``tender away`` writes it, and the reminders a test SMTP server accepted.

The pubs are tests/pubsched/conftest.py's (support.pubs: the flag on, mail to the
loopback server, the operator ``boss@pub.test``, the pub in New York unless told).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pubsched.deliveries import outbox as notices
from pubsched.engines import actions
from pubsched.pub import Pub
from pubsched.week.runs import Shift, shifts
from pubsched.week.submissions import submit
from support.smtp_server import ReceivedMail, SmtpTestServer


def run_week(pub: Pub, week: str, answers: dict[str, list[int] | None], *, at: datetime,
             send: bool = True) -> list[Shift]:
    """Open ``week`` at ``at``; each tender (email -> the positions, in the week's shift
    order, of the shifts they can work; None: every shift) answers; close, generate,
    approve and (``send``) send it. The week's shifts, in order."""
    assert actions.perform(pub, "open", week, now=at)
    made = shifts(pub, week)
    for email, picks in answers.items():
        ids = [s.id for s in made] if picks is None else [made[i].id for i in picks]
        assert submit(pub, week, email, ids, now=at)
    for step in ("close", "generate", "approve", *(("send",) if send else ())):
        assert actions.perform(pub, step, week, now=at), step
    return made


def on_shift(pub: Pub, shift_id: int) -> list[str]:
    """The emails of who is on the shift now."""
    rows = pub.query("SELECT t.email FROM pub_assignments a JOIN pub_tenders t ON "
                     "t.id = a.tender_id WHERE a.shift_id = %s ORDER BY t.email", [shift_id])
    return [str(r["email"]) for r in rows]


def away(pub: Pub, email: str, first: date, last: date) -> None:
    """Time off from ``first`` to ``last`` as ``tender away`` stores it (migration 0043's
    table; its command is another part of issue 19)."""
    with pub.atomic() as tx:
        tx.execute("INSERT INTO pub_time_off (tender_id, starts_on, ends_on) SELECT id, %s, %s "
                   "FROM pub_tenders WHERE email = %s",
                   [first.isoformat(), last.isoformat(), email])


def reminders(server: SmtpTestServer) -> list[ReceivedMail]:
    """The reminders the server accepted (their Message-IDs start ``<remind-``)."""
    return [m for m in server.accepted
            if str(m.message.get("Message-ID", "")).startswith("<remind-")]


def reminded(server: SmtpTestServer, kind: str = "") -> list[str]:
    """Who got a reminder (``kind``: its Message-ID's word, ``shift``, ``form``,
    ``review``, ``short``), one envelope recipient per message, sorted."""
    return sorted(to for m in reminders(server)
                  if str(m.message["Message-ID"]).startswith(f"<remind-{kind}")
                  for to in m.rcpt_tos)


def reminded_of(server: SmtpTestServer, shift_id: int) -> list[str]:
    """Who got the reminder before the shift ``shift_id``, sorted."""
    return sorted(to for m in reminders(server)
                  if str(m.message["Message-ID"]).startswith(f"<remind-shift.{shift_id}.")
                  for to in m.rcpt_tos)


def parts(mail: ReceivedMail) -> tuple[str, str]:
    """The plain text and the HTML of a message."""
    text, html = mail.message.get_body(("plain",)), mail.message.get_body(("html",))
    assert text is not None and html is not None
    return str(text.get_content()), str(html.get_content())


def outbox(pub: Pub) -> list[tuple[str, str, str, str]]:
    """Every notice as (kind, about, recipient, status), in the order they were owed."""
    return [(n.kind, n.about, n.recipient, n.status) for n in notices.listed(pub)]


def statuses(pub: Pub, kind: str) -> list[Any]:
    return [n.status for n in notices.listed(pub) if n.kind == kind]
