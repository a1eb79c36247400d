"""The v2 engine's every-minute tick (flag on): the legacy crons stand down and this owns
time-based behaviour, through the engine's ``fire_due(now=...)`` (deadlines judged by
``now``; leases age by the database clock), so every move goes through the one door and
each due row moves exactly once however many ticks run:

* manual-mode nudges (runs with autopilot 0): COLLECTING past its deadline -> one "ready
  to close and generate?" email to the operator; APPROVED and unsent past the send window
  -> one "approved but not sent". Each is claimed (``collecting_alert_at`` /
  ``unsent_alert_at``) before it is sent, so it goes at most once per run; nudges never
  change state;
* autopilot (runs with ``autopilot = 1``): DRAFT -> COLLECTING at opens-at, COLLECTING ->
  CLOSED at the deadline, CLOSED -> ASSIGNED at the generate time; then it stops: it never
  approves and never sends.
"""

from __future__ import annotations

import logging
from datetime import date, datetime
from typing import Any

import rowstate

from ..generate import generate_body
from ..mail.compose import Nudge, compose_nudge
from ..pub import Pub, Verdict, utc
from .base import parse_instant

log = logging.getLogger("pubsched.tick")


def v2_tick(pub: Pub, now: datetime) -> list[Verdict]:
    def close_act(lease: rowstate.ActiveLease) -> None:
        with lease.atomic() as tx:
            tx.execute("UPDATE pub_schedule_runs SET closed_at = %s WHERE week_of = %s",
                       [now, lease.key[0]])

    def generate_act(lease: rowstate.ActiveLease) -> None:
        week = str(lease.key[0])
        generate_body(pub, week, now, lease.atomic)
        with lease.atomic() as tx:
            tx.execute("UPDATE pub_schedule_runs SET generated_at = %s WHERE week_of = %s",
                       [now, week])

    def nudge(kind: Nudge, due_column: str) -> Any:
        def send(row: Any) -> None:
            _nudge(pub, kind, row, due_column, now)
        return send

    report = pub.runs.fire_due(
        acts={"close": close_act, "generate": generate_act},
        notify={"collecting_alert": nudge(Nudge.READY_TO_CLOSE, "deadline_at"),
                "unsent_alert": nudge(Nudge.APPROVED_NOT_SENT, "send_window_at")},
        now=now)
    out = []
    for fired in report.fired:
        what = f"{fired.key[0]} {fired.name}"
        if fired.applied:
            out.append(Verdict(True, message=f"tick: {what}"))
        elif fired.error:
            log.warning("tick: %s failed: %s", what, fired.error)
            out.append(Verdict(False, failed=fired.error, message=f"tick: {what} failed"))
        else:
            out.append(Verdict(False, fired.reason, message=f"tick: {what} {fired.reason}"))
    return out


def _nudge(pub: Pub, kind: Nudge, row: Any, due_column: str, now: datetime) -> None:
    """Compose and send one nudge (already claimed: a failure here never sends twice)."""
    week = str(row["week_of"])
    due_at = parse_instant(row.get(due_column)) or now
    settings = pub.config.mail
    if settings.operator_email is None:
        log.warning("tick: %s for %s, but PUBSCHED_OPERATOR_EMAIL is not set", kind.value,
                    week)
        return
    outgoing = compose_nudge(kind, date.fromisoformat(week), due_at=utc(due_at),
                             tz=pub.config.tz.key, settings=settings, now=now,
                             admin_url=f"{pub.config.base_url.rstrip('/')}/admin/weeks/{week}")
    with pub.mailer.session() as mail:
        outcome = mail.send(outgoing)
    with pub.atomic() as tx:
        tx.execute("INSERT INTO pub_mail_log (week_of, kind, recipient, subject, at) "
                   "VALUES (%s, %s, %s, %s, %s)",
                   [week, f"nudge:{kind.name.lower()}:{outcome.delivery.value}",
                    outgoing.envelope_to, str(outgoing.message["Subject"]), now])
