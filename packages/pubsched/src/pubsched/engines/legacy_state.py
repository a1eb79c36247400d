"""How the legacy engine reads a week: its states as SQL over the run's timestamps, the
same reading in Python (:func:`inferred_state`), the database clock its send lease ages
by, and the verdicts its moves hand back.

The one place the legacy rules are written (the seed's "state lived in the absence of
data"): :mod:`pubsched.engines.legacy` moves a week with them, its crons pick due weeks
with them, :mod:`pubsched.engines.legacy_send` guards its send lease with them, and the
cutover judges the idle gap by :func:`inferred_state`. No I/O beyond reading the run row.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import rowstate

from ..machine import APPROVED, ASSIGNED, CLOSED, COLLECTING, DRAFT, SEND_LEASE_TTL, SENT
from ..pub import Pub
from ..verdicts import BadInput, Verdict

STATE_MISMATCH = str(rowstate.Reason.STATE_MISMATCH)
LEASE_HELD = str(rowstate.Reason.LEASE_HELD)
LEASE_LOST = str(rowstate.Reason.LEASE_LOST)
INVARIANT = str(rowstate.Reason.INVARIANT)
ACT_FAILED = str(rowstate.Reason.ACT_FAILED)  # ran and failed (v2's verdict for it too)
BAD_SETTINGS = "BAD_SETTINGS"

# pg_advisory_xact_lock key of the legacy survey ("pubsurv" in ASCII): serialises opens
SURVEY_LOCK = 0x70756273757276

# the legacy states as SQL over the timestamps (one source for the moves and the crons)
UNSENT = "status <> 'sent' AND sent_at IS NULL"
OPEN = "opened_at IS NOT NULL AND closed_at IS NULL"  # submissions.py's "open" rule
NOT_OPENED = f"opened_at IS NULL AND status = 'pending' AND {UNSENT}"
CLOSED_PENDING = f"closed_at IS NOT NULL AND status = 'pending' AND {UNSENT}"
# :func:`inferred_state` is COLLECTING, in SQL: opened, and none of the later stamps
COLLECTING_NOW = ("opened_at IS NOT NULL AND closed_at IS NULL AND generated_at IS NULL "
                  "AND sent_at IS NULL AND COALESCE(status, '') NOT IN ('sent', 'approved')")
NO_OTHER_OPEN = ("NOT EXISTS (SELECT 1 FROM pub_schedule_runs o "
                 "WHERE o.week_of <> %s AND o.opened_at IS NOT NULL AND o.closed_at IS NULL)")

_NOW = {"postgresql": "clock_timestamp()",
        "sqlite": "strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now')"}
_STALE = {"postgresql": "clock_timestamp() - make_interval(secs => %s)",
          "sqlite": "strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now', %s)"}


def db_now_sql(pub: Pub) -> str:
    """SQL for the database clock ("now" of leases), in the stored time form."""
    return _NOW[pub.dialect]


def stale_sql(pub: Pub, ttl: float) -> tuple[str, Any]:
    """SQL for "the database clock minus ``ttl``" and its one parameter."""
    return _STALE[pub.dialect], ttl if pub.dialect == "postgresql" else f"-{ttl} seconds"


def lease_live(stamp: Any, db_now: datetime, ttl: float = SEND_LEASE_TTL) -> bool:
    """Is a lease stamped at ``stamp`` still live at the database's ``db_now``?"""
    return isinstance(stamp, datetime) and stamp >= db_now - timedelta(seconds=ttl)


def run_row(pub: Pub, week: str, tx: Any = None, *, lock: bool = False) -> dict[str, Any] | None:
    """The week's run row, every column there is, with the database clock as ``db_now``;
    ``lock`` (inside ``tx``) locks it until the unit ends (SQLite's unit already holds the
    one writer lock)."""
    sql = f"SELECT *, {db_now_sql(pub)} AS db_now FROM pub_schedule_runs WHERE week_of = %s"
    if lock and pub.dialect == "postgresql":
        sql += " FOR UPDATE"
    rows = tx.execute(sql, [week]) if tx is not None else pub.query(sql, [week])
    return rows[0] if rows else None


def existing_row(pub: Pub, week: str) -> dict[str, Any]:
    row = run_row(pub, week)
    if row is None:
        raise BadInput(f"no week {week}")
    return row


def refused(pub: Pub, week: str, what: str, reason: str, why: str = "") -> Verdict:
    row = run_row(pub, week)
    if row is None:
        raise BadInput(f"no week {week}")
    state = inferred_state(row)
    extra = f": {why}" if why else ""
    return Verdict(False, reason, message=f"{week} {what} refused: {reason} "
                   f"(the week is {state}){extra}", detail={"state": state})


def applied(pub: Pub, week: str, what: str, before: str, **detail: Any) -> Verdict:
    row = existing_row(pub, week)
    state = inferred_state(row)
    return Verdict(True, message=f"{week} {what}: {before} -> {state}",
                   detail={"state": state, **detail})


def lock_survey(pub: Pub, tx: Any) -> None:
    if pub.dialect == "postgresql":
        tx.execute("SELECT pg_advisory_xact_lock(%s)", [SURVEY_LOCK])


def other_open(pub: Pub, week: str) -> str | None:
    rows = pub.query(f"SELECT week_of FROM pub_schedule_runs WHERE week_of <> %s AND {OPEN} "
                     "ORDER BY week_of", [week])
    return str(rows[0]["week_of"]) if rows else None


def collecting_week(pub: Pub, besides: str) -> str | None:
    """The first week, other than ``besides``, whose inferred state is COLLECTING."""
    rows = pub.query(f"SELECT week_of FROM pub_schedule_runs WHERE week_of <> %s AND "
                     f"{COLLECTING_NOW} ORDER BY week_of LIMIT 1", [besides])
    return str(rows[0]["week_of"]) if rows else None


def is_open(row: dict[str, Any]) -> bool:
    """:data:`OPEN`, read in Python."""
    return row.get("opened_at") is not None and row.get("closed_at") is None


def update_run(tx: Any, sets: str, where: str, params: list[Any]) -> bool:
    rows = tx.execute(f"UPDATE pub_schedule_runs SET {sets} WHERE {where} RETURNING week_of",
                      params)
    return bool(rows)


def inferred_state(row: dict[str, Any]) -> str:
    """The legacy engine's implicit state: which of the week's timestamps are set."""
    if row.get("status") == "sent" or row.get("sent_at") is not None:
        return SENT
    if row.get("status") == "approved":
        return APPROVED
    if row.get("generated_at") is not None:
        return ASSIGNED
    if row.get("closed_at") is not None:
        return CLOSED
    if row.get("opened_at") is not None:
        return COLLECTING
    return DRAFT
