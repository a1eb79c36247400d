"""Send: the schedule email to every tender with an assignment, never twice to one tender
for one run, even when a send crashes midway and is retried.

The same body serves both engines (the seed: v2's send act is "the same send body the
legacy path uses"); only the fence differs (v2: the send lease's token through
``lease.atomic()``; legacy: the AD-12 send lease). Per recipient, one delivery record:

1. marked ``in_flight`` through a fenced write, committed BEFORE the message is handed to
   SMTP (a zombie whose lease was taken over is refused here and hands nothing over);
2. the message is handed over once (never retried inside the send);
3. ``sent`` once the server accepted the data; ``failed`` when it was certainly not
   delivered (connection refused, a 4xx/5xx answer); left ``in_flight`` when its fate is
   unknown (the connection lost after the data went out, a crash).

A send with any failed recipient fails as a whole: the run stays APPROVED with
``last_error``. A retry sends only to recipients never attempted or failed; one left in
flight is shown to the operator as uncertain and is not re-sent on its own (the explicit
:func:`resend` is the operator's way). The operator is never a recipient of a tender's
message; in rehearsal every message goes to the operator, the intended one in the subject.
Each message carries the tender's own links (their page, their calendar); on a database at
the legacy schema, which has no link versions yet, it goes without them.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import date, datetime, timedelta
from typing import Any

from . import links, machine
from .db.instants import instant
from .mail.compose import Outgoing, Recipient, Roster, ShiftLine, compose_schedule
from .mail.mailer import Delivery
from .mail_log import log_mail
from .pub import Pub, utc
from .verdicts import BadInput, Verdict
from .weeks import shifts

IN_FLIGHT, SENT, FAILED = "in_flight", "sent", "failed"


def roster_lines(pub: Pub, week: str) -> tuple[Roster, dict[int, list[int]], dict[int, Any]]:
    """The email's roster, each tender's own shift ids, and the recipients (active
    tenders with an assignment) by id."""
    version = ("t.link_version" if pub.schema.link_versions
               else "NULL AS link_version")  # the legacy schema has no links (module doc)
    rows = pub.query(f"SELECT a.shift_id, a.tender_id, t.name, t.email, t.active, {version} "
                     "FROM pub_assignments a JOIN pub_tenders t ON t.id = a.tender_id "
                     "WHERE a.week_of = %s ORDER BY a.shift_id, t.name", [week])
    names: dict[int, list[str]] = {}
    own: dict[int, list[int]] = {}
    people: dict[int, Any] = {}
    for r in rows:
        names.setdefault(int(r["shift_id"]), []).append(str(r["name"]))
        if r["active"]:
            own.setdefault(int(r["tender_id"]), []).append(int(r["shift_id"]))
            people[int(r["tender_id"])] = r
    tz = pub.config.tz.key
    lines = tuple(ShiftLine(s.id, s.label, s.starts_at, s.ends_at, tz,
                            tuple(names.get(s.id, ())), s.slots) for s in shifts(pub, week))
    return Roster(date.fromisoformat(week), lines), own, people


def deliveries(pub: Pub, week: str) -> dict[int, dict[str, Any]]:
    rows = pub.query("SELECT tender_id, email, status, lease_token, attempted_at, sent_at, "
                     "error "
                     "FROM pub_deliveries WHERE week_of = %s", [week])
    return {int(r["tender_id"]): r for r in rows}


def send_body(pub: Pub, week: str, now: datetime,
              open_fenced: Callable[[], AbstractContextManager[Any]],
              token: int | None = None) -> dict[str, Any]:
    """Mail every recipient never attempted or failed; returns the counts and the failed
    ones. Raises what a fenced unit raises when the lease was lost (nothing handed over)."""
    roster, own, people = roster_lines(pub, week)
    done = deliveries(pub, week)
    todo = [tid for tid in sorted(people) if done.get(tid, {}).get("status") in (None, FAILED)]
    uncertain = sorted(str(done[tid]["email"]) for tid in people
                       if done.get(tid, {}).get("status") == IN_FLIGHT)
    sent, failed = 0, []
    if todo:
        with pub.mailer.session() as mail:
            for tid in todo:
                person = people[tid]
                outgoing = _composed(roster, person, own[tid], pub, now)
                if isinstance(outgoing, str):  # cannot be addressed: fails alone, not sent
                    with open_fenced() as tx:
                        _mark(tx, week, tid, str(person["email"]), FAILED, token, now,
                              outgoing)
                    failed.append(f"{person['email']}: {outgoing}")
                    continue
                with open_fenced() as tx:  # in flight BEFORE the handover, or nothing
                    _mark(tx, week, tid, str(person["email"]), IN_FLIGHT, token, now, None)
                outcome = mail.send(outgoing)
                if outcome.delivery is not Delivery.DELIVERED and outcome.reached:
                    log_mail(pub, week, f"schedule:{outcome.delivery.value}", outgoing, now)
                if outcome.delivery is Delivery.UNKNOWN:
                    uncertain.append(str(person["email"]))
                    _note(pub, week, tid, IN_FLIGHT, outcome.detail, None)
                    continue
                ok = outcome.delivery is Delivery.DELIVERED
                _note(pub, week, tid, SENT if ok else FAILED, None if ok else outcome.detail,
                      utc(None) if ok else None)
                if ok:
                    sent += 1
                    log_mail(pub, week, "schedule", outgoing, now)
                else:
                    failed.append(f"{person['email']}: {outcome.detail}")
    return {"week_of": week, "sent": sent, "failed": failed,
            "uncertain": sorted(set(uncertain))}


def _composed(roster: Roster, person: Any, shift_ids: list[int], pub: Pub,
              now: datetime) -> Outgoing | str:
    """The tender's schedule email, or why it cannot be built: a row stored before the
    address rule (:mod:`pubsched.mail.addresses`) fails alone instead of ending the send
    with a traceback before everyone after it."""
    try:
        tender_links = None if person["link_version"] is None else links.tender_links(
            pub.config, int(person["tender_id"]), int(person["link_version"]))
        return compose_schedule(roster, Recipient(str(person["email"]), str(person["name"])),
                                shift_ids, settings=pub.config.mail, now=now,
                                links=tender_links)
    except ValueError as exc:
        return f"cannot be addressed, fix the tender: {exc}"


def _mark(tx: Any, week: str, tender_id: int, email: str, status: str, token: int | None,
          now: datetime, error: str | None) -> None:
    tx.execute("INSERT INTO pub_deliveries (week_of, tender_id, email, status, lease_token, "
               "attempted_at, error) VALUES (%s, %s, %s, %s, %s, %s, %s) "
               "ON CONFLICT (week_of, tender_id) DO UPDATE SET status = excluded.status, "
               "lease_token = excluded.lease_token, attempted_at = excluded.attempted_at, "
               "error = excluded.error",
               [week, tender_id, email, status, token, now, error])


def _note(pub: Pub, week: str, tender_id: int, status: str, error: str | None,
          sent_at: datetime | None) -> None:
    """The outcome of one handover. Not fenced: the message is already out of our hands,
    and the record must say so even if the lease was lost meanwhile."""
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_deliveries SET status = %s, error = %s, sent_at = %s "
                   "WHERE week_of = %s AND tender_id = %s",
                   [status, error, sent_at, week, tender_id])


def failure_text(result: dict[str, Any]) -> str:
    """The send's failure in one line (the CLI's stderr, the run's ``last_error``): how many
    failed, the first few of them, and where each one's reason is (``week show``)."""
    failed = [entry.partition(": ")[0] for entry in result["failed"]]
    named = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    week = result.get("week_of")
    where = f"`pubsched week show {week}`" if week else "`pubsched week show`"
    return f"{len(failed)} recipient(s) failed ({named}); each one's reason: {where}"


