"""The v2 engine (flag ``PUB_SCHEDULER_V2`` on): one door, ``transition``, and the
operator's actions, each exactly one transition (the seed's v2-actions table).

=====================================  =============================================
open / reopen / reopen after generate   pure move into COLLECTING (H3: one at a time)
extend deadline                         COLLECTING -> COLLECTING with the new deadline
close                                   COLLECTING -> CLOSED under lease ACT.CLOSE
generate / regenerate                   the picker, under lease ACT.GENERATE
approve                                 approve the week's shifts, then the pure move,
                                        in one unit of work
un-approve                              APPROVED -> ASSIGNED (H4: refused while a send
                                        lease is live)
send                                    the send body, under lease ACT.SEND
=====================================  =============================================

Operator actions are not time-gated: they act when the operator says; the times drive
only the tick (:mod:`pubsched.engines.v2_tick`). Every side effect that writes the app's
tables (assignments, deliveries) does so through a unit fenced by its lease: a zombie
writes nothing.

The module itself is the engine: it has every member of :class:`pubsched.engines.base.Engine`
(the actions above, ``tick`` = :func:`pubsched.engines.v2_tick.v2_tick`, the readings of a
week at its end), and :data:`pubsched.engines.choose.ENGINES` holds it as one, which mypy
checks. No class forwards to these functions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

import rowstate

from ..db.instants import maybe_instant
from ..machine import APPROVED, ASSIGNED, CLOSED, COLLECTING, DRAFT
from ..people.usual import fill_unanswered
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from ..week.generate import generate_body
from ..week.runs import (
    create_week,
    new_deadline,
    opening_deadline,
    plan_week,
    set_autopilot,
    settings_override,
    stamp_closed,
    stamp_form_moved,
    week_key,
    write_week,
)
from ..week.send import failure_text, send_body
from .base import Times
from .v2_tick import v2_tick


class _Rollback(Exception):
    """Undo a unit whose move was refused after its own writes (approve)."""

    def __init__(self, verdict: Verdict):
        super().__init__(verdict.reason)
        self.verdict = verdict


def verdict(result: Any, what: str) -> Verdict:
    """A transition's or run's result as an action's verdict."""
    if result.applied:
        return Verdict(True, message=f"{what}: {result.previous} -> {result.state}",
                       detail={"state": result.state})
    error = getattr(result, "error", None)
    if getattr(result, "acted", False) and error and result.reason == "ACT_FAILED":
        return Verdict(False, result.reason, error, message=f"{what} failed: {error}",
                       detail={"state": result.state})
    return Verdict(False, result.reason, message=f"{what} refused: {result.reason} "
                   f"(the week is {result.state})", detail={"state": result.state})


def transition(pub: Pub, week: str, to: str, *, from_: str | tuple[str, ...] | None = None,
               now: datetime | None = None, payload: dict[str, Any] | None = None) -> Verdict:
    """The only way a run's state changes by a pure move; leased edges go through their
    action (close, generate, send)."""
    key = week_key(week)
    if pub.runs.get(key) is None:
        raise BadInput(f"no week {key}")
    at = utc(now)
    stamp = {"opened_at": at} if to == COLLECTING and from_ == DRAFT else {}
    with pub.atomic() as tx:  # the caller's unit: the flag fence runs in it (flags.py)
        result = pub.runs.transition(key, to, from_=from_,
                                     payload={**stamp, **(payload or {})},
                                     by=pub.actor)
        if result.applied and to == COLLECTING:  # the form (re)opened: a quiet hour
            stamp_form_moved(pub, tx, key, at)
    return verdict(result, f"{key} -> {to}")


