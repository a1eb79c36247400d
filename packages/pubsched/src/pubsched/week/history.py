"""A week's history: its run's moves and the hand edits people made to it, in time order,
each with who did it.

The moves are the run machine's own events (the engine writes one with every transition,
with its ``by``). A hand edit (a pin, a take-off, a shift of the week added or removed, a
tender deactivated off it) moves no state, so it is not a transition: it is a row of
``pub_week_edits`` (migration 0052), written by :func:`record` **in the unit of work of the
edit itself**, so the row commits exactly when the edit does (a refused or rolled-back edit
leaves none) and both engines get it (the legacy engine writes no events).

Why a table and not events of the run machine: an edit is not an edge of the week's
lifecycle (the diagram, the dry run and the buttons would all grow self-loops that mean
nothing to them), the legacy engine writes no events at all, and an event's ``data`` is
the engine's, not words for a person. The table keeps the operator's words (``what``),
the edit's kind, who (``done_by``: ``operator:EMAIL`` from the web, ``cli:USER`` from the
CLI, as the moves' ``by``) and when, by the clock the events use (the database's on
PostgreSQL, the host's on SQLite), so the two merge in the order they happened.

For a caller outside this package (deactivating a tender with ``--cover``): call
:func:`record` with the unit the edit runs in, or :func:`deactivated` for the weeks a
tender leaves.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Any

import rowstate

from .. import context
from ..db.instants import instant
from ..pub import Pub
from .template import migrated

PIN, TAKE_OFF, SHIFT_ADD, SHIFT_REMOVE, DEACTIVATE = (
    "pin", "take_off", "shift_add", "shift_remove", "deactivate")
KINDS = (PIN, TAKE_OFF, SHIFT_ADD, SHIFT_REMOVE, DEACTIVATE)


def record(tx: rowstate.Unit, week: str, kind: str, what: str, *,
           by: str | None = None) -> None:
    """Write one hand edit of ``week`` into its history, in the caller's unit ``tx`` (it
    commits, or not, with the edit). ``kind`` is one of :data:`KINDS`; ``what`` says it in
    the operator's words ("pinned Finn Ryan on Friday night (Fri 11 Dec 18:00)"); ``by``
    defaults to who is acting (:func:`pubsched.context.actor`). A database before 0052
    keeps no record: nothing is written."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of hand edit {kind!r}; one of {', '.join(KINDS)}")
    if not migrated(tx, "0052"):
        return
    who = by if by is not None else context.actor()
    if tx.dialect == "postgresql":  # the clock the run's events read: the server's
        tx.execute("INSERT INTO pub_week_edits (week_of, kind, what, done_by, at) "
                   "VALUES (%s, %s, %s, %s, now())", [week, kind, what, who])
    else:
        tx.execute("INSERT INTO pub_week_edits (week_of, kind, what, done_by, at) "
                   "VALUES (%s, %s, %s, %s, %s)", [week, kind, what, who, datetime.now(UTC)])


def shift_words(label: str, starts_at: Any, tz: tzinfo) -> str:
    """``Friday night (Fri 11 Dec 18:00)``: a shift as a history line names it."""
    start = instant(starts_at).astimezone(tz)
    return f"{label} ({start:%a} {start.day} {start:%b %H:%M})"


def deactivated(tx: rowstate.Unit, tender_id: int, name: str, now: datetime, tz: tzinfo,
                *, by: str | None = None) -> list[str]:
    """Record, in ``tx``, a tender deactivated off each week where they are on a shift
    still to come (ending after ``now``); the weeks, in order."""
    rows = tx.execute(
        "SELECT s.week_of, s.label, s.starts_at FROM pub_assignments a JOIN pub_shifts s "
        "ON s.id = a.shift_id WHERE a.tender_id = %s AND s.ends_at > %s "
        "ORDER BY s.week_of, s.starts_at, s.id", [tender_id, now])
    labels: dict[str, list[str]] = {}
    for r in rows:
        labels.setdefault(str(r["week_of"]), []).append(
            shift_words(str(r["label"]), r["starts_at"], tz))
    for week, on in labels.items():
        record(tx, week, DEACTIVATE,
               f"deactivated {name}, who was on {', '.join(on)}", by=by)
    return list(labels)


def edits(pub: Pub, week: str) -> list[dict[str, Any]]:
    """The hand edits of ``week`` as ``week show --json``'s history rows: ``edge`` is the
    edit's kind, ``from`` and ``to`` are null (no state moved), ``what`` its words."""
    if not pub.schema.week_record:
        return []
    rows = pub.query("SELECT kind, what, done_by, at FROM pub_week_edits WHERE week_of = %s "
                     "ORDER BY at, id", [week])
    return [{"edge": str(r["kind"]), "from": None, "to": None,
             "by": None if r["done_by"] is None else str(r["done_by"]),
             "at": instant(r["at"]), "what": str(r["what"])} for r in rows]


def merged(moves: list[dict[str, Any]], hand: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The moves and the hand edits in one list, in time order (each list keeps its own
    order; at one instant a move comes first). Each row's ``at`` is an instant here."""
    tagged = [(row["at"], 0, n, row) for n, row in enumerate(moves)]
    tagged += [(row["at"], 1, n, row) for n, row in enumerate(hand)]
    return [row for *_, row in sorted(tagged, key=lambda t: (t[0], t[1], t[2]))]


__all__ = ["DEACTIVATE", "KINDS", "PIN", "SHIFT_ADD", "SHIFT_REMOVE", "TAKE_OFF",
           "deactivated", "edits", "merged", "record", "shift_words"]
