"""The cutover between the engines: the ``PUB_SCHEDULER_V2`` flag is flipped (on, or off for
a rollback) only in the idle gap, the seed's rule, since only there can neither engine
strand a week the other cannot read.

**The idle gap.** No run in flight: every run is SENT or not yet opened, and no lease is
live (v2's ``acting_at``, the legacy send lease ``send_lease_at``, each within its TTL by
the database clock, as the engines themselves age them). A fresh install is idle.

A run is judged by BOTH engines' views (each engine's ``state_of``), because the flag
cannot tell which engine last moved a row: the legacy view reads the timestamps
(:func:`pubsched.engines.legacy_state.inferred_state`), the v2 view reads ``v2_state``
(or, while it is NULL, the state derived from the legacy status). A legacy week that is
open reads DRAFT to v2 (its status is still 'pending'), and a v2 week reopened from CLOSED
reads CLOSED to the legacy engine: either one is in flight. The two views agree on exactly
the idle states: a SENT run has status 'sent' (v2 writes it through), and a run not yet
opened has no timestamps and v2_state NULL or DRAFT.

**The flip.** :func:`flip` reads the runs and writes the flag in one unit of work; on
PostgreSQL it first takes a SHARE lock on ``pub_schedule_runs``, so no week can be opened
or moved between the check and the flag's write (SQLite's unit holds the one writer lock).
Outside the idle gap it is refused (NOT_IDLE, the reasons in the message) unless
``force=True``: a forced flip is the operator's conscious choice, and its verdict lists
what it flipped over.

**Turning v2 on hands it coherent rows.** The legacy engine creates its weeks as plain
rows (``v2_state`` NULL: "not yet adopted", which v2 derives from the legacy status and
seeds when it first moves the week). A row that does carry a v2 state the legacy engine
has since overtaken (written by v2 before a rollback, or by older code that created legacy
weeks through the engine's door) may have been sent by the legacy engine, which never
writes ``v2_state``: v2 would read a SENT week as DRAFT and could open it again. In the
same unit as the flag, every such row (the legacy status 'sent', ``v2_state`` not SENT) is
handed back to derivation (``v2_state`` NULL, which v2 reads as SENT), and every unsent row
without v2's due times (legacy rows from before 0035) gets them from the week's settings,
so the tick can nudge it. Rollback needs nothing of the kind: v2 writes the legacy status
through on APPROVED and SENT, and a week it has not opened has no legacy timestamps.

**The dress rehearsal is not skippable.** Turning v2 on over a database that has weeks (a
row in ``pub_schedule_runs``) is refused (REHEARSAL_REQUIRED) until a rehearsal passed on
this database (:mod:`pubsched.rehearsal`: a whole week on v2 on a throwaway copy, every
email to the operator). ``force`` skips the idle-gap check only, never this one: a forced
flip is a choice about a week in flight, while the rehearsal is the proof that v2 runs
this pub's week at all. The record is read in the flip's own unit. An empty database (a
fresh install, which ``init`` turns on) has nothing to rehearse; a rollback needs none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..machine import DRAFT, SEND_LEASE_TTL, SENT
from ..pub import Pub, utc
from ..rehearsal.record import has_passed
from ..verdicts import BadInput, Verdict
from ..week.runs import settings_override, times_of
from .choose import ENGINES
from .flags import lock_flag, set_v2, v2_enabled
from .legacy_state import db_now_sql, lease_live

NOT_IDLE = "NOT_IDLE"
REHEARSAL_REQUIRED = "REHEARSAL_REQUIRED"
REHEARSE = ("run the dress rehearsal first: `pubsched cutover rehearse`, or the wizard on "
            "the web cutover page")
IDLE_STATES = (DRAFT, SENT)


@dataclass(frozen=True)
class Check:
    """Is this the idle gap? ``reasons`` names every run or lease that says no."""

    idle: bool
    reasons: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.idle


def views(pub: Pub, row: dict[str, Any]) -> dict[str, str]:
    """The run's state as each engine reads it."""
    return {name: engine.state_of(pub, row) for name, engine in ENGINES.items()}


def _reasons(pub: Pub, rows: list[dict[str, Any]]) -> list[str]:
    reasons = []
    for row in rows:
        week = row["week_of"]
        seen = views(pub, row)
        busy = {engine: state for engine, state in seen.items() if state not in IDLE_STATES}
        if busy:
            said = ", ".join(f"{state} to {engine}" for engine, state in busy.items())
            reasons.append(f"week {week} is in flight ({said})")
        if lease_live(row.get("acting_at"), row["db_now"], SEND_LEASE_TTL):
            reasons.append(f"week {week} has a live v2 {row.get('acting_kind')} lease "
                           f"(since {row['acting_at'].isoformat()})")
        if lease_live(row.get("send_lease_at"), row["db_now"], SEND_LEASE_TTL):
            reasons.append(f"week {week} has a live legacy send lease "
                           f"(since {row['send_lease_at'].isoformat()})")
    return reasons


