"""What a week looks like to its operator: ``week show --json``, the admin page, the tests.

One function builds it for both engines: the engine in charge
(:func:`pubsched.engines.choose.engine_for`, the flag read once per view) says the state
and the times. With the flag off the state is the legacy engine's inferred one (read from
which timestamps are NULL), with ``legacy_status`` beside it; with the flag on it is the
v2 state (``v2_state``, or the state derived from the legacy status while the column is
still NULL).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from .. import covers
from ..db.instants import instant
from ..engines.base import Engine
from ..engines.choose import engine_for
from ..machine import APPROVED, ASSIGNED, CLOSED, COLLECTING, SENT
from ..mail.compose import organizer
from ..mail.wording import calendar_summary, days, zone_words
from ..people import sequences, usual
from ..people.away import as_json as away_json
from ..people.away import upcoming as away_upcoming
from ..people.calendar import feed_calendar
from ..people.tender_page import form_shifts, upcoming
from ..people.tenders import Tender, all_tenders
from ..people.time_off import away_on
from ..pub import Pub, utc
from ..verdicts import BadInput
from .generate import assignments, missing, pinned
from .history import edits, merged
from .runs import Shift, shifts, week_key
from .send import deliveries
from .shifts import removed_for
from .submissions import of_week


def iso(value: Any) -> str | None:
    """One spelling of an instant on both databases (SQLite hands back its stored text,
    PostgreSQL a datetime): UTC with ``Z``, to the second, or the millisecond when the
    instant has a fraction, so that ``--json`` output is the same whichever stores it."""
    if value is None:
        return None
    try:
        moment = instant(value)
    except ValueError:
        return str(value)
    spec = "seconds" if moment.microsecond == 0 else "milliseconds"
    return moment.isoformat(timespec=spec).replace("+00:00", "Z")


def when(pub: Pub, shift: Shift) -> str:
    """``Thu 10 Dec 18:00-02:00``: a shift's time in the pub's zone (its label is its name,
    such as "Thursday night", since the template has labels)."""
    start = instant(shift.starts_at).astimezone(pub.config.tz)
    end = instant(shift.ends_at).astimezone(pub.config.tz)
    return f"{start:%a} {start.day} {start:%b %H:%M}-{end:%H:%M}"


def moved_by(event: Any) -> str | None:
    """Who made a move: its event's ``by`` (``operator:EMAIL``, ``cli:USER``, ``tick``);
    for an event written before events had their own ``by`` (migration 0048), the ``by``
    its data recorded; else its owner, else None: unknown (a week's birth, the legacy
    engine, which writes no events)."""
    if event.by is not None:
        return str(event.by)
    data = event.data
    if isinstance(data, dict) and isinstance(data.get("by"), str):
        return str(data["by"])
    return None if event.owner is None else str(event.owner)


def state_of(pub: Pub, row: dict[str, Any], engine: Engine | None = None) -> str:
    """The week's state as the engine in charge (or ``engine``) reads its run row."""
    return (engine or engine_for(pub)).state_of(pub, row)


def week_show(pub: Pub, week: str) -> dict[str, Any]:
    """The documented, stable JSON of one week (see docs/cli.md), read in one snapshot."""
    with pub.reading():
        return _week_show(pub, week)


