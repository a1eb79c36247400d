"""Asking for cover, taking it, calling it off, and its end when the shift starts.

Each is ONE unit of work: the checks, the move through the cover's own machine
(:data:`.machine.COVERS`, one compare-and-set) and every email it owes
(:func:`pubsched.deliveries.outbox.owe`) commit together or not at all. The emails are sent
afterwards by :func:`.notes.deliver` (a command right after its commit, the web in the
background, the tick for whatever is left), so a crash after the commit loses none and
sends none twice.

* :func:`ask`: only a tender on a shift of a SENT week that has not started; the week is
  held in SENT for the unit (the engine's hold, whatever engine runs), so a request is
  about a roster that is final. The request's number is the next one, allocated under a
  lock (PostgreSQL: a transaction-scoped advisory lock; SQLite: the unit's writer lock),
  so two asks at once get two numbers and people type small ones. The offer is owed to
  every tender :mod:`.eligible` finds, and a note to the operator.
* :func:`take`: holds the week exclusively, as a roster edit does
  (:mod:`pubsched.week.roster`), so two takes of the week run one after the other; then judges
  (the request still open, the shift not started, the taker not the asker and eligible
  now), moves the request OPEN -> TAKEN (the compare-and-set that lets one take win) and
  in the same unit moves the assignment from the asker to the taker, so the roster never
  shows both or neither. The asker, the taker and the operator are owed their emails.
* :func:`cancel`: OPEN -> CANCELLED; the offers not sent yet are dropped when their turn
  comes (the request is no longer open); the asker and the operator are told. The tenders
  already offered it are not written to again: their link says it is no longer needed.
* :func:`expire_due`: the tick's timed edge (``expire`` when ``starts_at`` passes), the
  asker and the operator told, in the same unit.

Bad input (no such week, shift, tender or request) is :class:`~pubsched.verdicts.BadInput`
with nothing written; a refusal is a Verdict whose reason is one of
:data:`pubsched.words.COVER_REFUSALS`, said in the operator's words.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import words
from ..db.instants import instant
from ..deliveries import outbox
from ..engines.choose import chosen
from ..engines.flags import FLAG_CHANGED, FlagChanged
from ..machine import SENT
from ..mail.wording import shift_in_zone
from ..people import sequences
from ..people.tenders import Tender
from ..people.tenders import get as tender_named
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from ..week.runs import Shift, shift_of, week_key
from .eligible import judged, why_not
from .machine import CANCELLED, EXPIRED, OPEN, TAKEN
from .notes import ASKED, OFFER, notice_about
from .notes import CANCELLED as CANCELLED_NOTE
from .notes import EXPIRED as EXPIRED_NOTE
from .notes import TAKEN as TAKEN_NOTE
from .read import Cover, existing

MAX_NOTE = 500
# pg_advisory_xact_lock key of the cover numbers ("pubcovr" in ASCII); only asks take it
ID_LOCK = 0x707562636F7672
# the refusal that says why a request is no longer open, by the state it is in
CLOSED_REASON = {TAKEN: words.COVER_TAKEN, CANCELLED: words.COVER_CANCELLED,
                 EXPIRED: words.COVER_EXPIRED}


class _Undo(Exception):
    """Raised inside a unit to roll back what it did and answer ``verdict`` instead."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


def check_note(note: object) -> str | None:
    """The asker's note, stripped (None when empty), or :class:`BadInput`."""
    if note is None:
        return None
    if not isinstance(note, str):
        raise BadInput(f"a note is text, got {note!r}")
    text = note.strip()
    if len(text) > MAX_NOTE:
        raise BadInput(f"a note is at most {MAX_NOTE} characters, got {len(text)}")
    if any(not (c.isprintable() or c == "\n") for c in text):
        raise BadInput("a note is plain text: no control characters")
    return text or None


def _refused(reason: str, cover_id: int | None = None, **facts: str) -> Verdict:
    detail = {} if cover_id is None else {"cover_id": cover_id}
    return Verdict(False, reason, message=words.cover_refusal(reason, id=cover_id, **facts),
                   detail=detail)


def _next_id(pub: Pub, tx: Any) -> int:
    """The next request number, under the lock that makes it this unit's alone."""
    if pub.dialect == "postgresql":
        tx.execute("SELECT pg_advisory_xact_lock(%s)", [ID_LOCK])
    return int(tx.execute("SELECT COALESCE(MAX(id), 0) + 1 AS next FROM pub_covers")[0]["next"])


def _shift_words(pub: Pub, shift: Shift) -> str:
    return shift_in_zone(shift.label, instant(shift.starts_at), instant(shift.ends_at),
                         pub.config.tz)


