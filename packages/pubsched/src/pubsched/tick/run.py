"""The every-minute tick: ``tick(pub, now)``. Safe with several app instances at once.

The engine in charge owns the weeks' time (:meth:`pubsched.engines.base.Engine.tick`):
with the flag off, the legacy crons (:func:`pubsched.engines.legacy.crons`); with it on,
the legacy crons stand down and the v2 tick (:mod:`pubsched.engines.v2_tick`: nudges and
autopilot) moves each due run exactly once through the one door, however many ticks run.
The engine's tick runs fenced by the flag it chose its engine by
(:func:`pubsched.engines.choose.chosen`): a tick racing a flip lands before it, or is
refused (FLAG_CHANGED) and writes nothing more.

Then, whatever engine runs the weeks, what is not the engine's (it moves no week, so it runs
outside the fence): the cover requests whose shift has started end
(:func:`pubsched.covers.expire_due`, the cover machine's own timed edge); the reminders due
now are owed (:func:`pubsched.tick.reminders.owe`: what the engine's tick just did, a roster
made, is seen by the same tick); and every email still owed is delivered
(:func:`pubsched.deliveries.deliver.deliver` with :data:`COMPOSERS`): the ones a command or
a page left behind (a crash after its commit, SMTP down), the ones refused before, and the
ones this tick just owed, and a schedule email of a sent week that its send's sender died
holding (:func:`pubsched.week.send.deliver_stranded`). On a database at the legacy schema
(before 0045: no cover requests, no outbox) the tick is the engine's alone, as it was.

**Each step stands alone.** The four steps (the engine's moves, the covers' expiry, the
reminders owed, the deliveries) share no unit of work, so one that raises (a deadlock, a
bad row, the database refusing a write) has written nothing and is no reason to skip the
others: it is logged with its traceback and reported as a failed verdict
(:data:`STEP_FAILED`, its error in ``failed``), and the next steps still run that minute.
The next tick tries the failed step again; :mod:`pubsched.tick.status` records the tick
as failed, so ``/metrics`` shows it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from .. import covers
from ..deliveries import outbox
from ..deliveries.deliver import deliver
from ..deliveries.machine import REFUSED
from ..deliveries.outbox import MAX_ATTEMPTS
from ..engines import operator_notes
from ..engines.choose import chosen
from ..engines.flags import FLAG_CHANGED, FlagChanged
from ..people import invite
from ..pub import Pub, utc
from ..verdicts import Verdict
from ..week import send
from . import reminders

log = logging.getLogger("pubsched.tick")
STEP_FAILED = "TICK_STEP_FAILED"  # a step of the tick raised; the others still ran

# every kind of notice the tick delivers, with its composer (a feature adds its own here)
COMPOSERS: Mapping[str, outbox.Composer] = {**covers.COMPOSERS, **reminders.COMPOSERS,
                                             **operator_notes.COMPOSERS, **invite.COMPOSERS}
# every kind of mail there is: the operator's resend of one of unknown fate
# (:mod:`pubsched.deliveries.resend`) writes it again; the schedule is the week's send's
EVERY_COMPOSER: Mapping[str, outbox.Composer] = {**COMPOSERS, **send.COMPOSERS}


def tick(pub: Pub, now: datetime | None = None) -> list[Verdict]:
    """One tick as of ``now``: the engine's (legacy crons or v2 nudges and autopilot),
    then the covers' expiry, the reminders owed, and the outbox's deliveries, each run
    whatever became of the ones before it (module docstring)."""
    at = utc(now)
    out = _step("the weeks' own steps", lambda: _engine(pub, at))
    if pub.schema.mail:  # cover requests (0045) and the mail machine (0049)
        out += _step("ending the requests for cover whose shift has started",
                     lambda: covers.expire_due(pub, at))
        out += _step("finding the reminders due", lambda: _owed(pub, at))
        out += _step("sending the emails owed", lambda: _told(deliver(pub, COMPOSERS, at)))
        out += _step("sending the schedule emails a killed send left",
                     lambda: _told(send.deliver_stranded(pub, at)))
    return out


def _engine(pub: Pub, at: datetime) -> list[Verdict]:
    try:
        with chosen(pub) as engine:
            return engine.tick(pub, at)
    except FlagChanged as changed:  # a flip landed mid-tick: the next tick runs the new one
        return [Verdict(False, FLAG_CHANGED, message=f"tick: {changed}")]


def _owed(pub: Pub, at: datetime) -> list[Verdict]:
    reminders.owe(pub, at)  # what it owes is reported when it is delivered
    return []


def _step(what: str, run: Callable[[], list[Verdict]]) -> list[Verdict]:
    """``run()``'s verdicts, or, when it raised, one failed verdict saying which step
    failed and why (the traceback goes to the log), so the caller goes on."""
    try:
        return run()
    except Exception as exc:
        log.exception("tick: %s failed", what)
        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return [Verdict(False, STEP_FAILED, failed=error,
                        message=f"tick: {what} failed ({error}); the rest of the tick "
                                "ran, and the next tick tries this again")]


def _told(delivered: list[Verdict]) -> list[Verdict]:
    """The outbox's deliveries as the tick reports them, in words: how many went (sent,
    or dropped as no longer true), and one line for each that did not go through."""
    done = sum(1 for v in delivered if v.applied)
    out = [Verdict(True, message=f"tick: {done} email{'' if done == 1 else 's'} dealt with "
                                 "(sent, or no longer needed)")] if done else []
    out += [Verdict(False, failed=v.failed, message=f"tick: {not_delivered(v)}")
            for v in delivered if not v.applied]
    return out


def not_delivered(verdict: Verdict) -> str:
    """What became of an email :func:`pubsched.deliveries.deliver.deliver` could not
    deliver, in words and with what happens next: refused (tried again by a later tick),
    or of unknown fate (it may have arrived, so it is not sent again). Told apart by the
    state the email ended in (the verdict's ``reason``), never by its text."""
    if verdict.reason != REFUSED:
        return (f"an email may not have arrived ({verdict.failed}); it is not sent again "
                "on its own")
    if "retry_at" in verdict.detail and verdict.detail["retry_at"] is None:
        return (f"an email did not go through ({verdict.failed}); it was the last of its "
                f"{MAX_ATTEMPTS} tries, so it is not tried again on its own")
    return f"an email did not go through ({verdict.failed}); the next tick tries again"