def open_form(pub: Pub, week: str, *, now: datetime | None = None,
              deadline: datetime | None = None) -> Verdict:
    """DRAFT -> COLLECTING, the week created first if new: its row, its shifts and the move
    in one unit of work, so a refused open (another week collecting: H3) writes nothing
    and says which week holds the survey. Sends no email: tenders get their personal link
    from the operator. ``deadline``: the one the operator chose (the default otherwise),
    checked before any write (:func:`pubsched.week.runs.opening_deadline`)."""
    key = week_key(week)
    at = utc(now)
    plan = plan_week(pub, key)  # BadInput (a bad week, a bad template) before any write
    payload: dict[str, Any] = {"opened_at": at}
    override = None
    if deadline is not None:
        override, times = opening_deadline(pub, key, plan.override, deadline, at)
        payload.update(deadline_at=times.deadline_at, generate_at=times.generate_at,
                       send_window_at=times.send_window_end)
    try:
        with pub.atomic() as tx:
            write_week(pub, tx, plan, at)
            result = pub.runs.transition(key, COLLECTING, from_=DRAFT, payload=payload,
                                         by=pub.actor)
            if not result.applied:
                raise _Rollback(_open_refused(pub, key, result, new=plan.new))
            if override is not None:
                tx.execute("UPDATE pub_schedule_runs SET settings_override = %s "
                           "WHERE week_of = %s", [json.dumps(override), key])
            stamp_form_moved(pub, tx, key, at)
    except _Rollback as undo:
        return undo.verdict
    return verdict(result, f"{key} -> {COLLECTING}")


def _open_refused(pub: Pub, key: str, result: Any, *, new: bool) -> Verdict:
    """A refused open's verdict; H3's names the week that holds the survey (a week the
    open would have created does not exist after the rollback: no state)."""
    if result.reason != "INVARIANT":
        return verdict(result, f"{key} -> {COLLECTING}")
    other = open_week(pub, key)
    why = (f"week {other} is open (one survey at a time)" if other
           else "another week is open (one survey at a time)")
    return Verdict(False, result.reason, message=f"{key} open refused: {why}",
                   detail={"state": None if new else result.state})


def open_week(pub: Pub, besides: str) -> str | None:
    """The first week, other than ``besides``, in COLLECTING (its state column: the legacy
    status derives no COLLECTING)."""
    rows = pub.query("SELECT week_of FROM pub_schedule_runs WHERE v2_state = %s AND "
                     "week_of <> %s ORDER BY week_of LIMIT 1", [COLLECTING, besides])
    return str(rows[0]["week_of"]) if rows else None


