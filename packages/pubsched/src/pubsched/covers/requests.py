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
LOCK_ORDER = ("the flag's lock, shared", "the week's row, exclusive", "the request's row")
"""The one order every move of a request takes its locks in (take, cancel, expire; the
ask holds the week shared and creates the row): the week first, then the request. A move
that locked the request first and then reached the week (an email owed names the week,
whose foreign key check locks its row) deadlocked against a take on PostgreSQL."""
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
            opened = open_request(pub, tx, shift, asker.id, text, at)
            if opened is None:  # INVARIANT: one open request per shift and asker
                raise _Undo(_already_asked(pub, tx, shift.id, asker.id, said))
            cover_id, offered = opened
    except FlagChanged as changed:
        return Verdict(False, FLAG_CHANGED, message=f"nothing was asked: {changed}")
    except _Undo as undone:
        return undone.verdict
    return Verdict(True, message=f"Request {cover_id}: {asker.name} asked for cover for "
                                 f"{said['shift']}; {reach(offered)}.",
                   detail={"cover_id": cover_id, "offered": [t.email for t in offered]})


def reach(offered: list[Tender]) -> str:
    """Whom a new request was offered to, in words."""
    if not offered:
        return "nobody can take it right now; it stays open until the shift starts"
    names = ", ".join(t.name for t in offered)
    return f"offered to {len(offered)} tender{'' if len(offered) == 1 else 's'} ({names})"


def open_request(pub: Pub, tx: Any, shift: Shift, asker_id: int, note: str | None,
                 at: datetime, *, why: str | None = None) -> tuple[int, list[Tender]] | None:
    """In the caller's unit (the week held in SENT, the asker on the shift, the shift not
    started: the caller checked), open a request for cover of ``shift`` by ``asker_id``
    and owe its offers and the operator's note: its number and whom it is offered to.
    None when the asker has one open for the shift already (nothing written). ``why``: a
    request the pub opened for the asker says so in its first event (``{"why": ...}``),
    beside who did it (``by``)."""
    cover_id = _next_id(pub, tx)
    made = pub.covers.create(cover_id, by=pub.actor, data=None if why is None else {
        "why": why}, columns={
        "week_of": shift.week_of, "shift_id": shift.id, "asked_by": asker_id, "note": note,
        "starts_at": instant(shift.starts_at), "asked_at": at})
    if not made.applied:
        return None
    row = {"week_of": shift.week_of, "shift_id": shift.id, "asked_by": asker_id}
    offered = [j.tender for j in judged(tx, row) if j.why_not is None]
    about = notice_about(cover_id)
    for tender in offered:
        outbox.owe(pub, OFFER, about, outbox.to_tender(tender.id), week_of=shift.week_of,
                   now=at)
    outbox.owe(pub, ASKED, about, outbox.OPERATOR, week_of=shift.week_of, now=at)
    return cover_id, offered


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
    """The asker's assignment becomes the taker's (its approval stamp kept). An asker no
    longer on the shift left it when they were deactivated (:mod:`.leaving` takes them off
    as it asks for cover on their behalf): the taker fills the place they left, stamped
    with the week's approval."""
    gone = tx.execute("DELETE FROM pub_assignments WHERE shift_id = %s AND tender_id = %s "
                      "RETURNING approved_at", [cover.shift_id, cover.asked_by])
    approved = gone[0]["approved_at"] if gone else tx.execute(
        "SELECT approved_at FROM pub_schedule_runs WHERE week_of = %s",
        [cover.week_of])[0]["approved_at"]
    tx.execute("INSERT INTO pub_assignments (week_of, shift_id, tender_id, assigned_at, "
               "approved_at) VALUES (%s, %s, %s, %s, %s)",
               [cover.week_of, cover.shift_id, taker.id, at, approved])


def cancel(pub: Pub, cover_id: int, *, now: datetime | None = None) -> Verdict:
    """Call request ``cover_id`` off (the asker or the operator): the asker stays on the
    shift. The week is held first, as a take holds it (:data:`LOCK_ORDER`)."""
    cover = existing(pub, cover_id)
    at = utc(now)
    try:
        with chosen(pub) as engine, pub.atomic() as tx:
            held = engine.hold_week(tx, cover.week_of, (SENT,), exclusive=True)
            if held is not None:  # pragma: no cover - a sent week stays sent
                return Verdict(False, held.reason, message=held.message)
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
    except FlagChanged as changed:
        return Verdict(False, FLAG_CHANGED, message=f"nothing was called off: {changed}")
    return Verdict(True, message=f"Request {cover.id} is called off: {stays(cover, pub)}.",
                   detail={"cover_id": cover.id})


def stays(cover: Cover, pub: Pub) -> str:
    """What a called-off request leaves: the asker on the shift, or, when they were taken
    off it as they were deactivated, their place empty."""
    when = cover.when(pub.config.tz)
    if cover.asker_active:
        return f"{cover.asker_name} still works {when}"
    return f"the place {cover.asker_name} left on {when} stays empty"


def expire_due(pub: Pub, now: datetime) -> list[Verdict]:
    """End every open request whose shift has started (the timed edge ``expire``), the
    asker and the operator owed their note in the same unit. One unit per week, which it
    holds first, exclusively, as a take does (:data:`LOCK_ORDER`); then each request of
    that week still open and due moves OPEN -> EXPIRED by the compare-and-set, so of
    several ticks at once one moves each request, and a take of it runs wholly before or
    wholly after."""
    at = utc(now)
    weeks = [str(r["week_of"]) for r in pub.query(
        "SELECT DISTINCT week_of FROM pub_covers WHERE state = %s AND starts_at <= %s "
        "ORDER BY week_of", [OPEN, at])]
    ended: list[int] = []
    out: list[Verdict] = []
    for week in weeks:
        try:
            ended += _expire_week(pub, week, at)
        except FlagChanged as changed:  # the next tick ends them under the new engine
            out.append(Verdict(False, FLAG_CHANGED, message=f"tick: {changed}"))
    for cover_id in ended:
        cover = existing(pub, cover_id)
        out.append(Verdict(True, message=f"tick: request {cover_id} ended, nobody took "
                                         f"{cover.asker_name}'s "
                                         f"{cover.when(pub.config.tz)}",
                           detail={"cover_id": cover_id}))
    return out


def _expire_week(pub: Pub, week: str, at: datetime) -> list[int]:
    """The due requests of ``week`` ended, in one unit that holds the week first."""
    ended = []
    with chosen(pub) as engine, pub.atomic() as tx:
        if engine.hold_week(tx, week, (SENT,), exclusive=True) is not None:
            return []  # pragma: no cover - a week with requests stays sent
        due = tx.execute("SELECT id, asked_by FROM pub_covers WHERE week_of = %s AND "
                         "state = %s AND starts_at <= %s ORDER BY id", [week, OPEN, at])
        for row in due:
            cover_id = int(row["id"])
            moved = pub.covers.transition(cover_id, EXPIRED, from_=OPEN,
                                          payload={"closed_at": at}, by=pub.actor)
            if not moved.applied:  # pragma: no cover - the week is held: nobody else moves it
                continue
            for recipient in (outbox.to_tender(int(row["asked_by"])), outbox.OPERATOR):
                outbox.owe(pub, EXPIRED_NOTE, notice_about(cover_id), recipient,
                           week_of=week, now=at)
            ended.append(cover_id)
    return ended


__all__ = ["LOCK_ORDER", "MAX_NOTE", "ask", "cancel", "check_note", "expire_due",
           "open_request", "reach", "stays", "take"]
