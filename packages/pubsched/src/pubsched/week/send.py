"""Send: the schedule email to every tender with an assignment, never twice to one tender
for one run, even when a send crashes midway and is retried.

The same body serves both engines (the seed: v2's send act is "the same send body the
legacy path uses"); only the fence differs (v2: the send lease's token through
``lease.atomic()``; legacy: the AD-12 send lease). Each recipient's email is mail of the
mail machine (:mod:`pubsched.deliveries`), kind ``schedule``, about the week:

1. owed, for every recipient at once, in a unit fenced by the send lease;
2. claimed (the mail lease) in a fenced unit, committed BEFORE the message is handed over
   (a zombie whose send lease was taken over claims nothing and hands nothing over);
3. handed over once, and finished by its outcome: sent; refused (certainly not delivered:
   connection refused, a 4xx/5xx answer, an address that cannot be written); or of
   unknown fate (the connection lost after the data went out, or a crash after the claim).

A send with any refused recipient fails as a whole: the run stays APPROVED with
``last_error``, and the refused mail waits for the send's retry (no timer of its own). A
retry sends only to recipients never tried or refused; one of unknown fate is shown to the
operator as uncertain and is not re-sent on its own (the explicit :func:`resend` is the
operator's way). A recipient whose email was claimed by a send that died before its handover
is mailed by the send's retry, or, when that retry found the dead claim still live and ended
SENT, by the tick (:func:`deliver_stranded`). The operator is never a recipient of a
tender's message; in rehearsal every message goes to the operator, the intended one in the
subject. Each message carries the tender's own links (their page, their calendar); on a
database at the legacy schema, which has no link versions yet, it goes without them, and the
record is the legacy system's (:mod:`pubsched.deliveries.legacy_record`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import date, datetime
from typing import Any

from .. import machine
from ..deliveries import legacy_record
from ..deliveries.deliver import Sender, claim_owed, sweep_lost
from ..deliveries.machine import REFUSED, SENT
from ..deliveries.outbox import Composer, Mail, NotSentYet, listed, owe, to_tender
from ..mail.compose import Outgoing, Recipient, Roster, ShiftLine, compose_schedule
from ..people import links, sequences
from ..people.tenders import all_tenders
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from .runs import shifts

KIND = "schedule"  # the mail's kind; its ``about`` is the week


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
    """Each recipient's record of the week's send, by tender id: ``email``, ``status``
    (in_flight, sent, failed) and ``error``; a recipient not tried yet has none."""
    if not pub.schema.mail:
        return legacy_record.record(pub, week)
    mails = listed(pub, about=week, kind=KIND, tried=True)
    emails = {t.id: t.email for t in all_tenders(pub)} if mails else {}
    return {m.tender_id: {"email": emails.get(m.tender_id, m.recipient), "status": m.status,
                          "error": m.error} for m in mails if m.tender_id is not None}


def send_body(pub: Pub, week: str, now: datetime,
              open_fenced: Callable[[], AbstractContextManager[Any]],
              token: int | None = None) -> dict[str, Any]:
    """Mail every recipient never tried or refused; returns the counts, the failed and the
    uncertain ones. Raises what a fenced unit raises when the lease was lost (nothing
    handed over). ``token`` is the v2 send lease's, kept for the signature both engines
    call; the fence is ``open_fenced``."""
    roster, own, people = roster_lines(pub, week)

    def compose(tid: int) -> Outgoing | str:
        return _composed(roster, people[tid], own[tid], pub, now)

    if not pub.schema.mail:
        return legacy_record.send(pub, week, now, people, compose, open_fenced)
    with open_fenced():
        for tid in sorted(people):
            owe(pub, KIND, week, to_tender(tid), week_of=week, now=now)
    sweep_lost(pub, [KIND], now, about=week)

    def composer(_pub: Pub, mail: Mail, _at: datetime) -> Outgoing:
        return _ready(compose(int(mail.tender_id or 0)))

    sent, failed, uncertain = 0, [], []
    with Sender(pub) as sender:
        for tid in sorted(people):
            email = str(people[tid]["email"])
            with open_fenced():  # claimed BEFORE the handover, or nothing
                got = claim_owed(pub, (KIND, week, to_tender(tid)))
            if isinstance(got, str):
                if got != SENT:  # of unknown fate, or a sender still at it
                    uncertain.append(email)
                continue
            verdict = sender.send(*got, composer, now, retry=False)
            if verdict.applied:
                sent += 1
            elif verdict.reason == REFUSED:
                failed.append(f"{email}: {verdict.failed}")
            else:
                uncertain.append(email)
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
                                links=tender_links,
                                sequences=sequences.current(pub, int(person["tender_id"])))
    except ValueError as exc:
        return f"cannot be addressed, fix the tender: {exc}"


def _ready(made: Outgoing | str) -> Outgoing:
    """The email to hand over, or :class:`NotSentYet` with why it cannot be built: the
    mail machine keeps a mail its composer could not write owed, with the reason, instead
    of losing it or ending the send."""
    if isinstance(made, str):
        raise NotSentYet(made)
    return made


def compose_again(pub: Pub, mail: Mail, at: datetime) -> Outgoing | None:
    """A tender's schedule email written again from the roster now (the operator's resend
    of one of unknown fate, :mod:`pubsched.deliveries.resend`): None when they are no
    longer on that week's roster."""
    week = mail.about
    roster, own, people = roster_lines(pub, week)
    if mail.tender_id not in people:
        return None
    return _ready(_composed(roster, people[mail.tender_id], own[mail.tender_id], pub, at))