def _week_show(pub: Pub, week: str) -> dict[str, Any]:
    key = week_key(week)
    row = pub.runs.get(key)
    if row is None:
        raise BadInput(f"no week {key}")
    engine = engine_for(pub)
    assigned = assignments(pub, key)
    pins, unmet = pinned(pub, key), missing(pub, key)  # the roster by hand, the skills
    taken_off = pinned(pub, key, "exclude")
    week_shifts = shifts(pub, key)
    delivered = deliveries(pub, key)
    times = engine.times(pub, row)
    state = engine.state_of(pub, row)
    rostered = bool(assigned) or state in (ASSIGNED, APPROVED, SENT)
    crew = all_tenders(pub)
    names = {t.email: t.name for t in crew}
    submitted = of_week(pub, key)
    asked = covers.listed(pub, key) if pub.schema.covers else []
    away = away_on(pub, [date.fromisoformat(s.night) for s in week_shifts])
    emails = {t.id: t.email for t in crew}
    moves = [{"edge": e.edge or "create", "from": e.from_state, "to": e.to_state,
              "by": moved_by(e), "at": instant(e.at), "what": None}
             for e in pub.runs.history(key)]
    # the run's moves and the hand edits (pins, take-offs, its own shifts, a tender
    # deactivated off it: week.history), in time order
    history = [{**h, "at": iso(h["at"])} for h in merged(moves, edits(pub, key))]
    return {
        "week_of": key,
        "state": state,
        "engine": engine.name,
        "legacy_status": row.get("status"),
        "v2_state": row.get("v2_state"),
        "opens_at": iso(times["opens_at"]),
        "deadline_at": iso(times["deadline_at"]),
        "generate_at": iso(times["generate_at"]),
        "send_window_at": iso(times["send_window_at"]),
        "autopilot": bool(row.get("autopilot")),
        "lease": None if row.get("acting_at") is None else {
            "kind": row.get("acting_kind"), "since": iso(row.get("acting_at"))},
        "shifts": [{"id": s.id, "label": s.label, "when": when(pub, s),
                    "starts_at": iso(s.starts_at), "ends_at": iso(s.ends_at),
                    "slots": s.slots, "needs": list(s.needs),
                    "assigned": assigned.get(s.id, []),
                    "pinned": pins.get(s.id, []), "excluded": taken_off.get(s.id, []),
                    "missing": unmet.get(s.id, []),
                    # what the pub's clocks did to its times (a start in the spring-forward
                    # gap, a time that happens twice): None when nothing
                    "clock_note": s.clock_note or None,
                    # who is away that night (their time off): never picked for it; one
                    # also in "assigned" was put there before the time off was marked
                    "away": sorted(emails[t] for t in away.get(date.fromisoformat(s.night),
                                                               frozenset()) if t in emails)}
                   for s in week_shifts],
        "rostered": rostered,
        "unfilled": sum(max(0, s.slots - len(assigned.get(s.id, []))) for s in week_shifts)
        if rostered else 0,
        "submissions": [{"email": s["email"], "shift_ids": s["shift_ids"], "max": s["max"],
                         "source": s["source"]} for s in submitted],
        "names": {email: names.get(email, email) for email in sorted(
            {s["email"] for s in submitted} | {e for a in assigned.values() for e in a}
            | {e for c in asked for e in (c.asker_email, c.taker_email) if e})},
        "last_error": row.get("last_error"),
        "deliveries": [{"email": d["email"], "status": d["status"], "error": d["error"]}
                       for _, d in sorted(delivered.items(), key=lambda kv: kv[1]["email"])],
        "history": history,
        # the requests for cover of a sent week; shifts[].assigned is the roster after them
        "covers": [{"id": c.id, "shift_id": c.shift_id, "from": c.asker_email,
                    "state": c.state, "taken_by": c.taker_email}
                   for c in asked],
    }


def legal_edges(pub: Pub, week: str) -> list[str]:
    """The edges an operator may take from here, in the machine's order: what the admin
    draws a button for (:meth:`pubsched.engines.base.Engine.enabled_edges`)."""
    return engine_for(pub).enabled_edges(pub, week_key(week))


def weeks_list(pub: Pub) -> list[dict[str, Any]]:
    engine = engine_for(pub)
    rows = pub.runs.find(order_by="week_of", limit=10_000)
    return [{"week_of": r["week_of"], "state": engine.state_of(pub, r),
             "legacy_status": r.get("status"), "autopilot": bool(r.get("autopilot")),
             "deadline_at": iso(engine.times(pub, r)["deadline_at"])} for r in rows]


def tender_form(pub: Pub, tender: Tender, now: datetime | None = None) -> dict[str, Any]:
    """What a tender's personal page shows (:func:`_tender_form`), read in one snapshot."""
    with pub.reading():
        return _tender_form(pub, tender, now)


