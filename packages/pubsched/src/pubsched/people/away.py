"""Time off, written: ``tender away EMAIL FROM TO`` and ``tender back EMAIL FROM`` (the
table and every read of it are :mod:`pubsched.people.time_off`'s).

The rules a span is written by:

* FROM and TO are local dates, both included, FROM <= TO, TO not before today (the pub's
  today) and at most :data:`MAX_DAYS` long; anything else is :class:`BadInput`, nothing
  written. A tender who is not active has no time off to take.
* **Spans of one tender never overlap**: a new span that touches one already there is
  refused (``OVERLAPS``), naming it; the tender cancels it (``tender back``) and marks the
  longer one. Refused rather than merged, because a span is named by its first day
  (``tender back EMAIL FROM``): a merge would quietly rename the span the tender knows.
* **A sent roster is not changed behind anyone's back**: a span covering a night the
  tender works in a week whose schedule was sent (the engine's reading of the week, SENT)
  is refused (``ON_THE_ROSTER``) with the hint to ask for cover first, naming the shift in
  local time. Only shifts still to come count: one already started was worked.
* A span covering a night they work in a week **not yet sent** is written, with a warning
  per such week saying what to do so someone else is picked: regenerate it (un-approve it
  first when approved); a shift they were pinned on by hand is kept by a regenerate, so
  for those the warning says to take them off it.

Race-safety. The check and the insert are one unit of work that first holds every week
the span reaches (the runs of the Mondays from FROM's to TO's), exclusively, through the
engine in charge (:meth:`pubsched.engines.base.Engine.hold_week`, under the flag fence of
:func:`~pubsched.engines.choose.chosen`, as :mod:`pubsched.week.roster` does). So a send racing
it either has not claimed yet (its claim waits for this unit, and the schedule it then
sends is the one this unit judged "not sent": the warning stands) or has (the hold is
refused while its lease is live: "being sent right now, try again"; once sent, the span
is judged against the sent roster). Exclusive, not shared: a cover taken at once by this
tender for an away night holds the same week, so one of the two judges what the other
committed. On PostgreSQL the tender's row is locked first (``FOR UPDATE``), so two spans
of one tender are judged one after the other (no overlap slips in between two checks);
SQLite's unit already holds the one writer lock. Cancelling needs none of this: a tender
back is available again, which breaks no rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from ..db.instants import instant
from ..engines.choose import chosen
from ..engines.flags import FLAG_CHANGED, FlagChanged
from ..machine import APPROVED, SENT, STATES
from ..mail.wording import days, shift_when
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from .tenders import Tender, get
from .time_off import Span, spans

MAX_DAYS = 366


Day = date | str | None  # a date, or YYYY-MM-DD as typed (None: not given)


def check_day(value: object, what: str) -> date:
    """A date given as a ``date`` or as ``YYYY-MM-DD`` text, else :class:`BadInput`."""
    if isinstance(value, datetime):
        raise BadInput(f"{what} is a date (YYYY-MM-DD), got a time: {value!r}")
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise BadInput(f"{what} is a date YYYY-MM-DD, got {value!r}")


def span_words(span: Span | tuple[date, date]) -> str:
    """``Fri 11 Dec - Sun 13 Dec 2026`` (:func:`pubsched.mail.wording.days`)."""
    first, last = (span.starts_on, span.ends_on) if isinstance(span, Span) else span
    return days(first, last)


def today(pub: Pub, now: datetime | None) -> date:
    """The pub's local date at ``now``."""
    return utc(now).astimezone(pub.config.tz).date()


def upcoming(pub: Pub, tender_id: int, now: datetime | None = None) -> list[Span]:
    """The tender's time off that has not ended by the pub's today, in date order."""
    return spans(pub, tender_id, since=today(pub, now))


def as_json(span: Span) -> dict[str, str]:
    return {"from": span.starts_on.isoformat(), "to": span.ends_on.isoformat()}


@dataclass(frozen=True)
class Clash:
    """A shift still to come that the tender works on a night of the new span."""

    week_of: str
    shift_id: int
    when: str
    pinned: bool