def ask(pub: Pub, week: str, shift_id: int, email: str, *, note: str | None = None,
        now: datetime | None = None) -> Verdict:
    """``email`` cannot work shift ``shift_id`` of ``week``: open a request for cover
    (``detail["cover_id"]``, ``detail["offered"]``: the emails it is offered to, in
    order). The emails are owed, not sent: :func:`.notes.deliver` sends them."""
    key = week_key(week)
    if pub.runs.get(key) is None:
        raise BadInput(f"no week {key}")
    shift = shift_of(pub, key, shift_id)
    asker = tender_named(pub, email)
    text = check_note(note)
    at = utc(now)
    said = {"week": words.week_words(key), "who": asker.name,
            "shift": _shift_words(pub, shift)}
    try:
        with chosen(pub) as engine, pub.atomic() as tx:
            held = engine.hold_week(tx, key, (SENT,))
            if held is not None:
                return _refused(words.WEEK_NOT_SENT, None, **said)
            if not tx.execute("SELECT 1 AS yes FROM pub_assignments WHERE shift_id = %s "
                              "AND tender_id = %s", [shift.id, asker.id]):
                return _refused(words.NOT_ON_SHIFT, None, **said)
            if instant(shift.starts_at) <= at:
                return _refused(words.SHIFT_STARTED, None, **said)
            cover_id = _next_id(pub, tx)
            made = pub.covers.create(cover_id, by=pub.actor, columns={
                "week_of": key, "shift_id": shift.id, "asked_by": asker.id, "note": text,
                "starts_at": instant(shift.starts_at), "asked_at": at})
            if not made.applied:  # INVARIANT: one open request per shift and asker
                raise _Undo(_already_asked(pub, tx, shift.id, asker.id, said))
            row = {"week_of": key, "shift_id": shift.id, "asked_by": asker.id}
            offered = [j.tender for j in judged(tx, row) if j.why_not is None]
            about = notice_about(cover_id)
            for tender in offered:
                outbox.owe(pub, OFFER, about, outbox.to_tender(tender.id), week_of=key,
                                now=at)
            outbox.owe(pub, ASKED, about, outbox.OPERATOR, week_of=key, now=at)
    except FlagChanged as changed:
        return Verdict(False, FLAG_CHANGED, message=f"nothing was asked: {changed}")
    except _Undo as undone:
        return undone.verdict
    names = ", ".join(t.name for t in offered)
    reach = (f"offered to {len(offered)} tender{'' if len(offered) == 1 else 's'} ({names})"
             if offered else "nobody can take it right now; it stays open until the shift "
                             "starts")
    return Verdict(True, message=f"Request {cover_id}: {asker.name} asked for cover for "
                                 f"{said['shift']}; {reach}.",
                   detail={"cover_id": cover_id, "offered": [t.email for t in offered]})


def _already_asked(pub: Pub, tx: Any, shift_id: int, asker_id: int,
                   said: dict[str, str]) -> Verdict:
    rows = tx.execute("SELECT id FROM pub_covers WHERE shift_id = %s AND asked_by = %s "
                      "AND state = %s", [shift_id, asker_id, OPEN])
    cover_id = int(rows[0]["id"]) if rows else None
    return _refused(words.ALREADY_ASKED, cover_id, **said)


def _closed(cover: Cover, pub: Pub, state: str, taker: str | None) -> Verdict:
    """The refusal of a request no longer open, said by the state it is in now."""
    return _refused(CLOSED_REASON.get(state, words.COVER_TAKEN), cover.id,
                    shift=cover.when(pub.config.tz), taker=taker or "someone else",
                    asker=cover.asker_name)


def take(pub: Pub, cover_id: int, email: str, *, now: datetime | None = None) -> Verdict:
    """``email`` takes request ``cover_id`` (as their offer's "I'll take it" does): the
    first take wins; the shift moves to them in the same unit of work."""
    cover = existing(pub, cover_id)
    taker = tender_named(pub, email)
    at = utc(now)
    shift = cover.when(pub.config.tz)
    said = {"who": taker.name, "shift": shift}
    try:
        with chosen(pub) as engine, pub.atomic() as tx:
            # exclusive, as a roster edit holds the week: two takes run one after the other
            held = engine.hold_week(tx, cover.week_of, (SENT,), exclusive=True)
            if held is not None:  # pragma: no cover - a sent week stays sent
                return Verdict(False, held.reason, message=held.message)
            now_row = tx.execute("SELECT c.state, t.name FROM pub_covers c LEFT JOIN "
                                 "pub_tenders t ON t.id = c.taken_by WHERE c.id = %s",
                                 [cover.id])[0]
            if now_row["state"] != OPEN:
                return _closed(cover, pub, str(now_row["state"]), now_row["name"])
            if taker.id == cover.asked_by:
                return _refused(words.OWN_REQUEST, cover.id, **said)
            if cover.starts_at <= at:
                return _refused(words.SHIFT_STARTED, cover.id, **said)
            why = why_not(tx, {"week_of": cover.week_of, "shift_id": cover.shift_id,
                               "asked_by": cover.asked_by}, taker.id)
            if why is not None:
                return _refused(words.CANNOT_TAKE, cover.id, why=why, **said)
            moved = pub.covers.transition(
                cover.id, TAKEN, from_=OPEN,
                payload={"taken_by": taker.id, "taken_at": at, "closed_at": at},
                by=pub.actor, data={"taker": taker.email})
            if not moved.applied:  # another take's compare-and-set won
                raise _Undo(_closed(cover, pub, moved.state or TAKEN, None))
            _move_assignment(tx, cover, taker, at)
            # both calendar events change: each email carries its change's SEQUENCE
            changed = (sequences.bump(tx, cover.shift_id, (cover.asked_by, taker.id))
                       if pub.schema.handover else {})
            about = notice_about(cover.id)
            for recipient, tender_id in ((outbox.to_tender(cover.asked_by), cover.asked_by),
                                         (outbox.to_tender(taker.id), taker.id),
                                         (outbox.OPERATOR, None)):
                seq = changed.get(tender_id) if tender_id is not None else None
                outbox.owe(pub, TAKEN_NOTE, about, recipient, week_of=cover.week_of,
                           now=at, facts=None if seq is None else {"sequence": seq})
    except FlagChanged as changed:
        return Verdict(False, FLAG_CHANGED, message=f"nothing was taken: {changed}")
    except _Undo as undone:
        return undone.verdict
    return Verdict(True, message=f"Request {cover.id}: {taker.name} takes {shift} from "
                                 f"{cover.asker_name}; the roster is changed.",
                   detail={"cover_id": cover.id, "taken_by": taker.email,
                           "from": cover.asker_email})


