"""The v2 engine's every-minute tick (flag on): the legacy crons stand down and this owns
time-based behaviour, through the engine's ``fire_due(now=...)`` (deadlines judged by
``now``; leases age by the database clock), so every move goes through the one door and
each due row moves exactly once however many ticks run:

* manual-mode nudges (runs with autopilot 0): COLLECTING past its deadline -> one "ready
  to close and generate?" email to the operator; APPROVED and unsent past the send window
  -> one "approved but not sent". Each is claimed (``collecting_alert_at`` /
  ``unsent_alert_at``, a compare-and-set: two tickers at once, one claims), then sent, and
  the claim stays as the mark that it was delivered, so it is delivered at most once per
  run. A nudge that could not be handed over (the server refused it, nowhere to send it)
  gives its claim back and is reported as failed (``pubsched tick`` exits 1): the next
  tick tries again, since it is the operator's only reminder. One whose fate is unknown
  (the connection dropped after the data) keeps its claim, and is reported: it may have
  arrived, and a second copy would break "at most once". Nudges never change state;
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
from datetime import date, datetime, timedelta
from typing import Any

import rowstate

from ..db.instants import maybe_instant
from ..generate import generate_body
from ..machine import COLLECTING, DRAFT
from ..mail.compose import Nudge, Outgoing, compose_late_open, compose_nudge
from ..mail.mailer import Delivery, Outcome
from ..mail_log import log_mail
from ..pub import Pub, utc
from ..usual import fill_unanswered
from ..verdicts import Verdict
from ..weeks import settings_override

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
            tx.execute("UPDATE pub_schedule_runs SET closed_at = %s WHERE week_of = %s",
                       [now, lease.key[0]])
            fill_unanswered(pub, tx, str(lease.key[0]), now)

    def generate_act(lease: rowstate.ActiveLease) -> None:
        week = str(lease.key[0])
        generate_body(pub, week, now, lease.atomic)
        with lease.atomic() as tx:
            tx.execute("UPDATE pub_schedule_runs SET generated_at = %s WHERE week_of = %s",
                       [now, week])

    out = _autopilot_opens(pub, now)
    not_delivered: dict[tuple[str, str], str] = {}  # (week, notice) -> why, for the report

    def nudge(kind: Nudge, name: str, due_column: str, claim: str) -> Any:
        def send(row: Any) -> None:
            try:
                _nudge(pub, kind, row, due_column, now)
            except NudgeNotDelivered as exc:
                if exc.retry:
                    _release(pub, claim, str(row["week_of"]))
                not_delivered[(str(row["week_of"]), name)] = str(exc)
                raise
        return send

    # leased edges and nudges: claim -> act -> finalize, whose finalize must land once the
    # act ran (an email went out), so no flag fence here; each acts only on a week in
    # flight (COLLECTING, CLOSED, APPROVED), which keeps an unforced flip out (NOT_IDLE)
    with pub.fenced(None):
        report = pub.runs.fire_due(
            acts={"close": close_act, "generate": generate_act},
            notify={"collecting_alert": nudge(Nudge.READY_TO_CLOSE, "collecting_alert",
                                              "deadline_at", "collecting_alert_at"),
                    "unsent_alert": nudge(Nudge.APPROVED_NOT_SENT, "unsent_alert",
                                          "send_window_at", "unsent_alert_at")},
            now=now, by=pub.actor)
    for fired in report.fired:
        what = f"{fired.key[0]} {fired.name}"
        if fired.applied:
            out.append(Verdict(True, message=f"tick: {what}"))
        elif fired.error:
            why = not_delivered.get((str(fired.key[0]), fired.name), fired.error)
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
            if result.applied and "deadline_at" in payload:
                override = {**settings_override(row),
                            "deadline_at": payload["deadline_at"].isoformat(),
                            "generate_at": payload["generate_at"].isoformat()}
                tx.execute("UPDATE pub_schedule_runs SET settings_override = %s "
                           "WHERE week_of = %s", [json.dumps(override), week])
        if not result.applied:
            out.append(Verdict(False, result.reason, message=f"tick: {week} open "
                               f"{result.reason}"))
            continue
        if "deadline_at" not in payload:
            out.append(Verdict(True, message=f"tick: {week} open"))
            continue
        new = payload["deadline_at"]
        told = _tell_late_open(pub, week, old_deadline, new, now)
        said = (f"tick: {week} open (late: the deadline moved to "
                f"{_local(pub, new)}, {floor.total_seconds() / 3600:g} hours after the open)")
        out.append(Verdict(True, message=said))
        if told:
            out.append(Verdict(False, failed=told, message=f"tick: {week} late open: {told}"))
    return out


def _local(pub: Pub, moment: datetime) -> str:
    local = moment.astimezone(pub.config.tz)
    return f"{local:%a} {local.day} {local:%b %H:%M %Z}"


def _tell_late_open(pub: Pub, week: str, old: datetime | None, new: datetime,
                    now: datetime) -> str | None:
    """Email the operator that autopilot opened the form late and moved the deadline (the
    note is :func:`~pubsched.mail.compose.compose_late_open`'s); the reason it was not
    delivered, or None."""
    settings = pub.config.mail
    if settings.operator_email is None:
        return "the operator was not told: PUBSCHED_OPERATOR_EMAIL is not set"
    outgoing = compose_late_open(
        date.fromisoformat(week), opened_at=now, old_deadline=old, new_deadline=new,
        tz=pub.config.tz.key, settings=settings, now=now, admin_url=_week_page(pub, week))
    outcome = _send_logged(pub, week, "late_open", outgoing, now)
    if outcome.delivery is Delivery.DELIVERED:
        return None
    return f"the operator's email was not delivered: {outcome.detail}"


def _week_page(pub: Pub, week: str) -> str:
    """The week's page in the admin, the link an operator's note carries."""
    return f"{pub.config.base_url.rstrip('/')}/admin/weeks/{week}"


def _send_logged(pub: Pub, week: str, kind: str, outgoing: Outgoing,
                 now: datetime) -> Outcome:
    """Hand one operator's note to the mail server and log it, whatever became of it
    (``kind:delivered``, ``kind:refused``, ``kind:unknown``)."""
    with pub.mailer.session() as mail:
        outcome = mail.send(outgoing)
    log_mail(pub, week, f"{kind}:{outcome.delivery.value}", outgoing, now)
    return outcome


class NudgeNotDelivered(Exception):
    """A claimed nudge that did not reach the mail server (``retry``: its claim is given
    back, the next tick sends it) or whose fate is unknown (kept: at most once)."""

    def __init__(self, why: str, *, retry: bool = True):
        super().__init__(why)
        self.retry = retry


def _release(pub: Pub, claim: str, week: str) -> None:
    """Give a nudge's claim back (only its claimer holds it: no other tick can have
    claimed the row since), so the next tick sends the nudge again."""
    with pub.atomic() as tx:
        tx.execute(f"UPDATE pub_schedule_runs SET {claim} = NULL WHERE week_of = %s",
                   [week])


def _nudge(pub: Pub, kind: Nudge, row: Any, due_column: str, now: datetime) -> None:
    """Compose and send one nudge (already claimed: two ticks never both send it);
    :class:`NudgeNotDelivered` when it did not arrive."""
    week = str(row["week_of"])
    due_at = maybe_instant(row.get(due_column)) or now
    settings = pub.config.mail
    if settings.operator_email is None:
        raise NudgeNotDelivered(f"the {kind.value!r} reminder for the week of {week} has "
                                "nowhere to go: set PUBSCHED_OPERATOR_EMAIL; the next tick "
                                "tries again")

    outgoing = compose_nudge(kind, date.fromisoformat(week), due_at=utc(due_at),
                             tz=pub.config.tz.key, settings=settings, now=now,
                             admin_url=_week_page(pub, week))
    outcome = _send_logged(pub, week, f"nudge:{kind.name.lower()}", outgoing, now)

    if outcome.delivery is Delivery.REFUSED:
        raise NudgeNotDelivered(f"the {kind.value!r} reminder for the week of {week} was "
                                f"not delivered to {outgoing.envelope_to}: {outcome.detail}; "
                                "the next tick tries again")
    if outcome.delivery is Delivery.UNKNOWN:
        raise NudgeNotDelivered(f"the {kind.value!r} reminder for the week of {week} may not "
                                f"have reached {outgoing.envelope_to}: {outcome.detail}; it "
                                "is not sent again (at most once per run)", retry=False)
