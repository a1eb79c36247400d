"""What a week looks like to its operator: ``week show --json``, the admin page, the tests.

One function builds it for both engines. With the flag off the state is the legacy
engine's inferred one (read from which timestamps are NULL), with ``legacy_status`` beside
it; with the flag on it is the v2 state (``v2_state``, or the state derived from the
legacy status while the column is still NULL).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from .app import BadInput, Pub
from .flags import v2_enabled
from .generate import assignments
from .machine import APPROVED, ASSIGNED, CLOSED, COLLECTING, DRAFT, RUN, SENT
from .send import deliveries
from .shiftcal import feed_calendar
from .submissions import of_week
from .tenders import Tender
from .weeks import settings_override, shifts, times_of, week_key


def inferred_state(row: dict[str, Any]) -> str:
    """The legacy engine's implicit state: which of the week's timestamps are set."""
    if row.get("status") == "sent" or row.get("sent_at") is not None:
        return SENT
    if row.get("status") == "approved":
        return APPROVED
    if row.get("generated_at") is not None:
        return ASSIGNED
    if row.get("closed_at") is not None:
        return CLOSED
    if row.get("opened_at") is not None:
        return COLLECTING
    return DRAFT


def iso(value: Any) -> str | None:
    """One spelling of an instant on both databases (SQLite hands back its stored text,
    PostgreSQL a datetime): UTC with ``Z``, to the second, or the millisecond when the
    instant has a fraction, so that ``--json`` output is the same whichever stores it."""
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            return str(value)
    moment = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    spec = "seconds" if moment.microsecond == 0 else "milliseconds"
    return moment.isoformat(timespec=spec).replace("+00:00", "Z")


def state_of(pub: Pub, row: dict[str, Any], v2: bool | None = None) -> str:
    if v2 if v2 is not None else v2_enabled(pub):
        return pub.runs.core.state_of(row) or DRAFT
    return inferred_state(row)


def _times(pub: Pub, row: dict[str, Any], v2: bool) -> dict[str, Any]:
    """The week's moments as the engine in charge judges them: v2 reads its columns (an
    extension moves ``deadline_at``); the legacy engine computes them from the settings
    and the week's ``settings_override`` (where its extensions are written)."""
    if v2:
        parse = pub.runs.core.d.parse_time
        return {name: parse(row.get(name)) for name in
                ("opens_at", "deadline_at", "generate_at", "send_window_at")}
    times = times_of(pub, str(row["week_of"]), settings_override(row))
    return {"opens_at": times.opens_at, "deadline_at": times.deadline_at,
            "generate_at": times.generate_at, "send_window_at": times.send_window_end}


def week_show(pub: Pub, week: str) -> dict[str, Any]:
    """The documented, stable JSON of one week (see docs/cli.md)."""
    key = week_key(week)
    row = pub.runs.get(key)
    if row is None:
        raise BadInput(f"no week {key}")
    v2 = v2_enabled(pub)
    assigned = assignments(pub, key)
    week_shifts = shifts(pub, key)
    delivered = deliveries(pub, key)
    times = _times(pub, row, v2)
    history = [{"edge": e.edge or "create", "from": e.from_state, "to": e.to_state,
                "by": e.owner, "at": iso(e.at)} for e in pub.runs.history(key)]
    return {
        "week_of": key,
        "state": state_of(pub, row, v2),
        "engine": "v2" if v2 else "legacy",
        "legacy_status": row.get("status"),
        "v2_state": row.get("v2_state"),
        "opens_at": iso(times["opens_at"]),
        "deadline_at": iso(times["deadline_at"]),
        "generate_at": iso(times["generate_at"]),
        "send_window_at": iso(times["send_window_at"]),
        "autopilot": bool(row.get("autopilot")),
        "lease": None if row.get("acting_at") is None else {
            "kind": row.get("acting_kind"), "since": iso(row.get("acting_at"))},
        "shifts": [{"id": s.id, "label": s.label, "starts_at": iso(s.starts_at),
                    "ends_at": iso(s.ends_at), "slots": s.slots,
                    "assigned": assigned.get(s.id, [])} for s in week_shifts],
        "unfilled": sum(max(0, s.slots - len(assigned.get(s.id, []))) for s in week_shifts)
        if assigned or state_of(pub, row, v2) in (ASSIGNED, APPROVED, SENT) else 0,
        "submissions": [{"email": s["email"], "shift_ids": s["shift_ids"], "max": s["max"]}
                        for s in of_week(pub, key)],
        "last_error": row.get("last_error"),
        "deliveries": [{"email": d["email"], "status": d["status"], "error": d["error"]}
                       for _, d in sorted(delivered.items(), key=lambda kv: kv[1]["email"])],
        "history": history,
    }


