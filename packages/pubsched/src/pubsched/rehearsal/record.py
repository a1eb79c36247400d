"""The rehearsal's record, ``pub_rehearsals`` (migration 0039): the one thing a rehearsal
writes in the real database, and what the cutover reads (:func:`has_passed`).

The record is also the wizard's state: ``step_reached`` counts the steps done, ``scratch``
names the copy, so a reload or a second browser sees the same rehearsal. Running a step is
claimed first by a compare-and-set (:func:`claim`): ``acting_since`` is set only on the
row still unfinished, at the step the claimer saw, with no live claim; two operators
pressing "next" at once therefore run one step, and the loser is told so. A claim older
than :data:`STEP_TTL` (its runner crashed) may be taken again. At most one rehearsal is
unfinished at a time (a partial unique index), so two starts cannot both win either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..db.instants import maybe_instant
from ..pub import Pub
from ..week.time import as_utc

PASSED, FAILED, ABANDONED = "passed", "failed", "abandoned"
# how long a step may run before its claim counts as a crashed runner's (a send waits up
# to the SMTP timeout per reply, per recipient)
STEP_TTL = timedelta(minutes=15)


@dataclass(frozen=True)
class Rehearsal:
    """One row of ``pub_rehearsals``, read."""

    id: int
    started_at: datetime
    week_of: str
    scratch: str
    step_reached: int
    outcome: str | None = None
    finished_at: datetime | None = None
    acting_since: datetime | None = None
    failure: str | None = None
    started_by: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.outcome is None

    def busy(self, now: datetime) -> bool:
        """A step is being run right now (claimed, and not yet stale)."""
        return self.acting_since is not None and as_utc(now) - self.acting_since < STEP_TTL


def _read(row: dict[str, Any]) -> Rehearsal:
    started = maybe_instant(row["started_at"])
    assert started is not None  # NOT NULL
    return Rehearsal(id=int(row["id"]), started_at=started, week_of=str(row["week_of"]),
                     scratch=str(row["scratch"]), step_reached=int(row["step_reached"]),
                     outcome=row["outcome"], finished_at=maybe_instant(row["finished_at"]),
                     acting_since=maybe_instant(row["acting_since"]), failure=row["failure"],
                     started_by=row["started_by"], steps=json.loads(row["steps"] or "[]"))


def get(pub: Pub, rehearsal_id: int) -> Rehearsal | None:
    rows = pub.query("SELECT * FROM pub_rehearsals WHERE id = %s", [rehearsal_id])
    return _read(rows[0]) if rows else None


def unfinished(pub: Pub) -> Rehearsal | None:
    rows = pub.query("SELECT * FROM pub_rehearsals WHERE outcome IS NULL")
    return _read(rows[0]) if rows else None


def latest(pub: Pub) -> Rehearsal | None:
    rows = pub.query("SELECT * FROM pub_rehearsals ORDER BY id DESC LIMIT 1")
    return _read(rows[0]) if rows else None


def last_passed(pub: Pub) -> Rehearsal | None:
    rows = pub.query("SELECT * FROM pub_rehearsals WHERE outcome = %s "
                     "ORDER BY id DESC LIMIT 1", [PASSED])
    return _read(rows[0]) if rows else None


def all_scratches(pub: Pub) -> list[str]:
    return [str(r["scratch"]) for r in pub.query("SELECT scratch FROM pub_rehearsals")]


def has_passed(tx: Any) -> bool:
    """Inside the caller's unit (the cutover's flip): has a rehearsal passed here?"""
    rows = tx.execute("SELECT 1 AS one FROM pub_rehearsals WHERE outcome = %s LIMIT 1",
                      [PASSED])
    return bool(rows)


def insert(pub: Pub, *, week: str, scratch: str, now: datetime, by: str | None) -> Rehearsal:
    """A new unfinished record; an unfinished one whose step is not being run is
    abandoned in the same unit (its copy is the caller's to drop)."""
    at = as_utc(now)
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_rehearsals SET outcome = %s, finished_at = %s, "
                   "acting_since = NULL, failure = %s WHERE outcome IS NULL AND "
                   "(acting_since IS NULL OR acting_since < %s)",
                   [ABANDONED, at, "a new rehearsal was started", at - STEP_TTL])
        rows = tx.execute("INSERT INTO pub_rehearsals (started_at, week_of, scratch, "
                          "started_by) VALUES (%s, %s, %s, %s) RETURNING *",
                          [at, week, scratch, by])
    return _read(rows[0])


def claim(pub: Pub, rehearsal_id: int, step: int, now: datetime) -> bool:
    """Claim step number ``step`` (0-based: the steps done so far) of an unfinished
    rehearsal; False when another runner has it or it has moved on."""
    at = as_utc(now)
    with pub.atomic() as tx:
        rows = tx.execute("UPDATE pub_rehearsals SET acting_since = %s WHERE id = %s AND "
                          "outcome IS NULL AND step_reached = %s AND (acting_since IS NULL "
                          "OR acting_since < %s) RETURNING id",
                          [at, rehearsal_id, step, at - STEP_TTL])
    return bool(rows)


def done(pub: Pub, rehearsal_id: int, step: int, entry: dict[str, Any], *,
         outcome: str | None, now: datetime, failure: str | None = None) -> None:
    """Record the claimed step's result (and the outcome when it is the end)."""
    at = as_utc(now)
    with pub.atomic() as tx:
        rows = tx.execute("SELECT steps FROM pub_rehearsals WHERE id = %s AND "
                          "step_reached = %s", [rehearsal_id, step])
        if not rows:
            return  # abandoned meanwhile: nothing left to record
        steps = [*json.loads(rows[0]["steps"] or "[]"), entry]
        tx.execute("UPDATE pub_rehearsals SET steps = %s, step_reached = %s, "
                   "acting_since = NULL, outcome = %s, failure = %s, finished_at = %s "
                   "WHERE id = %s AND outcome IS NULL",
                   [json.dumps(steps), step + 1 if entry["ok"] else step, outcome, failure,
                    at if outcome else None, rehearsal_id])


def finish(pub: Pub, rehearsal_id: int, outcome: str, now: datetime,
           failure: str | None = None) -> bool:
    """End an unfinished rehearsal (abandoned, or failed outside a step)."""
    with pub.atomic() as tx:
        rows = tx.execute("UPDATE pub_rehearsals SET outcome = %s, finished_at = %s, "
                          "acting_since = NULL, failure = %s WHERE id = %s AND outcome IS "
                          "NULL RETURNING id", [outcome, as_utc(now), failure, rehearsal_id])
    return bool(rows)
