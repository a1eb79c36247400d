"""Running a rehearsal: start it (the record, then the copy), run its steps one at a time
(the web wizard: one step per press) or all at once (the CLI), stop it. Whatever the end
(passed, failed, abandoned), the copy is dropped; a start first drops every copy an
earlier rehearsal left behind (a crash between its end and its drop, or before its first
step), so at most the one in progress exists.

The record is written before the copy is made, so a crash never leaves a copy no record
names (on PostgreSQL, a scratch schema named by no unfinished record is dropped too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

import rowstate

from ..pub import Pub, utc
from ..verdicts import PubError
from . import record, scratch
from .record import ABANDONED, FAILED, PASSED, Rehearsal
from .steps import STEPS, StepFailed, next_week

REHEARSAL_RUNNING = "REHEARSAL_RUNNING"
STEP_TAKEN = "STEP_TAKEN"


class Refused(PubError):
    """The rehearsal cannot do this now; ``reason`` is the code the CLI prints."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class StepResult:
    """One step run: its number (1-based), name, words, ok, message, and the record after."""

    number: int
    name: str
    words: str
    ok: bool
    message: str
    rehearsal: Rehearsal


def start(pub: Pub, *, now: datetime | None = None, by: str | None = None) -> Rehearsal:
    """A new rehearsal with its copy made; refused while another one's step is running.
    No operator address: :class:`~pubsched.verdicts.BadInput`, nothing written."""
    scratch.operator_of(pub)
    at = utc(now)
    current = record.unfinished(pub)
    if current is not None and current.busy(at):
        raise Refused(REHEARSAL_RUNNING, f"rehearsal {current.id} is running a step right "
                      "now: wait for it, or stop it on the cutover page")
    name = scratch.new_name(pub)
    try:
        made = record.insert(pub, week=next_week(pub, at), scratch=name, now=at, by=by)
    except rowstate.InvariantViolation:
        scratch.drop(pub, name)
        raise Refused(REHEARSAL_RUNNING, "another rehearsal was started just now") from None
    except BaseException:
        scratch.drop(pub, name)
        raise
    clean(pub, keep=name)
    try:
        scratch.create(pub, name).close()
    except BaseException as exc:
        record.finish(pub, made.id, FAILED, at, f"could not make the copy: {exc}")
        scratch.drop(pub, name)
        raise
    return made


def clean(pub: Pub, *, keep: str | None = None) -> list[str]:
    """Drop every copy but ``keep``'s: those finished records name, and (PostgreSQL)
    scratch schemas no record names. Returns what was dropped."""
    dropped = []
    for name in {*record.all_scratches(pub), *scratch.leftovers(pub)} - {keep}:
        if scratch.exists(pub, name):
            scratch.drop(pub, name)
            dropped.append(name)
    return sorted(dropped)


def step(pub: Pub, rehearsal_id: int, expected: int, *,
         now: datetime | None = None) -> StepResult:
    """Run step number ``expected`` (0-based: the steps the caller saw done) of the
    rehearsal, exactly once: :class:`Refused` (STEP_TAKEN) when it is not that step any
    more, or another runner holds it. The last step passes the rehearsal; a failed step
    fails it. Either end drops the copy."""
    at = utc(now)
    if not 0 <= expected < len(STEPS) or not record.claim(pub, rehearsal_id, expected, at):
        raise Refused(STEP_TAKEN, "that step is already being run or done (another click "
                      "or another operator): reload to see where the rehearsal is")
    current = record.get(pub, rehearsal_id)
    assert current is not None  # just claimed
    this = STEPS[expected]
    words = this.words(current.week_of)
    try:
        copy = scratch.open_copy(pub, current.scratch)
        try:
            message, ok = this.run(copy, current.week_of, at), True
        finally:
            copy.close()
    except StepFailed as exc:
        message, ok = str(exc), False
    except Exception as exc:  # anything else is that step failing: said, not raised
        message, ok = f"{type(exc).__name__}: {exc}", False
    last = expected + 1 == len(STEPS)
    outcome = PASSED if ok and last else None if ok else FAILED
    failure = None if ok else f"failed at {this.name}: {message}"
    record.done(pub, rehearsal_id, expected,
                {"name": this.name, "words": words, "ok": ok, "message": message,
                 "at": at.isoformat()}, outcome=outcome, now=at, failure=failure)
    if outcome is not None:
        scratch.drop(pub, current.scratch)
    after = record.get(pub, rehearsal_id)
    assert after is not None
    return StepResult(expected + 1, this.name, words, ok, message, after)


def stop(pub: Pub, rehearsal_id: int, *, now: datetime | None = None) -> bool:
    """Abandon the rehearsal (if unfinished) and drop its copy."""
    found = record.get(pub, rehearsal_id)
    if found is None:
        return False
    stopped = record.finish(pub, rehearsal_id, ABANDONED, utc(now), "stopped by the operator")
    scratch.drop(pub, found.scratch)
    return stopped


def run_all(pub: Pub, *, now: Callable[[], datetime | None] = lambda: None,
            by: str | None = None) -> Iterator[StepResult]:
    """Start a rehearsal and run every step, yielding each as it ends; stops at the first
    that fails. Interrupted (Ctrl-C, a crash of the caller): abandoned, the copy dropped."""
    made = start(pub, now=now(), by=by)
    try:
        for number in range(len(STEPS)):
            result = step(pub, made.id, number, now=now())
            yield result
            if not result.ok:
                return
    finally:
        if (record.get(pub, made.id) or made).running:
            stop(pub, made.id, now=now())
