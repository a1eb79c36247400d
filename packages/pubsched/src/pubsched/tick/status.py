"""The tick's own record (``pub_tick_status``, migration 0047): every tick, wherever it
runs (``serve``'s ticker, ``pubsched tick`` from a timer or cron), stamps when it started
and how it ended, so ``/metrics`` can say "the last tick finished 40 minutes ago" from any
instance, and an operator can see that the timer stopped.

A tick that raised, or one of whose steps failed (:data:`pubsched.tick.run.STEP_FAILED`:
the other steps still ran), is a failure (its error kept, one line); one that ran is a
success, even when a message inside it was refused: that is a mail failure, counted by
the mail log, and the tick itself is healthy. The record is written in its own unit after the
tick, never inside the tick's moves, so it cannot hold or undo any of them.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from ..pub import Pub, utc
from ..verdicts import Verdict
from .run import STEP_FAILED, tick

log = logging.getLogger("pubsched.tick")
NAME = "tick"
MAX_ERROR = 500


def run_tick(pub: Pub, now: datetime | None = None) -> list[Verdict]:
    """One tick as of ``now`` (:func:`pubsched.tick.run.tick`), recorded."""
    at = utc(now)
    started = time.monotonic()
    try:
        verdicts = tick(pub, at)
    except Exception as exc:
        try:  # the database may be why it failed: the tick's own error is the one raised
            _record(pub, at, time.monotonic() - started,
                    error=f"{type(exc).__name__}: {exc}")
        except Exception:
            log.exception("the failed tick could not be recorded")
        raise
    failed = [str(v.failed) for v in verdicts if v.reason == STEP_FAILED]
    _record(pub, at, time.monotonic() - started, error="; ".join(failed) or None)
    return verdicts


def _record(pub: Pub, at: datetime, seconds: float, *, error: str | None) -> None:
    if not pub.schema.tick_status:  # a database before 0047
        return
    ended = "last_success_at" if error is None else "last_failure_at"
    with pub.atomic() as tx:
        tx.execute("INSERT INTO pub_tick_status (name) VALUES (%s) ON CONFLICT (name) "
                   "DO NOTHING", [NAME])
        tx.execute(f"UPDATE pub_tick_status SET last_started_at = %s, {ended} = %s, "
                   "last_duration_seconds = %s, last_error = COALESCE(%s, last_error) "
                   "WHERE name = %s",
                   [at, at, seconds, None if error is None else error[:MAX_ERROR], NAME])


def last(pub: Pub) -> dict[str, Any] | None:
    """The record, or None before the first tick (or before migration 0047)."""
    if not pub.schema.tick_status:
        return None
    rows = pub.query("SELECT * FROM pub_tick_status WHERE name = %s", [NAME])
    return rows[0] if rows else None


__all__ = ["last", "run_tick"]
