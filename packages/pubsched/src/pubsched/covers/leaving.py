"""Deactivating a tender who still works shifts to come on sent rosters (issue 29).

A sent roster is final (:mod:`pubsched.covers.requests`): the tenders have it, and only a
cover moves a shift from one tender to another. Deactivating a tender on it used to leave
them there, inactive: the week page counted them, a colleague's reminder said "With Finn",
no note told the operator the shift was short, and their dead links could not even ask for
cover. So :func:`deactivate` is the one door to deactivation, for the CLI and the web alike:

* with no shift to come on a sent roster, it deactivates (as before);
* with some, it refuses (``HAS_SHIFTS``) and names them in the pub's time, nothing written;
* with ``cover=True`` it asks for cover for each on the tender's behalf (a request of
  theirs, offered as any request is, the operator told: :func:`.requests.open_request`),
  takes them off those shifts, and deactivates them. The first to take a request fills the
  place they left (:func:`.requests.take`); until then the shift is short, and says so
  everywhere (the week page, the short-shift note, the colleagues' reminders name only who
  is on it). A request that ends with nobody leaves the place empty, and the operator is
  told, as for any request.

All of it is ONE unit of work: every sent week with a shift to come is held exclusively
first, in week order (as a take holds its week: the lock order of
:data:`.requests.LOCK_ORDER`), so a take racing it runs wholly before (and is seen) or
wholly after (and finds the tender inactive); a crash leaves the tender active on their
shifts with no request, or deactivated with every request open. A tender already inactive
who still has shifts (deactivated before this rule) can be covered the same way.

The emails the requests owe go out as for any request; none goes to the tender who left
(:mod:`.notes` drops a request's notes to an asker no longer active).

The record: each request's first event names who deactivated the tender (``by``: the
operator's login, ``cli:USER``) and why (``{"why": "deactivated"}``), and its note says it
was asked on their behalf; each week they leave records it in its history
(:func:`pubsched.week.history.deactivated`, in the same unit).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..db.instants import instant
from ..engines.choose import chosen
from ..engines.flags import FLAG_CHANGED, FlagChanged
from ..machine import SENT
from ..mail.wording import shift_in_zone
from ..people import tenders
from ..people.tenders import ALREADY_INACTIVE, Tender
from ..pub import Pub, utc
from ..verdicts import Verdict
from ..week.runs import Shift, shift_of
from .requests import open_request, reach

HAS_SHIFTS = "HAS_SHIFTS"
DEACTIVATED = "deactivated"  # the "why" of a request the pub opened for a tender leaving
BUSY = "WEEK_BUSY"

_WEEKS_TO_COME = ("SELECT DISTINCT s.week_of FROM pub_shifts s JOIN pub_schedule_runs r "
                  "ON r.week_of = s.week_of WHERE r.status = 'sent' AND s.starts_at > %s "
                  "ORDER BY s.week_of")
_THEIRS_TO_COME = ("SELECT s.id, s.week_of FROM pub_assignments a JOIN pub_shifts s "
                   "ON s.id = a.shift_id JOIN pub_schedule_runs r ON r.week_of = s.week_of "
                   "WHERE a.tender_id = %s AND r.status = 'sent' AND s.starts_at > %s "
                   "ORDER BY s.starts_at, s.id")


class _Undo(Exception):
    """Raised inside the unit to roll it back and answer ``verdict`` instead."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


def shift_words(pub: Pub, shift: Shift) -> str:
    """``Wed 9 Dec, 18:00 - 02:00, New York time (EST)``: a shift as the operator reads it."""
    return shift_in_zone(shift.label, instant(shift.starts_at), instant(shift.ends_at),
                         pub.config.tz)


def shifts_to_come(pub: Pub, tender_id: int, now: datetime | None = None) -> list[Shift]:
    """The shifts of sent rosters ``tender_id`` works that have not started at ``now``,
    in time order (what a deactivation must cover; the web's confirm names them)."""
    rows = pub.query(_THEIRS_TO_COME, [tender_id, utc(now)])
    return [shift_of(pub, str(r["week_of"]), int(r["id"])) for r in rows]