def _tender_form(pub: Pub, tender: Tender, now: datetime | None = None) -> dict[str, Any]:
    """What a tender's personal page shows: their shifts still to come (``upcoming``, from
    sent weeks: :mod:`pubsched.people.tender_page`), then the open week (its shifts as offered to
    this tender at ``now``, what they submitted), else the latest week past its form and
    not yet sent (closed, the schedule expected by the end of its send window), else
    nothing to fill in.

    ``status`` is ``open``, ``closed`` or ``none``; one global survey, so at most one week
    is open (H3 with v2; the legacy rule otherwise)."""
    at = utc(now)
    mine_to_come = upcoming(pub, tender, at)
    away = time_off_shown(pub, tender, at)
    engine = engine_for(pub)
    rows = pub.runs.find(order_by="week_of", limit=10_000)
    states = [(r, engine.state_of(pub, r)) for r in rows]
    shown = next((r for r, s in states if s == COLLECTING), None)
    status = "open"
    if shown is None:
        status = "closed"
        shown = next((r for r, s in reversed(states) if s in (CLOSED, ASSIGNED, APPROVED)),
                     None)
    if shown is None:
        return {"status": "none", "tender": tender.as_json(), "upcoming": mine_to_come,
                "zone": zone_words(pub.config.tz, [at]), "time_off": away}
    key = str(shown["week_of"])
    mine = next(iter(of_week(pub, key, tender.id)), None)
    times = engine.times(pub, shown)
    offered = form_shifts(pub, tender, key, at)
    return {
        "status": status,
        "tender": tender.as_json(),
        "week_of": key,
        "deadline_at": times["deadline_at"],
        "schedule_by": times["send_window_at"],
        "shifts": offered,
        "upcoming": mine_to_come,
        "zone": zone_words(pub.config.tz, [s.starts_at for s in shifts(pub, key)] or [at]),
        "submitted": None if mine is None else {
            "shift_ids": mine["shift_ids"], "max": mine["max"], "at": mine["updated_at"],
            "source": mine["source"]},
        # no answer yet: the form starts from their usual (pubsched.people.usual), unsaved
        "prefill": None if mine is not None else usual_prefill(pub, tender, offered),
        "time_off": away,
        # the nights the operator closed that this tender had ticked (their form says so)
        "removed": removed_for(pub, key, tender.id),
    }


def time_off_shown(pub: Pub, tender: Tender, now: datetime) -> list[dict[str, str]]:
    """The tender's time off to come as the pages list it: ``from``, ``to`` (ISO) and
    ``words`` (``Fri 18 Dec - Sat 19 Dec 2026``)."""
    return [{**away_json(s), "words": days(s.starts_on, s.ends_on)}
            for s in away_upcoming(pub, tender.id, now)]


def usual_prefill(pub: Pub, tender: Tender, offered: list[dict[str, Any]]
                  ) -> dict[str, Any] | None:
    """The form's starting answer from the tender's usual: the shifts of the week it names
    that the form offers them, and its maximum; None without a usual."""
    theirs = usual.of(pub, tender.id)
    if theirs is None:
        return None
    open_ones = [(int(s["id"]), s["starts_at"]) for s in offered if s["tickable"]]
    return {"shift_ids": usual.matching(theirs, open_ones, pub.config.tz),
            "max": theirs.max_shifts}


def tender_calendar(pub: Pub, tender: Tender) -> bytes:
    """The tender's feed: their assigned shifts in every sent week (a week is final once
    sent; before that a regenerate may still move them), as the roster is now: a cover
    taken from them is gone, one they took is there. DTSTAMP is the latest send or cover
    taken that concerns them, so the feed's bytes change only when their shifts do."""
    rows = pub.query(
        "SELECT r.week_of, r.sent_at, s.id, s.label, s.starts_at, s.ends_at "
        "FROM pub_assignments a JOIN pub_shifts s ON s.id = a.shift_id "
        "JOIN pub_schedule_runs r ON r.week_of = a.week_of "
        "WHERE a.tender_id = %s AND r.status = 'sent' ORDER BY s.starts_at, s.id",
        [tender.id])
    moved = pub.query("SELECT taken_at FROM pub_covers WHERE state = 'TAKEN' "
                      "AND (asked_by = %s OR taken_by = %s)", [tender.id, tender.id]
                      ) if pub.schema.covers else []
    changed = [r["sent_at"] for r in rows] + [r["taken_at"] for r in moved]
    stamps = [instant(at) for at in changed if at is not None]
    stamp = max(stamps) if stamps else datetime(2000, 1, 1, tzinfo=UTC)
    mail = pub.config.mail
    return feed_calendar(
        tender.email,
        ((date.fromisoformat(str(r["week_of"])), int(r["id"]),
          calendar_summary(mail.pub_name, str(r["label"]), r["starts_at"],
                           r["ends_at"], pub.config.tz),
          r["starts_at"], r["ends_at"]) for r in rows),
        stamp=stamp, organizer=organizer(mail), location=mail.pub_address,
        sequences=sequences.current(pub, tender.id))
