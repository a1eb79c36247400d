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
only the tick. Every side effect that writes the app's tables (assignments, deliveries)
does so through a unit fenced by its lease: a zombie writes nothing.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import rowstate

from .app import BadInput, Pub, Verdict, utc
from .generate import generate_body
from .machine import APPROVED, ASSIGNED, CLOSED, COLLECTING, DRAFT, SENT
from .send import failure_text, send_body
from .weeks import ensure_week, set_autopilot, settings_override, times_of, week_key


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
    result = pub.runs.transition(key, to, from_=from_, payload={**stamp, **(payload or {})})
    return verdict(result, f"{key} -> {to}")


def open_form(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """DRAFT -> COLLECTING (the week is created first, if new). Sends no email: tenders
    get their personal link from the operator."""
    key = week_key(week)
    at = utc(now)
    ensure_week(pub, key, now=at)
    return transition(pub, key, COLLECTING, from_=DRAFT, now=at)


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
    remembers it). Refused while a close is in flight (LEASE_HELD)."""
    key = week_key(week)
    utc(now)  # checked like every action's instant; the extension itself is timeless
    new = utc(deadline)
    row = pub.runs.get(key)
    if row is None:
        raise BadInput(f"no week {key}")
    override = {**settings_override(row), "deadline_at": new.isoformat()}
    if times_of(pub, key, settings_override(row)).generate_at < new:
        override["generate_at"] = new.isoformat()  # the generate time follows the deadline
    times = times_of(pub, key, override)  # the week's moments still in order, or BadInput
    with pub.atomic() as tx:
        result = pub.runs.transition(key, COLLECTING, from_=COLLECTING,
                                     payload={"deadline_at": times.deadline_at,
                                              "generate_at": times.generate_at})
        if result.applied:
            tx.execute("UPDATE pub_schedule_runs SET settings_override = %s, "
                       "collecting_alert_at = NULL WHERE week_of = %s",
                       [json.dumps(override), key])
    return verdict(result, f"{key} extend to {new.isoformat()}")


def close(pub: Pub, week: str, *, now: datetime | None = None,
          holder: str | None = None) -> Verdict:
    """COLLECTING -> CLOSED under ACT.CLOSE: the survey closes (no submission lands after
    the close applies: they hold the run in COLLECTING)."""
    key = week_key(week)
    at = utc(now)
    result = pub.runs.run(key, "close", lambda lease: None, holder=holder,
                          payload={"closed_at": at})
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
        result = pub.runs.run(key, edge, act, holder=holder, payload={"generated_at": at})
    except rowstate.UnitRefusedError as exc:  # a zombie: its lease was taken over
        return Verdict(False, exc.reason, message=f"{key} {edge} refused: {exc.reason}")
    got = verdict(result, f"{key} {edge}")
    if got.applied:
        return Verdict(True, message=f"{got.message} ({filled.get('filled', 0)} slots filled, "
                       f"{filled.get('unfilled', 0)} unfilled)", detail={**got.detail, **filled})
    return got


def approve(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """Approve the week's shifts, then the pure move ASSIGNED -> APPROVED, in one unit."""
    key = week_key(week)
    at = utc(now)
    try:
        with pub.atomic() as tx:
            held = tx.hold(key, ASSIGNED)
            if not held:
                if held.reason == "RECORD_NOT_FOUND":
                    raise BadInput(f"no week {key}")
                return Verdict(False, held.reason, message=f"{key} approve refused: "
                               f"{held.reason} (the week is {held.state})")
            tx.execute("UPDATE pub_assignments SET approved_at = %s WHERE week_of = %s",
                       [at, key])
            result = pub.runs.transition(key, APPROVED, from_=ASSIGNED,
                                         payload={"approved_at": at})
            if not result.applied:
                raise _Rollback(verdict(result, f"{key} approve"))
    except _Rollback as undo:
        return undo.verdict
    return verdict(result, f"{key} approve")


def unapprove(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """APPROVED -> ASSIGNED; H4: refused while a send lease is live (LEASE_HELD)."""
    key = week_key(week)
    with pub.atomic() as tx:
        result = pub.runs.transition(key, ASSIGNED, from_=APPROVED)
        if result.applied:
            tx.execute("UPDATE pub_assignments SET approved_at = NULL WHERE week_of = %s",
                       [key])
    if result.reason == "RECORD_NOT_FOUND":
        raise BadInput(f"no week {key}")
    return verdict(result, f"{key} unapprove")


def send(pub: Pub, week: str, *, now: datetime | None = None,
         holder: str | None = None) -> Verdict:
    """APPROVED -> SENT under ACT.SEND: the schedule email (see :mod:`pubsched.send`)."""
    key = week_key(week)
    at = utc(now)
    outcome: dict[str, Any] = {}

    def act(lease: rowstate.ActiveLease) -> Any:
        outcome.update(send_body(pub, key, at, lease.atomic, lease.token))
        if outcome["failed"]:
            return rowstate.ActFailed(failure_text(outcome))
        return outcome["sent"]

    try:
        result = pub.runs.run(key, "send", act, holder=holder, payload={"sent_at": at})
    except rowstate.UnitRefusedError as exc:
        return Verdict(False, exc.reason, message=f"{key} send refused: {exc.reason}")
    except OSError as exc:  # pragma: no cover - the mailer reports outcomes, not raises
        return Verdict(False, failed=str(exc), message=f"{key} send failed: {exc}")
    got = verdict(result, f"{key} send")
    detail = {**got.detail, **outcome}
    return Verdict(got.applied, got.reason, got.failed, got.message, detail)


def autopilot(pub: Pub, week: str, on: bool = True, *,
              now: datetime | None = None) -> Verdict:
    """Autopilot on or off for one run (the button of ``actions.perform``, beside the
    legacy engine's refusal). A column, not a state (see :func:`weeks.set_autopilot`):
    the tick then advances the run's timed steps and stops at ASSIGNED."""
    key = week_key(week)
    utc(now)
    set_autopilot(pub, key, on)
    return Verdict(True, message=f"{key} autopilot {'on' if on else 'off'}",
                   detail={"autopilot": on})


ACTIONS = {"open": open_form, "close": close, "generate": generate, "reopen": reopen,
           "approve": approve, "unapprove": unapprove, "send": send}
STATE_ORDER = (DRAFT, COLLECTING, CLOSED, ASSIGNED, APPROVED, SENT)