def legal_edges(pub: Pub, week: str) -> list[str]:
    """The edges an operator may take from here, in the machine's order: what the admin
    draws a button for. With v2, the engine's enabled edges (state, lease, invariants: one
    read); with the legacy engine, which has no such check, the machine's edges out of the
    inferred state (the legacy action itself still refuses what its rules refuse)."""
    key = week_key(week)
    if v2_enabled(pub):
        return [e.edge for e in pub.runs.enabled_edges(key) if e.allowed]
    row = pub.runs.get(key)
    if row is None:
        return []
    state = inferred_state(row)
    return [e.name for e in RUN.edges if e.src == state]


def weeks_list(pub: Pub) -> list[dict[str, Any]]:
    v2 = v2_enabled(pub)
    rows = pub.runs.find(order_by="week_of", limit=10_000)
    return [{"week_of": r["week_of"], "state": state_of(pub, r, v2),
             "legacy_status": r.get("status"), "autopilot": bool(r.get("autopilot")),
             "deadline_at": iso(_times(pub, r, v2)["deadline_at"])} for r in rows]


def tender_form(pub: Pub, tender: Tender) -> dict[str, Any]:
    """What a tender's personal page shows: the open week (its shifts, what this tender
    submitted), else the latest week past its form and not yet sent (closed, the schedule
    expected by the end of its send window), else nothing to fill in.

    ``status`` is ``open``, ``closed`` or ``none``; one global survey, so at most one week
    is open (H3 with v2; the legacy rule otherwise)."""
    v2 = v2_enabled(pub)
    rows = pub.runs.find(order_by="week_of", limit=10_000)
    states = [(r, state_of(pub, r, v2)) for r in rows]
    shown = next((r for r, s in states if s == COLLECTING), None)
    status = "open"
    if shown is None:
        status = "closed"
        shown = next((r for r, s in reversed(states) if s in (CLOSED, ASSIGNED, APPROVED)),
                     None)
    if shown is None:
        return {"status": "none", "tender": tender.as_json()}
    key = str(shown["week_of"])
    mine = next((s for s in of_week(pub, key) if s["email"] == tender.email), None)
    times = _times(pub, shown, v2)
    return {
        "status": status,
        "tender": tender.as_json(),
        "week_of": key,
        "deadline_at": times["deadline_at"],
        "schedule_by": times["send_window_at"],
        "shifts": [{"id": s.id, "label": s.label, "night": s.night, "starts_at": s.starts_at,
                    "ends_at": s.ends_at} for s in shifts(pub, key)],
        "submitted": None if mine is None else {
            "shift_ids": mine["shift_ids"], "max": mine["max"], "at": mine["updated_at"]},
    }


def tender_calendar(pub: Pub, tender: Tender) -> bytes:
    """The tender's feed: their assigned shifts in every sent week (a week is final once
    sent; before that a regenerate may still move them). DTSTAMP is the week's send time,
    so the feed's bytes change only when a new week is sent."""
    rows = pub.query(
        "SELECT r.week_of, r.sent_at, s.id, s.label, s.starts_at, s.ends_at "
        "FROM pub_assignments a JOIN pub_shifts s ON s.id = a.shift_id "
        "JOIN pub_schedule_runs r ON r.week_of = a.week_of "
        "WHERE a.tender_id = %s AND r.status = 'sent' ORDER BY s.starts_at, s.id",
        [tender.id])
    sent = [r["sent_at"] for r in rows if isinstance(r["sent_at"], datetime)]
    stamp = max(sent) if sent else datetime(2000, 1, 1, tzinfo=UTC)
    return feed_calendar(
        tender.email,
        ((date.fromisoformat(str(r["week_of"])), int(r["id"]), f"Pub shift: {r['label']}",
          r["starts_at"], r["ends_at"]) for r in rows),
        stamp=stamp)
