"""The v2 engine's every-minute tick (flag on): the legacy crons stand down and this owns
time-based behaviour, through the engine's ``fire_due(now=...)`` (deadlines judged by
``now``; leases age by the database clock), so every move goes through the one door and
each due row moves exactly once however many ticks run:

* manual-mode nudges (runs with autopilot 0): COLLECTING past its deadline -> one "ready
  to close and generate?" email to the operator; APPROVED and unsent past the send window
  -> one "approved but not sent". Each is claimed (``collecting_alert_at`` /
  ``unsent_alert_at``, a compare-and-set: two tickers at once, one claims) and owed as
  mail (:mod:`pubsched.engines.operator_notes`), which the tick's deliveries send: a
  refused one is tried again after its wait, one of unknown fate never twice. Nudges never
  change state;
* autopilot (runs with ``autopilot = 1``): DRAFT -> COLLECTING at opens-at, COLLECTING ->
  CLOSED at the deadline, CLOSED -> ASSIGNED at the generate time; then it stops: it never
  approves and never sends.

**A late open keeps the tenders' time.** After a missed window (the ticker down for days)
one tick would open, close and generate: the tenders would get no time at all. So the open
is this tick's own move (not a timer of the binding): when it leaves less than
``PUBSCHED_MIN_COLLECT_HOURS`` (default 24; 0 turns the floor off) before the deadline, the
same write that opens the form moves the deadline to that long after the open (the generate
time and the send window follow, in order), so the close cannot be due in that tick; and the
operator gets an email saying so. The floor holds for every autopilot open, as a minimum
collecting time: a week set up with a shorter window gets the minimum too.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import Any

import rowstate

from ..db.instants import maybe_instant
from ..machine import COLLECTING, DRAFT
from ..mail.compose import Nudge
from ..people.usual import fill_unanswered
from ..pub import Pub
from ..verdicts import Verdict
from ..week.generate import generate_body
from ..week.runs import settings_override, stamp_closed, stamp_form_moved
from .operator_notes import owe_late_open, owe_nudge

log = logging.getLogger("pubsched.tick")


TICK = "tick"  # who the tick's moves name in their events (``history[].by``)


def v2_tick(pub: Pub, now: datetime) -> list[Verdict]:
    """One v2 tick as of ``now``; every move it makes records ``by: tick``, whoever ran
    it (the server's ticker, or ``pubsched tick`` from a shell)."""
    with pub.acting_as(TICK):
        return _tick(pub, now)


def _tick(pub: Pub, now: datetime) -> list[Verdict]:
    def close_act(lease: rowstate.ActiveLease) -> None:
        with lease.atomic() as tx:  # the stamp and the answers from the usual: one unit
            week = str(lease.key[0])
            fill_unanswered(pub, tx, week, stamp_closed(tx, week, now))

    def generate_act(lease: rowstate.ActiveLease) -> None:
        week = str(lease.key[0])
        generate_body(pub, week, now, lease.atomic)
        with lease.atomic() as tx:
            tx.execute("UPDATE pub_schedule_runs SET generated_at = %s WHERE week_of = %s",
                       [now, week])

    out = _autopilot_opens(pub, now)

    def nudge(kind: Nudge) -> Any:
        def owe(row: Any) -> None:
            owe_nudge(pub, kind, str(row["week_of"]), now)
        return owe

    # leased edges and nudges: claim -> act -> finalize, whose finalize must land once the
    # act ran (an email went out), so no flag fence here; each acts only on a week in
    # flight (COLLECTING, CLOSED, APPROVED), which keeps an unforced flip out (NOT_IDLE)
    notices = {"collecting_alert": nudge(Nudge.READY_TO_CLOSE),
               "unsent_alert": nudge(Nudge.APPROVED_NOT_SENT)}
    with pub.fenced(None):
        report = pub.runs.fire_due(acts={"close": close_act, "generate": generate_act},
                                   notify=notices, now=now, by=pub.actor)
    for fired in report.fired:
        what = f"{fired.key[0]} {fired.name}"
        if fired.applied and fired.name in notices:
            continue  # a nudge owed: its delivery is what the tick reports
        if fired.applied:
            out.append(Verdict(True, message=f"tick: {what}"))
        elif fired.error:
            why = fired.error
            log.warning("tick: %s failed: %s", what, why)
            out.append(Verdict(False, failed=why, message=f"tick: {what} failed: {why}"))
        else:
            out.append(Verdict(False, fired.reason, message=f"tick: {what} {fired.reason}"))
    return out


def _autopilot_opens(pub: Pub, now: datetime) -> list[Verdict]:
    """DRAFT -> COLLECTING for every autopilot run whose opens-at has come, each one write
    through the door (the state and ``autopilot = 1`` re-checked by the compare-and-set, so
    two ticks open it once), moving a deadline that would leave the tenders less than the
    minimum (module docstring)."""
    floor = timedelta(hours=pub.config.min_collect_hours)
    rows = pub.query("SELECT * FROM pub_schedule_runs WHERE autopilot = 1 AND "
                     "(v2_state = 'DRAFT' OR (v2_state IS NULL AND status = 'pending')) "
                     "ORDER BY week_of")
    out = []
    for row in rows:
        opens = maybe_instant(row.get("opens_at"))
        if opens is None or opens > now:
            continue
        week = str(row["week_of"])
        times = {k: maybe_instant(row.get(k))
                 for k in ("deadline_at", "generate_at", "send_window_at")}
        payload: dict[str, Any] = {"opened_at": now}
        old_deadline = times["deadline_at"]
        if old_deadline is not None and old_deadline < now + floor:
            payload["deadline_at"] = deadline = now + floor
            payload["generate_at"] = generate = max(times["generate_at"] or deadline, deadline)
            payload["send_window_at"] = max(times["send_window_at"] or generate, generate)
        with pub.atomic() as tx:
            result = pub.runs.transition(week, COLLECTING, from_=DRAFT,
                                         guards={"autopilot": 1}, payload=payload,
                                         by=pub.actor)
            if result.applied:  # the form opened: the form reminders keep a quiet hour
                stamp_form_moved(pub, tx, week, now)
            if result.applied and "deadline_at" in payload:
                override = {**settings_override(row),
                            "deadline_at": payload["deadline_at"].isoformat(),
                            "generate_at": payload["generate_at"].isoformat()}
                tx.execute("UPDATE pub_schedule_runs SET settings_override = %s "
                           "WHERE week_of = %s", [json.dumps(override), week])
                owe_late_open(pub, week, old_deadline=old_deadline,
                              new_deadline=payload["deadline_at"], now=now)
        if not result.applied:
            out.append(Verdict(False, result.reason, message=f"tick: {week} open "
                               f"{result.reason}"))
            continue
        if "deadline_at" not in payload:
            out.append(Verdict(True, message=f"tick: {week} open"))
            continue
        new = payload["deadline_at"]
        said = (f"tick: {week} open (late: the deadline moved to "
                f"{_local(pub, new)}, {floor.total_seconds() / 3600:g} hours after the open)")
        out.append(Verdict(True, message=said))
    return out


def _local(pub: Pub, moment: datetime) -> str:
    local = moment.astimezone(pub.config.tz)
    return f"{local:%a} {local.day} {local:%b %H:%M %Z}"
