"""The SEQUENCE of a tender's calendar event for a shift: one number per (tender, shift),
kept in ``pub_calendar_sequences`` (migration 0055), that only grows.

An event's UID is the tender's and the shift's (:func:`pubsched.people.calendar.shift_uid`),
so a cover taken and then taken back gives the same UID a cancel and then a new event;
a calendar keeps an event cancelled unless what follows carries a higher SEQUENCE (RFC
5545, 3.8.7.4). So every change to one tender's event of a shift bumps its number **in the
unit of work that makes the change** (a take: the asker's event cancelled, the taker's
added), and the email that tells them of it carries the number of that change (kept in its
facts, :func:`pubsched.deliveries.outbox.owe`), while the schedule email and the feed carry
the number as it is now. A late or resent email of an earlier change then carries a lower
number than what the calendar holds, and is rightly ignored. No row: 0, the schedule's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..pub import Pub


def bump(tx: Any, shift_id: int, tender_ids: Iterable[int]) -> dict[int, int]:
    """Each tender's event of ``shift_id`` changed, in the caller's unit ``tx``: its new
    number, by tender (1 the first time)."""
    out = {}
    for tender_id in tender_ids:
        rows = tx.execute(
            "INSERT INTO pub_calendar_sequences (tender_id, shift_id, sequence) "
            "VALUES (%s, %s, 1) ON CONFLICT (tender_id, shift_id) DO UPDATE SET "
            "sequence = pub_calendar_sequences.sequence + 1 RETURNING sequence",
            [int(tender_id), int(shift_id)])
        out[int(tender_id)] = int(rows[0]["sequence"])
    return out


def current(pub: Pub, tender_id: int) -> dict[int, int]:
    """The tender's numbers now, by shift id (a shift not listed: 0); none before 0055."""
    if not pub.schema.handover:
        return {}
    rows = pub.query("SELECT shift_id, sequence FROM pub_calendar_sequences "
                     "WHERE tender_id = %s", [int(tender_id)])
    return {int(r["shift_id"]): int(r["sequence"]) for r in rows}


__all__ = ["bump", "current"]
