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
"""

from __future__ import annotations

import logging
from datetime import date, datetime
from typing import Any

import rowstate

from ..generate import generate_body
from ..mail.compose import Nudge, compose_nudge
from ..mail.mailer import Delivery
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

    report = pub.runs.fire_due(
        acts={"close": close_act, "generate": generate_act},
        notify={"collecting_alert": nudge(Nudge.READY_TO_CLOSE, "collecting_alert",
                                          "deadline_at", "collecting_alert_at"),
                "unsent_alert": nudge(Nudge.APPROVED_NOT_SENT, "unsent_alert",
                                      "send_window_at", "unsent_alert_at")},
        now=now)
    out = []
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
    due_at = parse_instant(row.get(due_column)) or now
    settings = pub.config.mail
    if settings.operator_email is None:
        raise NudgeNotDelivered(f"the {kind.value!r} reminder for the week of {week} has "
                                "nowhere to go: set PUBSCHED_OPERATOR_EMAIL; the next tick "
                                "tries again")

    outgoing = compose_nudge(kind, date.fromisoformat(week), due_at=utc(due_at),
                             tz=pub.config.tz.key, settings=settings, now=now,
                             admin_url=f"{pub.config.base_url}/weeks/{week}")
    with pub.mailer.session() as mail:
        outcome = mail.send(outgoing)
    with pub.atomic() as tx:
        tx.execute("INSERT INTO pub_mail_log (week_of, kind, recipient, subject, at) "
                   "VALUES (%s, %s, %s, %s, %s)",
                   [week, f"nudge:{kind.name.lower()}:{outcome.delivery.value}",
                    outgoing.envelope_to, str(outgoing.message["Subject"]), now])

    if outcome.delivery is Delivery.REFUSED:
        raise NudgeNotDelivered(f"the {kind.value!r} reminder for the week of {week} was "
                                f"not delivered to {outgoing.envelope_to}: {outcome.detail}; "
                                "the next tick tries again")
    if outcome.delivery is Delivery.UNKNOWN:
        raise NudgeNotDelivered(f"the {kind.value!r} reminder for the week of {week} may not "
                                f"have reached {outgoing.envelope_to}: {outcome.detail}; it "
                                "is not sent again (at most once per run)", retry=False)
