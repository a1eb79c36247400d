"""The roster by hand: the operator pins a tender on a shift, or takes one off.

Only while the roster is generated and not yet approved (ASSIGNED): each edit is ONE unit
of work that first holds the week there through the engine in charge
(:meth:`pubsched.engines.base.Engine.hold_week`, under :func:`~pubsched.engines.choose.chosen`'s
flag fence), exclusively, so an approve or a reopen racing it either waits for the edit's
commit or has already won (the edit then waits for it, is refused and writes nothing): an
edit never lands on an approved week. The same hold (SQLite's unit already holds the one
writer lock) puts two edits of one week one after the other, so the checks below are
judged on what the other committed: a shift is never overfilled, a tender never doubled
on a night, by two operators at once.

* ``assign`` writes a *pin* (``pub_roster_edits``, replacing an exclusion of the pair) and
  the assignment row at once, so the roster shows it before any regenerate. Refused when
  the shift is full (``SLOT_FULL``) or the tender already works that night or a shift
  that overlaps it in time, of any week (``SAME_NIGHT``:
  :func:`pubsched.week.runs.clash_clause`); allowed without their availability, with a
  warning.
* ``unassign`` deletes the assignment row and writes an *exclusion* (replacing a pin).

Regenerate (:mod:`pubsched.week.generate`) keeps every pin and never puts an excluded tender
back on that shift. An unknown week, shift or tender, or a shift of another week, is
:class:`~pubsched.verdicts.BadInput` with nothing written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..engines.choose import chosen
from ..engines.flags import FLAG_CHANGED, FlagChanged
from ..machine import ASSIGNED
from ..people.tenders import Tender, get
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from . import history
from .runs import Shift, clash_clause, shift_of, week_key

# what to do next, per state the week is in instead of ASSIGNED
NEXT_STEP = {
    "DRAFT": "the form has not opened yet; generate the roster first",
    "COLLECTING": "the form is still open; close it and generate the roster first",
    "CLOSED": "the roster is not generated yet; generate it first",
    "APPROVED": "the week is approved: un-approve it first",
    "SENT": "the schedule has been sent: the roster is final (a tender can ask for cover)",
}


def _tender(pub: Pub, email: str) -> Tender:
    tender = get(pub, email)
    if not tender.active:
        raise BadInput(f"{tender.email} is not an active tender")
    return tender


def _refused(week: str, held: Verdict) -> Verdict:
    state = str(held.detail.get("state", ""))
    step = NEXT_STEP.get(state, held.message or "try again")
    return Verdict(False, held.reason, message=f"week {week} is {state or 'busy'}: {step}",
                   detail={"state": state})


def _edit(pub: Pub, week: str, shift_id: int, email: str, now: datetime | None,
          write: Any) -> Verdict:
    """Check the input, then in one held unit lock, judge and write (``write``)."""
    key = week_key(week)
    if pub.runs.get(key) is None:
        raise BadInput(f"no week {key}")
    shift = shift_of(pub, key, shift_id)
    tender = _tender(pub, email)
    at = utc(now)
    try:
        with chosen(pub) as engine, pub.atomic() as tx:
            # exclusive: a shared hold beside approve's would let the edit slip a row in
            # between approve's stamp and its move (test_roster_race.py makes that
            # interleaving happen), and two edits of the week run one after the other
            held = engine.hold_week(tx, key, (ASSIGNED,), exclusive=True)
            if held is not None:
                return _refused(key, held)
            verdict: Verdict = write(tx, key, shift, tender, at)
            return verdict
    except FlagChanged as changed:
        return Verdict(False, FLAG_CHANGED, message=f"week {key}: {changed}")


def _who(tender: Tender) -> str:
    """A tender as the operator calls them: by name (the address is email syntax)."""
    return tender.name


def _mark(tx: Any, week: str, shift_id: int, tender_id: int, kind: str, at: datetime) -> None:
    tx.execute("INSERT INTO pub_roster_edits (week_of, shift_id, tender_id, kind, at) "
               "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (shift_id, tender_id) DO UPDATE "
               "SET kind = excluded.kind, at = excluded.at",
               [week, shift_id, tender_id, kind, at])


def assign(pub: Pub, week: str, shift_id: int, email: str, *,
           now: datetime | None = None) -> Verdict:
    """Pin ``email`` on the shift (and put them on it now). ``detail["warning"]`` says so
    when they did not give this shift as available (the pin stands all the same)."""

    def write(tx: Any, key: str, shift: Shift, tender: Tender, at: datetime) -> Verdict:
        sid = shift.id
        on_it = [int(r["tender_id"]) for r in tx.execute(
            "SELECT tender_id FROM pub_assignments WHERE shift_id = %s", [sid])]
        where = shift.label
        if tender.id not in on_it:
            if len(on_it) >= shift.slots:
                return Verdict(False, "SLOT_FULL", message=(
                    f"{where} is full ({shift.slots} of {shift.slots}): take someone "
                    f"off it first"), detail={"shift_id": sid})
            other = tx.execute(
                "SELECT s.label, s.night FROM pub_assignments a JOIN pub_shifts s "
                "ON s.id = a.shift_id JOIN pub_shifts c ON c.id = %s "
                f"WHERE a.tender_id = %s AND s.id <> c.id AND {clash_clause('s', 'c')} "
                "ORDER BY s.starts_at", [sid, tender.id])
            if other:
                when = "that night" if str(other[0]["night"]) == shift.night else "then"
                return Verdict(False, "SAME_NIGHT", message=(
                    f"{_who(tender)} already works {when} ({other[0]['label']}): take "
                    f"them off it first"), detail={"shift_id": sid})
            tx.execute("INSERT INTO pub_assignments (week_of, shift_id, tender_id, "
                       "assigned_at) VALUES (%s, %s, %s, %s)", [key, sid, tender.id, at])
        _mark(tx, key, sid, tender.id, "pin", at)
        history.record(tx, key, history.PIN, f"pinned {tender.name} on "
                       f"{history.shift_words(shift.label, shift.starts_at, pub.config.tz)}")
        said = tx.execute("SELECT 1 AS yes FROM pub_availability_shifts WHERE week_of = %s "
                          "AND tender_id = %s AND shift_id = %s", [key, tender.id, sid])
        warning = None if said else (
            f"{_who(tender)} did not say they can work {where}; pinned all the same")
        return Verdict(True, message=f"pinned {_who(tender)} on {where}",
                       detail={"shift_id": sid, "email": tender.email, "warning": warning})

    return _edit(pub, week, shift_id, email, now, write)


def unassign(pub: Pub, week: str, shift_id: int, email: str, *,
             now: datetime | None = None) -> Verdict:
    """Take ``email`` off the shift; regenerate will not put them back on it."""

    def write(tx: Any, key: str, shift: Shift, tender: Tender, at: datetime) -> Verdict:
        sid = shift.id
        gone = tx.execute("DELETE FROM pub_assignments WHERE shift_id = %s AND tender_id = %s "
                          "RETURNING tender_id", [sid, tender.id])
        if not gone:
            return Verdict(False, "NOT_ON_SHIFT", message=(
                f"{_who(tender)} is not on {shift.label}"), detail={"shift_id": sid})
        _mark(tx, key, sid, tender.id, "exclude", at)
        history.record(tx, key, history.TAKE_OFF, f"took {tender.name} off "
                       f"{history.shift_words(shift.label, shift.starts_at, pub.config.tz)}")
        return Verdict(True, message=(
            f"took {_who(tender)} off {shift.label}; regenerate will not put them back "
            "there"), detail={"shift_id": sid, "email": tender.email})

    return _edit(pub, week, shift_id, email, now, write)
