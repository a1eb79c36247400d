"""A week's own shifts: a one-off shift added to one week (an event night), or one of its
shifts removed (a closed night), before its roster is made.

Why held, and in one unit: the roster is made from the week's shifts, so an edit must land
wholly before a generate or not at all. Each edit is one unit of work that first holds the
week in DRAFT, COLLECTING or CLOSED through the engine in charge
(:meth:`pubsched.engines.base.Engine.hold_week`, the engine chosen and fenced by the flag:
:func:`pubsched.engines.choose.chosen`): a generate racing it waits for the unit or wins
and the edit is refused (STATE_MISMATCH, exit 3: reopen the week first). COLLECTING after a
reopen counts as before the roster: the assignments a reopen kept for the removed shift go
with it (the week must be generated again before it can be approved).

A removal drops the availability tenders ticked for the shift in the same unit and records
what was removed (``pub_removed_shifts``, migration 0042) with whom it concerned, so their
form can tell them (:func:`removed_for`). The template is untouched: these are this week's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

from ..db.instants import instant
from ..engines.choose import chosen
from ..engines.flags import FLAG_CHANGED, FlagChanged
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from . import history
from .runs import week_key
from .template import check_label, check_needs, check_slots, check_time, migrated, span
from .time import parse_hh_mm, place_shift

BEFORE_ROSTER = ("DRAFT", "COLLECTING", "CLOSED")


def _night(raw: object, key: str) -> date:
    """The local date the shift starts on, which must be in the week (Monday to Sunday)."""
    try:
        night = date.fromisoformat(raw) if isinstance(raw, str) and len(raw) == 10 else None
    except ValueError:
        night = None
    if night is None:
        raise BadInput(f"the date is YYYY-MM-DD, got {raw!r}")
    monday = date.fromisoformat(key)
    if not monday <= night <= monday + timedelta(days=6):
        raise BadInput(f"{night.isoformat()} is not in the week of {key} "
                       f"({_day(monday)} to {_day(monday + timedelta(days=6))} {monday:%Y})")
    return night


def _day(day: date) -> str:
    """``Tue 8 Dec``: a day as the pages write it (no leading zero)."""
    return f"{day:%a} {day.day} {day:%b}"


def _refused(refused: Verdict, key: str, what: str) -> Verdict:
    state = refused.detail.get("state")
    if refused.reason == "LEASE_HELD":  # a close or a generate is running on the week now
        why = (f"the week of {key} is busy (its form closing or its roster being made "
               "right now); look again in a moment")
    else:
        why = (f"the week of {key} is {state or 'busy'}; its shifts change only before the "
               f"roster is made (reopen it first: `pubsched week reopen {key}`)")
    return Verdict(False, refused.reason, message=f"{what} refused: {why}",
                   detail=dict(refused.detail))


def add_shift(pub: Pub, week: str, label: str, night: str, start: str, end: str, *,
              slots: int = 2, needs: Sequence[str] = (), now: datetime | None = None
              ) -> Verdict:
    """``pubsched week shift add``: a one-off shift in this week only."""
    key = week_key(week)
    name, day = check_label(label), _night(night, key)
    begins, finishes = check_time(start, "start"), check_time(end, "end")
    count, skills = check_slots(slots), check_needs(needs)
    utc(now)  # checked like every action's instant; an added shift is timeless
    placed = place_shift(day, parse_hh_mm(begins), parse_hh_mm(finishes), pub.config.tz)
    starts_at, ends_at = placed.starts_at, placed.ends_at
    what = f"adding {name} to the week of {key}"
    try:
        with chosen(pub) as engine, pub.atomic() as tx:
            refused = engine.hold_week(tx, key, BEFORE_ROSTER)
            if refused is not None:
                return _refused(refused, key, what)
            twin = tx.execute("SELECT id, label FROM pub_shifts WHERE week_of = %s AND "
                              "starts_at = %s", [key, starts_at])
            if twin:
                raise BadInput(f"the week of {key} has a shift starting {_day(day)} at "
                               f"{begins} already: {twin[0]['label']}")
            noted = migrated(tx, "0052")
            rows = tx.execute(
                "INSERT INTO pub_shifts (week_of, night, label, starts_at, ends_at, slots, "
                f"needs{', clock_note' if noted else ''}) VALUES (%s, %s, %s, %s, %s, %s, "
                f"%s{', %s' if noted else ''}) RETURNING id",
                [key, day.isoformat(), name, starts_at, ends_at, count,
                 json.dumps(list(skills)), *([placed.note or None] if noted else [])])
            history.record(tx, key, history.SHIFT_ADD, (
                f"added a one-off shift: {name} ({_day(day)} {span(begins, finishes)}, "
                f"{count} slot{'s' if count != 1 else ''})"))
    except FlagChanged as changed:
        return Verdict(False, FLAG_CHANGED, message=f"{what} refused: {changed}")
    shift_id = int(rows[0]["id"])
    return Verdict(True, message=(
        f"added {name} ({_day(day)} {span(begins, finishes)}, {count} "
        f"slot{'s' if count != 1 else ''}) to the week of {key} only"
        + (f"\nNote: {placed.note}" if placed.note else "")),
        detail={"week_of": key, "id": shift_id, "notes": [placed.note] if placed.note else []})


def remove_shift(pub: Pub, week: str, shift_id: int, *, now: datetime | None = None
                 ) -> Verdict:
    """``pubsched week shift remove``: a closed night. The ticks for it are dropped (and
    recorded, so the tenders' forms say so); their other answers are kept."""
    key = week_key(week)
    at = utc(now)
    tz = pub.config.tz
    what = f"removing shift {shift_id} from the week of {key}"
    try:
        with chosen(pub) as engine, pub.atomic() as tx:
            refused = engine.hold_week(tx, key, BEFORE_ROSTER)
            if refused is not None:
                return _refused(refused, key, what)
            found = tx.execute("SELECT id, label, starts_at, ends_at FROM pub_shifts "
                               "WHERE id = %s AND week_of = %s", [shift_id, key])
            if not found:
                raise BadInput(f"no shift {shift_id} in the week of {key} "
                               f"(see `pubsched week show {key}`)")
            shift = found[0]
            ticked = sorted({int(r["tender_id"]) for r in tx.execute(
                "SELECT tender_id FROM pub_availability_shifts WHERE shift_id = %s",
                [shift_id])})
            tx.execute("DELETE FROM pub_availability_shifts WHERE shift_id = %s", [shift_id])
            tx.execute("DELETE FROM pub_assignments WHERE shift_id = %s", [shift_id])
            tx.execute("DELETE FROM pub_shifts WHERE id = %s", [shift_id])
            tx.execute("INSERT INTO pub_removed_shifts (week_of, shift_id, label, starts_at, "
                       "ends_at, tenders, removed_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                       [key, shift_id, shift["label"], instant(shift["starts_at"]),
                        instant(shift["ends_at"]), json.dumps(ticked), at])
            history.record(tx, key, history.SHIFT_REMOVE, (
                f"removed {history.shift_words(str(shift['label']), shift['starts_at'], tz)} "
                f"from this week" + (f": {len(ticked)} tender(s) had ticked it, their form "
                                     "says so" if ticked else "")))
    except FlagChanged as changed:
        return Verdict(False, FLAG_CHANGED, message=f"{what} refused: {changed}")
    starts = instant(shift["starts_at"]).astimezone(pub.config.tz)
    told = (f"{len(ticked)} tender(s) had ticked it: their other answers are kept and "
            "their form says so" if ticked else "no tender had ticked it")
    return Verdict(True, message=(
        f"removed {shift['label']} ({_day(starts.date())} {starts:%H:%M}) "
        f"from the week of {key}: {told}"),
        detail={"week_of": key, "id": shift_id, "tenders": ticked})


def removed_for(pub: Pub, week: str, tender_id: int) -> list[dict[str, Any]]:
    """The shifts removed from ``week`` that this tender had ticked, oldest removal first:
    what their form tells them."""
    with pub.atomic() as tx:
        if not migrated(tx, "0042"):  # the legacy schema: nothing was ever removed
            return []
        rows = tx.execute("SELECT label, starts_at, tenders FROM pub_removed_shifts "
                          "WHERE week_of = %s ORDER BY id", [week])
    return [{"label": str(r["label"]), "starts_at": instant(r["starts_at"])}
            for r in rows if tender_id in json.loads(str(r["tenders"]))]