def reopen(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """CLOSED or ASSIGNED -> COLLECTING; after generate the assignments are kept (and
    ``reopened_at`` stamped): a regenerate then includes the new submissions."""
    key = week_key(week)
    at = utc(now)
    state = pub.runs.state(key)
    if state is None:
        raise BadInput(f"no week {key}")
    payload = {"reopened_at": at} if state == ASSIGNED else {}
    return transition(pub, key, COLLECTING, from_=(CLOSED, ASSIGNED), now=at, payload=payload)


def extend(pub: Pub, week: str, deadline: datetime, *, now: datetime | None = None) -> Verdict:
    """COLLECTING -> COLLECTING with a new deadline (and the week's settings_override
    remembers it). Refused while a close is in flight (LEASE_HELD). A "ready to close"
    nudge already sent stays sent: the seed's nudges fire at most once per run."""
    key = week_key(week)
    at = utc(now)  # when the deadline moved: the form reminders keep a quiet hour after
    new = utc(deadline)
    row = pub.runs.get(key)
    if row is None:
        raise BadInput(f"no week {key}")
    # the week's moments still in order, or BadInput
    override, times = new_deadline(pub, key, settings_override(row), new)
    with pub.atomic() as tx:
        result = pub.runs.transition(key, COLLECTING, from_=COLLECTING,
                                     payload={"deadline_at": times.deadline_at,
                                              "generate_at": times.generate_at,
                                              "send_window_at": times.send_window_end},
                                     by=pub.actor)
        if result.applied:
            # the "ready to close" nudge is not re-armed: it fires at most once per run
            tx.execute("UPDATE pub_schedule_runs SET settings_override = %s "
                       "WHERE week_of = %s", [json.dumps(override), key])
            stamp_form_moved(pub, tx, key, at)
    return verdict(result, f"{key} extend to {new.isoformat()}")


def close(pub: Pub, week: str, *, now: datetime | None = None,
          holder: str | None = None) -> Verdict:
    """COLLECTING -> CLOSED under ACT.CLOSE: the survey closes (no submission lands after
    the close applies: they hold the run in COLLECTING). Its act answers, in one unit
    fenced by its lease, for every tender who did not answer, from their usual
    (:func:`pubsched.people.usual.fill_unanswered`): a crash before the finalize leaves the week
    COLLECTING with all of those answers or none, and the retried close writes them again."""
    key = week_key(week)
    at = utc(now)

    def act(lease: rowstate.ActiveLease) -> None:
        with lease.atomic() as tx:  # the stamp and the answers from the usual: one unit
            fill_unanswered(pub, tx, key, stamp_closed(tx, key, at))

    result = pub.runs.run(key, "close", act, holder=holder, by=pub.actor)
    return verdict(result, f"{key} close")


def generate(pub: Pub, week: str, *, now: datetime | None = None,
             holder: str | None = None) -> Verdict:
    """CLOSED -> ASSIGNED (generate) or ASSIGNED -> ASSIGNED (regenerate in place)."""
    key = week_key(week)
    at = utc(now)
    state = pub.runs.state(key)
    if state is None:
        raise BadInput(f"no week {key}")
    edge = "regenerate" if state == ASSIGNED else "generate"
    filled: dict[str, Any] = {}

    def act(lease: rowstate.ActiveLease) -> None:
        filled.update(generate_body(pub, key, at, lease.atomic))

    try:
        result = pub.runs.run(key, edge, act, holder=holder, payload={"generated_at": at},
                              by=pub.actor)
    except rowstate.UnitRefusedError as exc:  # a zombie: its lease was taken over
        return Verdict(False, exc.reason, message=f"{key} {edge} refused: {exc.reason}")
    got = verdict(result, f"{key} {edge}")
    if got.applied:
        return Verdict(True, message=f"{got.message} ({filled.get('filled', 0)} slots filled, "
                       f"{filled.get('unfilled', 0)} unfilled)", detail={**got.detail, **filled})
    return got


def approve(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """Approve the week's shifts, then the pure move ASSIGNED -> APPROVED, in one unit.
    The hold is exclusive: a roster edit holding the week too waits for the approve (then
    finds it APPROVED) or went first, so no assignment can land between the stamp and the
    move unstamped."""
    key = week_key(week)
    at = utc(now)
    try:
        with pub.atomic() as tx:
            held = tx.hold(key, ASSIGNED, exclusive=True)
            if not held:
                if held.reason == "RECORD_NOT_FOUND":
                    raise BadInput(f"no week {key}")
                return Verdict(False, held.reason, message=f"{key} approve refused: "
                               f"{held.reason} (the week is {held.state})")
            tx.execute("UPDATE pub_assignments SET approved_at = %s WHERE week_of = %s",
                       [at, key])
            result = pub.runs.transition(key, APPROVED, from_=ASSIGNED,
                                         payload={"approved_at": at},
                                         by=pub.actor)
            if not result.applied:
                raise _Rollback(verdict(result, f"{key} approve"))
    except _Rollback as undo:
        return undo.verdict
    return verdict(result, f"{key} approve")


def unapprove(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """APPROVED -> ASSIGNED; H4: refused while a send lease is live (LEASE_HELD)."""
    key = week_key(week)
    with pub.atomic() as tx:
        result = pub.runs.transition(key, ASSIGNED, from_=APPROVED, by=pub.actor)
        if result.applied:
            tx.execute("UPDATE pub_assignments SET approved_at = NULL WHERE week_of = %s",
                       [key])
    if result.reason == "RECORD_NOT_FOUND":
        raise BadInput(f"no week {key}")
    return verdict(result, f"{key} unapprove")


def send(pub: Pub, week: str, *, now: datetime | None = None,
         holder: str | None = None) -> Verdict:
    """APPROVED -> SENT under ACT.SEND: the schedule email (see :mod:`pubsched.week.send`)."""
    key = week_key(week)
    at = utc(now)
    outcome: dict[str, Any] = {}

    def act(lease: rowstate.ActiveLease) -> Any:
        outcome.update(send_body(pub, key, at, lease.atomic, lease.token))
        if outcome["failed"]:
            return rowstate.ActFailed(failure_text(outcome))
        return outcome["sent"]

    try:
        result = pub.runs.run(key, "send", act, holder=holder, payload={"sent_at": at},
                              by=pub.actor)
    except rowstate.UnitRefusedError as exc:
        return Verdict(False, exc.reason, message=f"{key} send refused: {exc.reason}")
    except OSError as exc:  # pragma: no cover - the mailer reports outcomes, not raises
        return Verdict(False, failed=str(exc), message=f"{key} send failed: {exc}")
    got = verdict(result, f"{key} send")
    detail = {**got.detail, **outcome}
    return Verdict(got.applied, got.reason, got.failed, got.message, detail)


def autopilot(pub: Pub, week: str, on: bool = True, *,
              now: datetime | None = None) -> Verdict:
    """Autopilot on or off for one run (an action of the table in
    :mod:`pubsched.engines.actions`, beside the legacy engine's refusal). A column, not a
    state (see :func:`weeks.set_autopilot`): the tick then advances the run's timed steps
    and stops at ASSIGNED."""
    key = week_key(week)
    utc(now)
    set_autopilot(pub, key, on)
    return Verdict(True, message=f"{key} autopilot {'on' if on else 'off'}",
                   detail={"autopilot": on})



# -- the rest of the engine: the module is the Engine -------------------------------------------

name: Final = "v2"
# the tick of this engine (:meth:`pubsched.engines.base.Engine.tick`): nudges and autopilot
tick = v2_tick


def create(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """The week created as a draft through the door (its first event written with it)."""
    return create_week(pub, week, now=now, door=True)


def state_of(pub: Pub, row: dict[str, Any]) -> str:
    """``v2_state``, or the state derived from the legacy status while it is NULL."""
    return pub.runs.state_of(row) or DRAFT


def enabled_edges(pub: Pub, week: str) -> list[str]:
    """The engine's enabled edges (state, lease, invariants: one read)."""
    return [e.edge for e in pub.runs.enabled_edges(week_key(week)) if e.allowed]


def times(pub: Pub, row: dict[str, Any]) -> Times:
    """The run's own columns (an extension moves ``deadline_at``)."""
    return {"opens_at": maybe_instant(row.get("opens_at")),
            "deadline_at": maybe_instant(row.get("deadline_at")),
            "generate_at": maybe_instant(row.get("generate_at")),
            "send_window_at": maybe_instant(row.get("send_window_at"))}


def hold_form(tx: Any, week: str) -> Verdict | Mapping[str, Any]:
    """``tx.hold(week, COLLECTING)``: a submission racing a close commits before the close
    applies (the close waits for it) or is refused."""
    held = tx.hold(week, COLLECTING)
    if held:
        return held.row or {}
    if held.reason == "RECORD_NOT_FOUND":
        raise BadInput(f"no week {week}")
    if held.reason == "LEASE_HELD":  # a close (or another act) is in flight
        return Verdict(False, held.reason, message=f"the form for week {week} is "
                       "being closed right now; nothing was saved")
    return Verdict(False, "FORM_CLOSED", message=f"the form for week {week} is not open")


def hold_week(tx: Any, week: str, states: tuple[str, ...], *,
              exclusive: bool = False) -> Verdict | None:
    """``tx.hold(week, states)``: a move out of them waits for the unit or wins."""
    held = tx.hold(week, states, exclusive=exclusive)
    if held:
        return None
    if held.reason == "RECORD_NOT_FOUND":
        raise BadInput(f"no week {week}")
    return Verdict(False, held.reason, message=f"week {week} is {held.state}",
                   detail={"state": held.state})
