"""The schedule's per-recipient record on a database at the legacy schema (before 0049,
which brought the mail machine): ``pub_deliveries`` and ``pub_mail_log``, written as the
legacy system wrote them.

The legacy engine still runs on such a database (:mod:`pubsched.db.level`), and its send
keeps every guarantee there: each recipient marked ``in_flight`` through a write fenced by
the send lease, committed before the handover; ``sent`` or ``failed`` after it, or left
``in_flight`` when its fate is unknown. On a migrated database the schedule is mail of the
machine like every other email (:mod:`pubsched.week.send`), and 0049 carried these rows there.
The message itself goes through :class:`~pubsched.deliveries.deliver.Sender`, the one
place mail is handed over.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from ..mail.compose import Outgoing
from ..mail.mailer import Delivery
from ..pub import Pub
from .deliver import Sender

IN_FLIGHT, SENT, FAILED = "in_flight", "sent", "failed"


def record(pub: Pub, week: str) -> dict[int, dict[str, Any]]:
    """Each recipient's record of the week's send, by tender id."""
    rows = pub.query("SELECT tender_id, email, status, error FROM pub_deliveries "
                     "WHERE week_of = %s", [week])
    return {int(r["tender_id"]): r for r in rows}


def send(pub: Pub, week: str, now: datetime, people: dict[int, Any],
         compose: Callable[[int], Outgoing | str],
         open_fenced: Callable[[], AbstractContextManager[Any]]) -> dict[str, Any]:
    """Mail every recipient never attempted or failed (the counts, the failed ones, the
    uncertain ones): one fenced unit marks each in flight before its handover."""
    done = record(pub, week)
    todo = [t for t in sorted(people) if done.get(t, {}).get("status") in (None, FAILED)]
    uncertain = [str(done[t]["email"]) for t in people
                 if done.get(t, {}).get("status") == IN_FLIGHT]
    sent, failed = 0, []
    with Sender(pub) as sender:
        for tid in todo:
            email = str(people[tid]["email"])
            outgoing = compose(tid)
            if isinstance(outgoing, str):  # cannot be addressed: fails alone, not sent
                with open_fenced() as tx:
                    _mark(tx, week, tid, email, FAILED, now, outgoing)
                failed.append(f"{email}: {outgoing}")
                continue
            with open_fenced() as tx:  # in flight BEFORE the handover, or nothing
                _mark(tx, week, tid, email, IN_FLIGHT, now, None)
            outcome = sender.hand_over(outgoing)
            if outcome.reached:
                suffix = "" if outcome.delivery is Delivery.DELIVERED else (
                    f":{outcome.delivery.value}")
                _log(pub, week, f"schedule{suffix}", outgoing, now)
            if outcome.delivery is Delivery.UNKNOWN:
                uncertain.append(email)
                _note(pub, week, tid, IN_FLIGHT, outcome.detail, None)
            elif outcome.delivery is Delivery.DELIVERED:
                sent += 1
                _note(pub, week, tid, SENT, None, now)
            else:
                failed.append(f"{email}: {outcome.detail}")
                _note(pub, week, tid, FAILED, outcome.detail, None)
    return {"week_of": week, "sent": sent, "failed": failed,
            "uncertain": sorted(set(uncertain))}


def _mark(tx: Any, week: str, tender_id: int, email: str, status: str, now: datetime,
          error: str | None) -> None:
    tx.execute("INSERT INTO pub_deliveries (week_of, tender_id, email, status, "
               "attempted_at, error) VALUES (%s, %s, %s, %s, %s, %s) "
               "ON CONFLICT (week_of, tender_id) DO UPDATE SET status = excluded.status, "
               "attempted_at = excluded.attempted_at, error = excluded.error",
               [week, tender_id, email, status, now, error])


def _note(pub: Pub, week: str, tender_id: int, status: str, error: str | None,
          sent_at: datetime | None) -> None:
    """The outcome of one handover. Not fenced: the message is already out of our hands,
    and the record must say so even if the lease was lost meanwhile."""
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_deliveries SET status = %s, error = %s, sent_at = %s "
                   "WHERE week_of = %s AND tender_id = %s",
                   [status, error, sent_at, week, tender_id])


def _log(pub: Pub, week: str, kind: str, outgoing: Outgoing, now: datetime) -> None:
    with pub.atomic() as tx:
        tx.execute("INSERT INTO pub_mail_log (week_of, kind, recipient, subject, at) "
                   "VALUES (%s, %s, %s, %s, %s)",
                   [week, kind, outgoing.envelope_to, str(outgoing.message["Subject"]), now])


__all__ = ["FAILED", "IN_FLIGHT", "SENT", "record", "send"]