def deactivate(pub: Pub, email: str, *, cover: bool = False,
               now: datetime | None = None) -> Verdict:
    """Deactivate the tender ``email`` (module docstring). Refused: ``HAS_SHIFTS`` (their
    shifts to come in ``detail["shifts"]``), ``ALREADY_INACTIVE``; with ``cover``, the
    requests opened are ``detail["covers"]``. An unknown tender is
    :class:`~pubsched.verdicts.BadInput`."""
    tender = tenders.get(pub, email)
    at = utc(now)
    try:
        with chosen(pub) as engine, pub.atomic() as tx:
            for row in tx.execute(_WEEKS_TO_COME, [at]):
                week = str(row["week_of"])
                held = engine.hold_week(tx, week, (SENT,), exclusive=True)
                if held is not None:  # pragma: no cover - a sent week stays sent
                    raise _Undo(Verdict(False, BUSY, message=f"nothing changed: "
                                        f"{held.message}; try again in a moment"))
            theirs = [shift_of(pub, str(r["week_of"]), int(r["id"]))
                      for r in tx.execute(_THEIRS_TO_COME, [tender.id, at])]
            if theirs and not cover:
                raise _Undo(_has_shifts(pub, tender, theirs))
            flipped = tenders.deactivate(pub, tender.email, now=at)  # joins this unit
            if not flipped and not theirs:
                raise _Undo(flipped)
            covered = [_covered(pub, tx, tender, shift, at) for shift in theirs]
    except FlagChanged as changed:
        return Verdict(False, FLAG_CHANGED, message=f"nothing changed: {changed}")
    except _Undo as undone:
        return undone.verdict
    return _done(tender, covered)


def _has_shifts(pub: Pub, tender: Tender, theirs: list[Shift]) -> Verdict:
    listed = "; ".join(shift_words(pub, s) for s in theirs)
    many = len(theirs) != 1
    return Verdict(False, HAS_SHIFTS, message=(
        f"{tender.name} still works {len(theirs)} shift{'s' if many else ''} to come on "
        f"sent rosters: {listed}. Nothing changed. Deactivating them takes them off "
        f"{'these shifts' if many else 'it'}, so ask for cover for "
        f"{'each' if many else 'it'} at the same time: the tenders who could work "
        f"{'them' if many else 'it'} are emailed, as for any request for cover."),
        detail={"shifts": [{"week_of": s.week_of, "shift_id": s.id,
                            "when": shift_words(pub, s)} for s in theirs]})


def _covered(pub: Pub, tx: Any, tender: Tender, shift: Shift, at: datetime
             ) -> dict[str, Any]:
    """Shift ``shift`` asked for on the tender's behalf (or the request they opened
    themselves kept), and the tender taken off it."""
    said = shift_words(pub, shift)
    mine = tx.execute("SELECT id FROM pub_covers WHERE shift_id = %s AND asked_by = %s "
                      "AND state = 'OPEN'", [shift.id, tender.id])
    if mine:
        cover_id, reached = int(mine[0]["id"]), "their own request, still open"
    else:
        opened = open_request(pub, tx, shift, tender.id, _note(pub, tender), at,
                              why=DEACTIVATED)
        if opened is None:  # pragma: no cover - the week is held and no request was open
            raise _Undo(Verdict(False, BUSY, message="nothing changed: a request for cover "
                                "changed meanwhile; try again"))
        cover_id, offered = opened
        reached = reach(offered)
    tx.execute("DELETE FROM pub_assignments WHERE shift_id = %s AND tender_id = %s",
               [shift.id, tender.id])
    return {"cover_id": cover_id, "week_of": shift.week_of, "shift_id": shift.id,
            "when": said, "line": f"request {cover_id} for {said}: {reached}"}


def _note(pub: Pub, tender: Tender) -> str:
    return f"Asked by {pub.config.mail.pub_name} on behalf of {tender.name}."


def _done(tender: Tender, covered: list[dict[str, Any]]) -> Verdict:
    if not covered:
        return Verdict(True, message=f"{tender.name} is deactivated: no more shifts, and "
                                     "their links stop working")
    lines = "; ".join(c["line"] for c in covered)
    return Verdict(True, message=(
        f"{tender.name} is deactivated and off {len(covered)} shift"
        f"{'' if len(covered) == 1 else 's'} to come, each asked for cover: {lines}."),
        detail={"covers": [{k: v for k, v in c.items() if k != "line"} for c in covered]})


__all__ = ["ALREADY_INACTIVE", "BUSY", "HAS_SHIFTS", "deactivate", "shift_words",
           "shifts_to_come"]
