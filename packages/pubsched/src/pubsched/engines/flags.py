"""The ``PUB_SCHEDULER_V2`` flag, kept in the database (``pub_flags``) so that every
instance of the app (web, CLI, ticker) sees the same engine. Off by default: the legacy
engine runs until an operator flips it in the idle gap (:mod:`pubsched.engines.cutover`).

**The flag fence.** An action chooses its engine by the flag, then writes; a flip landing
between the two would let the action land under the engine no longer in charge (a legacy
open after v2 took over reads DRAFT to v2). So every unit of work of a chosen action
first runs :func:`fence`: it takes the flag's lock in shared mode and reads the flag again,
and refuses (:class:`FlagChanged`, the unit rolled back) if it is no longer the one the
action chose by. The flip takes the same lock exclusively (:func:`lock_flag`) before
anything else, so a flip cannot commit while a fenced unit is open, and a unit opened
after a flip sees it. On PostgreSQL the lock is a transaction-scoped advisory lock (it
exists before the flag's row does); on SQLite the unit's writer lock already serialises
them.

**What is not fenced, and why it needs no fence.** A side effect's finalize must land once
its email went out, so the leased edges (close, generate, send), the tick's timers and its
nudges run unfenced. Each acts only on a week in flight (COLLECTING, CLOSED, ASSIGNED or
APPROVED), and the flip refuses (NOT_IDLE) while any week is in flight, reading the weeks
under its exclusive lock; a week leaves the idle states (DRAFT, SENT) only by a fenced
open. So an unforced flip and an unfenced action never overlap; a forced flip is the
operator's choice over the reasons it lists. ``resend`` acts on a SENT week, which both
engines read alike and resend with the same code. ``test_flag_race.py`` checks the machine
for this: a leased edge, timer or nudge from an idle state would need a fence."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..context import Fence
from ..pub import Pub, utc
from ..verdicts import PubError

V2_FLAG = "PUB_SCHEDULER_V2"
FLAG_CHANGED = "FLAG_CHANGED"
# the advisory lock's key on PostgreSQL (any constant the app uses for nothing else)
FLAG_LOCK_KEY = 0x50554246


class FlagChanged(PubError):
    """The flag was flipped after the action chose its engine: refused, nothing written."""


def lock_flag(pub: Pub, tx: Any, *, shared: bool) -> None:
    """The flag's lock for the rest of the unit: shared for an action, exclusive for the
    flip (PostgreSQL; SQLite's unit already holds the one writer lock)."""
    if pub.dialect == "postgresql":
        kind = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
        tx.execute(f"SELECT 1 AS locked FROM (SELECT {kind}(%s)) AS held", [FLAG_LOCK_KEY])


def fence(pub: Pub, on: bool) -> Fence:
    """The check each unit of an action chosen with the flag ``on`` runs first."""
    def check(tx: Any) -> None:
        lock_flag(pub, tx, shared=True)
        rows = tx.execute("SELECT value FROM pub_flags WHERE name = %s", [V2_FLAG])
        if (bool(rows) and rows[0]["value"] == "on") != on:
            raise FlagChanged("the engine changed while this ran (PUB_SCHEDULER_V2 is now "
                              f"{'off' if on else 'on'}): nothing was done; try again")
    return check


def v2_enabled(pub: Pub) -> bool:
    rows = pub.query("SELECT value FROM pub_flags WHERE name = %s", [V2_FLAG])
    return bool(rows) and rows[0]["value"] == "on"


def set_v2(pub: Pub, on: bool, *, now: datetime | None = None) -> None:
    """Write the flag (the cutover's checks come first: :func:`pubsched.engines.cutover.flip`)."""
    with pub.atomic() as tx:
        lock_flag(pub, tx, shared=False)
        tx.execute("INSERT INTO pub_flags (name, value, changed_at) VALUES (%s, %s, %s) "
                   "ON CONFLICT (name) DO UPDATE SET value = excluded.value, "
                   "changed_at = excluded.changed_at",
                   [V2_FLAG, "on" if on else "off", utc(now)])