def _monday(day: date) -> date:
    """The Monday of the week the night ``day`` belongs to (a week's shifts are on its
    nights Monday to Sunday)."""
    return day - timedelta(days=day.weekday())


def _checked(pub: Pub, email: str, first: Day, last: Day,
             now: datetime | None) -> tuple[Tender, date, date]:
    starts_on, ends_on = check_day(first, "FROM"), check_day(last, "TO")
    if ends_on < starts_on:
        raise BadInput(f"time off ends on or after its first day: {starts_on} to {ends_on} "
                       "is backwards")
    if (ends_on - starts_on).days + 1 > MAX_DAYS:
        raise BadInput(f"time off is at most {MAX_DAYS} days at a time, got "
                       f"{(ends_on - starts_on).days + 1}")
    if ends_on < today(pub, now):
        raise BadInput(f"time off is for days to come: {span_words((starts_on, ends_on))} "
                       "is over")
    tender = get(pub, email)
    if not tender.active:
        raise BadInput(f"{tender.email} is not an active tender")
    return tender, starts_on, ends_on


def _clashes(pub: Pub, tx: Any, tender: Tender, starts_on: date, ends_on: date,
             at: datetime) -> list[Clash]:
    rows = tx.execute(
        "SELECT a.week_of, s.id, s.starts_at, s.ends_at, "
        "(SELECT COUNT(*) FROM pub_roster_edits e WHERE e.shift_id = s.id AND "
        " e.tender_id = a.tender_id AND e.kind = 'pin') AS pins "
        "FROM pub_assignments a JOIN pub_shifts s ON s.id = a.shift_id "
        "WHERE a.tender_id = %s AND s.night BETWEEN %s AND %s ORDER BY s.starts_at, s.id",
        [tender.id, starts_on.isoformat(), ends_on.isoformat()])
    tz = pub.config.tz
    return [Clash(str(r["week_of"]), int(r["id"]),
                  shift_when(instant(r["starts_at"]), instant(r["ends_at"]), tz),
                  bool(int(r["pins"])))
            for r in rows if instant(r["starts_at"]) > at]


def _warning(tender: Tender, week: str, state: str, clashes: list[Clash]) -> str:
    said = ", ".join(c.when for c in clashes)
    steps = (f"un-approve and regenerate week {week}" if state == APPROVED
             else f"regenerate week {week}")
    pinned = [c for c in clashes if c.pinned]
    hand = (f"; they were put on {', '.join(c.when for c in pinned)} by hand, which a "
            f"regenerate keeps: take them off it (`pubsched week unassign {week} "
            f"{pinned[0].shift_id} {tender.email}`)" if pinned else "")
    return (f"{tender.name} is on the roster of week {week} (not sent yet) for {said}: "
            f"{steps} so someone else is picked{hand}")