def _move_assignment(tx: Any, cover: Cover, taker: Tender, at: datetime) -> None:
    """The asker's assignment becomes the taker's (its approval stamp kept); an asker no
    longer on the shift undoes the whole take."""
    gone = tx.execute("DELETE FROM pub_assignments WHERE shift_id = %s AND tender_id = %s "
                      "RETURNING approved_at", [cover.shift_id, cover.asked_by])
    if not gone:  # pragma: no cover - a sent roster changes only by takes, held one by one
        raise _Undo(_refused(words.NOT_ON_SHIFT, cover.id, who=cover.asker_name,
                             shift=cover.label))
    tx.execute("INSERT INTO pub_assignments (week_of, shift_id, tender_id, assigned_at, "
               "approved_at) VALUES (%s, %s, %s, %s, %s)",
               [cover.week_of, cover.shift_id, taker.id, at, gone[0]["approved_at"]])


def cancel(pub: Pub, cover_id: int, *, now: datetime | None = None) -> Verdict:
    """Call request ``cover_id`` off (the asker or the operator): the asker stays on the
    shift."""
    cover = existing(pub, cover_id)
    at = utc(now)
    with pub.atomic() as tx:
        moved = pub.covers.transition(cover.id, CANCELLED, from_=OPEN,
                                      payload={"closed_at": at}, by=pub.actor)
        if not moved.applied:
            now_in = tx.execute("SELECT c.state, t.name FROM pub_covers c LEFT JOIN "
                                "pub_tenders t ON t.id = c.taken_by WHERE c.id = %s",
                                [cover.id])[0]
            return _closed(cover, pub, str(now_in["state"]), now_in["name"])
        about = notice_about(cover.id)
        for recipient in (outbox.to_tender(cover.asked_by), outbox.OPERATOR):
            outbox.owe(pub, CANCELLED_NOTE, about, recipient, week_of=cover.week_of,
                            now=at)
    return Verdict(True, message=f"Request {cover.id} is called off: {cover.asker_name} "
                                 f"still works {cover.when(pub.config.tz)}.",
                   detail={"cover_id": cover.id})


def expire_due(pub: Pub, now: datetime) -> list[Verdict]:
    """End every open request whose shift has started (the timed edge ``expire``, through
    the engine's ``fire_due``: of several ticks at once, one moves each request), the
    asker and the operator owed their note in the same unit."""
    at = utc(now)
    with pub.atomic() as tx:
        report = pub.covers.fire_due(now=at, by=pub.actor)
        ended = sorted(int(f.key[0]) for f in report.fired if f.applied)
        for cover_id in ended:
            # the business instant it ended at (fire_due's move writes the state alone)
            row = tx.execute("UPDATE pub_covers SET closed_at = %s WHERE id = %s "
                             "AND state = %s RETURNING week_of, asked_by",
                             [at, cover_id, EXPIRED])[0]
            for recipient in (outbox.to_tender(int(row["asked_by"])), outbox.OPERATOR):
                outbox.owe(pub, EXPIRED_NOTE, notice_about(cover_id), recipient,
                                week_of=str(row["week_of"]), now=at)
    out = []
    for cover_id in ended:
        cover = existing(pub, cover_id)
        out.append(Verdict(True, message=f"tick: request {cover_id} ended, nobody took "
                                         f"{cover.asker_name}'s "
                                         f"{cover.when(pub.config.tz)}",
                           detail={"cover_id": cover_id}))
    out += [Verdict(False, failed=f.error, message=f"tick: request {f.key[0]}: {f.error}")
            for f in report.errors]
    return out


__all__ = ["MAX_NOTE", "ask", "cancel", "check_note", "expire_due", "take"]