COMPOSERS: dict[str, Composer] = {
    KIND: compose_again}


def deliver_stranded(pub: Pub, now: datetime) -> list[Verdict]:
    """The tick's part of the schedule: a send killed after claiming a recipient's email
    (and before its handover) whose retry came while that dead claim was still live
    counted it uncertain and ended SENT, so no send will mail it. Once the claim is past
    (:func:`pubsched.deliveries.deliver.sweep_lost`: of unknown fate when its handover had
    begun, else owed again), an owed schedule email of a SENT week is sent here, once (the
    claim), written from the roster now; a week not sent yet leaves it to its send."""
    if not pub.schema.mail:
        return []
    at = utc(now)
    out = sweep_lost(pub, [KIND], at)
    rows = pub.query("SELECT m.about, m.recipient FROM pub_mail m JOIN pub_schedule_runs r "
                     "ON r.week_of = m.about WHERE m.kind = %s AND m.state = 'OWED' "
                     "AND m.acting_at IS NULL AND r.status = 'sent' ORDER BY m.id",
                     [KIND])
    with Sender(pub) as sender:
        for r in rows:
            got = claim_owed(pub, (KIND, str(r["about"]), str(r["recipient"])))
            if not isinstance(got, str):
                out.append(sender.send(*got, compose_again, at, retry=False))
    return out


def failure_text(result: dict[str, Any]) -> str:
    """The send's failure in one line (the CLI's stderr, the run's ``last_error``): how many
    failed, the first few of them, and where each one's reason is (``week show``)."""
    failed = [entry.partition(": ")[0] for entry in result["failed"]]
    named = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    week = result.get("week_of")
    where = f"`pubsched week show {week}`" if week else "`pubsched week show`"
    return f"{len(failed)} recipient(s) failed ({named}); each one's reason: {where}"


def resend(pub: Pub, week: str, email: str, *, state_of: Callable[[dict[str, Any]], str],
           now: datetime | None = None) -> Verdict:
    """The operator's explicit resend of one recipient left uncertain or refused, after
    the run was sent: a conscious choice to risk a duplicate, and never two.

    ``state_of`` is the engine's reading of the run (the week must be SENT: before that the
    send itself mails everyone). The recipient's mail is claimed through the mail machine's
    lease, so of two resends at once one claims and the other is refused
    (``RESEND_CLAIMED``), and so is one while a send of it is under way; a resend that
    crashed holding its claim is taken over once its lease has expired."""
    at = utc(now)
    row = pub.runs.get(week)
    if row is None:
        raise BadInput(f"no week {week}")
    state = state_of(row)
    if state != machine.SENT:
        return Verdict(False, "STATE_MISMATCH", message=f"resend is for a sent week: week "
                       f"{week} is {state}; its send mails {email}")
    if not pub.schema.mail:
        return Verdict(False, "NOTHING_TO_RESEND", message="this database is at the legacy "
                       "schema: run `pubsched init` to apply its migrations, then resend")
    roster, own, people = roster_lines(pub, week)
    match = [tid for tid, p in people.items() if str(p["email"]).lower() == email.lower()]
    if not match:
        raise BadInput(f"{email} has no assignment in week {week}")
    tid = match[0]
    seen = deliveries(pub, week).get(tid)
    if seen is None:
        return Verdict(False, "NOTHING_TO_RESEND", message=f"{email} was never part of the "
                       f"send of week {week}: nothing is uncertain or failed")
    if seen["status"] == "sent":
        return Verdict(False, "ALREADY_SENT", message=f"{email} was already sent week {week}")
    got = claim_owed(pub, (KIND, week, to_tender(tid)), resend=True)
    if isinstance(got, str):
        if got == SENT:
            return Verdict(False, "ALREADY_SENT", message=f"{email} was already sent week "
                           f"{week}")
        return Verdict(False, "RESEND_CLAIMED", message=f"a resend of week {week} to "
                       f"{email} is under way")

    def composer(_pub: Pub, _mail: Mail, _at: datetime) -> Outgoing:
        return _ready(_composed(roster, people[tid], own[tid], pub, at))

    with Sender(pub) as sender:
        verdict = sender.send(*got, composer, at, retry=False)
    if verdict.applied:
        return Verdict(True, message=f"resent week {week} to {email}")
    why = verdict.failed or verdict.reason or "not sent"
    return Verdict(False, failed=why, message=f"resend to {email}: {why}")