def add(pub: Pub, email: str, first: Day, last: Day, *,
        now: datetime | None = None) -> Verdict:
    """Mark ``email`` away from ``first`` to ``last`` (module docstring). Applied:
    ``detail["warnings"]`` lists the weeks not yet sent that have them on an away night."""
    tender, starts_on, ends_on = _checked(pub, email, first, last, now)
    at = utc(now)
    words = span_words((starts_on, ends_on))
    try:
        with chosen(pub) as engine, pub.atomic() as tx:
            if pub.dialect == "postgresql":  # two spans of one tender: one after the other
                tx.execute("SELECT id FROM pub_tenders WHERE id = %s FOR UPDATE", [tender.id])
            taken = tx.execute(
                "SELECT starts_on, ends_on FROM pub_time_off WHERE tender_id = %s AND "
                "starts_on <= %s AND ends_on >= %s ORDER BY starts_on",
                [tender.id, ends_on.isoformat(), starts_on.isoformat()])
            if taken:
                there = span_words((date.fromisoformat(str(taken[0]["starts_on"])),
                                    date.fromisoformat(str(taken[0]["ends_on"]))))
                return Verdict(False, "OVERLAPS", message=(
                    f"{tender.name} already has time off {there}, which overlaps "
                    f"{words}: cancel it first (`pubsched tender back {tender.email} "
                    f"{taken[0]['starts_on']}`), then mark the whole time off. "
                    "Nothing was saved."), detail={"overlaps": str(taken[0]["starts_on"])})
            weeks = [str(r["week_of"]) for r in tx.execute(
                "SELECT week_of FROM pub_schedule_runs WHERE week_of BETWEEN %s AND %s "
                "ORDER BY week_of", [_monday(starts_on).isoformat(),
                                     _monday(ends_on).isoformat()])]
            state: dict[str, str] = {}
            for week in weeks:  # in date order: two spans never wait on each other
                held = engine.hold_week(tx, week, STATES, exclusive=True)
                if held is not None:
                    return Verdict(False, held.reason or "BUSY", message=(
                        f"week {week} is busy right now (its form being closed, its roster "
                        "made or its schedule sent): try again in a minute. Nothing was "
                        "saved."))
                row = tx.execute("SELECT * FROM pub_schedule_runs WHERE week_of = %s",
                                 [week])[0]
                state[week] = engine.state_of(pub, row)
            clashes = _clashes(pub, tx, tender, starts_on, ends_on, at)
            sent = [c for c in clashes if state.get(c.week_of) == SENT]
            if sent:
                first_one = sent[0]
                said = "; ".join(f"{c.when} (week {c.week_of}, shift {c.shift_id})"
                                 for c in sent)
                return Verdict(False, "ON_THE_ROSTER", message=(
                    f"{tender.name} is on the schedule already sent for {said}: ask for "
                    f"cover first (`pubsched cover ask {first_one.week_of} "
                    f"{first_one.shift_id} {tender.email}`), then mark the time off. "
                    "Nothing was saved."),
                    detail={"shifts": [{"week_of": c.week_of, "shift_id": c.shift_id,
                                        "when": c.when} for c in sent]})
            tx.execute("INSERT INTO pub_time_off (tender_id, starts_on, ends_on, created_at) "
                       "VALUES (%s, %s, %s, %s)",
                       [tender.id, starts_on.isoformat(), ends_on.isoformat(), at])
    except FlagChanged as changed:
        return Verdict(False, FLAG_CHANGED, message=f"time off not saved: {changed}")
    by_week: dict[str, list[Clash]] = {}
    for c in clashes:
        by_week.setdefault(c.week_of, []).append(c)
    warnings = [_warning(tender, week, state.get(week, ""), found)
                for week, found in sorted(by_week.items())]
    return Verdict(True, message=f"{tender.name} is away {words}",
                   detail={"email": tender.email, "from": starts_on.isoformat(),
                           "to": ends_on.isoformat(), "warnings": warnings})


def cancel(pub: Pub, email: str, first: Day) -> Verdict:
    """Cancel the tender's time off that starts on ``first``; none: ``NO_TIME_OFF``,
    naming the spans they do have."""
    starts_on = check_day(first, "FROM")
    tender = get(pub, email)
    with pub.atomic() as tx:
        gone = tx.execute("DELETE FROM pub_time_off WHERE tender_id = %s AND starts_on = %s "
                          "RETURNING ends_on", [tender.id, starts_on.isoformat()])
    if not gone:
        have = spans(pub, tender.id)
        listed = ("; their time off starts on " + ", ".join(
            s.starts_on.isoformat() for s in have)) if have else "; they have none"
        return Verdict(False, "NO_TIME_OFF", message=(
            f"{tender.name} has no time off starting on {starts_on.isoformat()}{listed}"))
    ends_on = date.fromisoformat(str(gone[0]["ends_on"]))
    return Verdict(True, message=(f"{tender.name} is back: the time off "
                                  f"{span_words((starts_on, ends_on))} is cancelled"),
                   detail={"email": tender.email, "from": starts_on.isoformat(),
                           "to": ends_on.isoformat()})


__all__ = ["MAX_DAYS", "Clash", "Day", "add", "as_json", "cancel", "check_day", "span_words",
           "today", "upcoming"]