RESENDING = "resend in progress"  # the error column of a claimed row, until its outcome


def resend(pub: Pub, week: str, email: str, *, state_of: Callable[[dict[str, Any]], str],
           now: datetime | None = None) -> Verdict:
    """The operator's explicit resend of one recipient left uncertain (in flight) or failed,
    after the run was sent: a conscious choice to risk a duplicate, and never two.

    ``state_of`` is the engine's reading of the run (the week must be SENT: before that the
    send itself mails everyone). The recipient is claimed by a compare-and-set on its
    delivery row: the row moves to in flight with a fresh claim token only if its status
    and token are still those read, so of two resends at once one claims and the other is
    refused (``RESEND_CLAIMED``), and one read while a claim is live (``error`` =
    :data:`RESENDING`, younger than the handover can take) is refused too. A resend that
    crashed holding a claim is resendable once that time has passed."""
    at = utc(now)
    row = pub.runs.get(week)
    if row is None:
        raise BadInput(f"no week {week}")
    state = state_of(row)
    if state != machine.SENT:
        return Verdict(False, "STATE_MISMATCH", message=f"resend is for a sent week: week "
                       f"{week} is {state}; its send mails {email}")
    roster, own, people = roster_lines(pub, week)
    match = [tid for tid, p in people.items() if str(p["email"]).lower() == email.lower()]
    if not match:
        raise BadInput(f"{email} has no assignment in week {week}")
    tid = match[0]
    seen = deliveries(pub, week).get(tid)
    if seen is None:
        return Verdict(False, "NOTHING_TO_RESEND", message=f"{email} was never part of the "
                       f"send of week {week}: nothing is uncertain or failed")
    if seen["status"] == SENT:
        return Verdict(False, "ALREADY_SENT", message=f"{email} was already sent week {week}")
    if seen["error"] == RESENDING and at - instant(seen["attempted_at"]) < _claim_ttl(pub):
        return Verdict(False, "RESEND_CLAIMED", message=f"a resend of week {week} to {email} "
                       "is under way")
    person = people[tid]
    outgoing = _composed(roster, person, own[tid], pub, at)
    if isinstance(outgoing, str):
        return Verdict(False, failed=outgoing, message=f"resend to {email}: {outgoing}")
    claim = secrets.randbelow(2**62) + 1
    with pub.atomic() as tx:
        claimed = tx.execute(
            "UPDATE pub_deliveries SET status = %s, attempted_at = %s, error = %s, "
            "lease_token = %s WHERE week_of = %s AND tender_id = %s AND status IN (%s, %s) "
            "AND COALESCE(lease_token, 0) = %s RETURNING tender_id",
            [IN_FLIGHT, at, RESENDING, claim, week, tid, FAILED, IN_FLIGHT,
             int(seen["lease_token"] or 0)])
    if not claimed:
        return Verdict(False, "RESEND_CLAIMED", message=f"another resend of week {week} to "
                       f"{email} claimed it first")
    with pub.mailer.session() as mail:
        outcome = mail.send(outgoing)
    ok = outcome.delivery is Delivery.DELIVERED
    if not ok and outcome.reached:  # a refusal or a lost answer: counted by /metrics
        log_mail(pub, week, f"schedule:{outcome.delivery.value}", outgoing, at)
    status = SENT if ok else IN_FLIGHT if outcome.delivery is Delivery.UNKNOWN else FAILED
    _note(pub, week, tid, status, None if ok else outcome.detail, at if ok else None)
    if ok:
        log_mail(pub, week, "schedule", outgoing, at)
        return Verdict(True, message=f"resent week {week} to {email}")
    return Verdict(False, failed=outcome.detail, message=f"resend to {email}: "
                   f"{outcome.detail}")


def _claim_ttl(pub: Pub) -> timedelta:
    """How long a resend's claim stands: longer than one handover can take (a connect and
    five replies, each up to the SMTP timeout), with room to spare."""
    return timedelta(seconds=max(60.0, 10 * pub.config.mail.smtp_timeout))