def _runs(pub: Pub, tx: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = tx.execute(
        f"SELECT *, {db_now_sql(pub)} AS db_now FROM pub_schedule_runs ORDER BY week_of")
    return rows


def _adopt(pub: Pub, tx: Any) -> None:
    """Make the rows coherent for v2 (see the module docstring)."""
    tx.execute("UPDATE pub_schedule_runs SET v2_state = NULL WHERE status = 'sent' "
               "AND v2_state IS NOT NULL AND v2_state <> 'SENT'")
    for row in tx.execute("SELECT week_of, settings_override FROM pub_schedule_runs WHERE "
                          "status <> 'sent' AND sent_at IS NULL AND deadline_at IS NULL"):
        try:
            times = times_of(pub, row["week_of"], settings_override(row))
        except BadInput:  # a bad override: left as it is, the tick skips a NULL due time
            continue
        tx.execute("UPDATE pub_schedule_runs SET opens_at = %s, deadline_at = %s, "
                   "generate_at = %s, send_window_at = %s WHERE week_of = %s",
                   [times.opens_at, times.deadline_at, times.generate_at,
                    times.send_window_end, row["week_of"]])


def rehearsal_needed(pub: Pub) -> bool:
    """Whether turning v2 on here would need a passed rehearsal first: weeks exist and no
    rehearsal has passed (what the CLI's check and the web page say)."""
    with pub.atomic() as tx:
        weeks = tx.execute("SELECT 1 AS one FROM pub_schedule_runs LIMIT 1")
        return bool(weeks) and not has_passed(tx)


def began_on_v2(pub: Pub) -> bool:
    """Whether this pub has only ever run on v2: nothing to cut over, so the cutover page
    says so instead of an idle gap, a rehearsal and a switch (issue 29).

    Read from what the two ways onto v2 leave behind: turning it on over weeks needs a
    passed rehearsal (the flip's rule, forced or not), and a week the legacy engine opened
    carries ``opened_at`` with no ``v2_state`` (the legacy engine never writes it; v2 seeds
    it when it first moves a week, and ``_adopt`` hands legacy-sent rows back to NULL). So
    v2 on, no rehearsal passed and no such week means the flag went on over an empty
    database (``init``'s first engine, or a flip before the first week)."""
    if not v2_enabled(pub):
        return False
    with pub.atomic() as tx:
        legacy = tx.execute("SELECT 1 AS one FROM pub_schedule_runs WHERE v2_state IS NULL "
                            "AND (opened_at IS NOT NULL OR status <> 'pending') LIMIT 1")
        return not legacy and not has_passed(tx)


def cutover_check(pub: Pub, now: datetime | None = None) -> Check:
    """Whether this is the idle gap, and every reason it is not. ``now`` is checked like
    every action's instant; the leases age by the database clock."""
    utc(now)
    with pub.atomic() as tx:
        reasons = _reasons(pub, _runs(pub, tx))
    return Check(not reasons, reasons)


def flip(pub: Pub, on: bool, *, force: bool = False, now: datetime | None = None) -> Verdict:
    """Turn the v2 engine on (``on=True``) or off (the rollback), in the idle gap only
    unless ``force``. Flipping to the value it already has is applied and changes nothing."""
    at = utc(now)
    target = "on" if on else "off"
    with pub.atomic() as tx:
        lock_flag(pub, tx, shared=False)  # first: no fenced action is mid-unit (flags.py)
        if pub.dialect == "postgresql":
            tx.execute("LOCK TABLE pub_schedule_runs IN SHARE MODE")
        if v2_enabled(pub) == on:
            return Verdict(True, message=f"{'v2' if on else 'legacy'} is already the engine "
                           f"(PUB_SCHEDULER_V2 {target})", detail={"v2": on, "changed": False})
        runs = _runs(pub, tx)
        reasons = _reasons(pub, runs)
        if reasons and not force:
            return Verdict(False, NOT_IDLE, message=f"PUB_SCHEDULER_V2 {target} refused: not "
                           f"the idle gap: {'; '.join(reasons)}",
                           detail={"reasons": reasons})
        if on and runs and not has_passed(tx):
            return Verdict(False, REHEARSAL_REQUIRED, message=f"PUB_SCHEDULER_V2 on refused: "
                           f"no dress rehearsal has passed on this database; {REHEARSE}",
                           detail={"reasons": reasons})
        if on:
            _adopt(pub, tx)
        set_v2(pub, on, now=at)
    forced = f" (forced over: {'; '.join(reasons)})" if reasons else ""
    return Verdict(True, message=f"PUB_SCHEDULER_V2 {target}{forced}",
                   detail={"v2": on, "changed": True, "forced": bool(reasons),
                           "reasons": reasons})


__all__ = ["NOT_IDLE", "REHEARSAL_REQUIRED", "Check", "began_on_v2", "cutover_check", "flip",
           "rehearsal_needed", "views"]
