"""What a tender's own page shows besides the form's state (:func:`pubsched.week.view.tender_form`
builds the page's dict and calls these): their shifts still to come, and the open week's
shifts as the form offers them (a shift on a night of their time off marked ``away``, with
its dates).

Their shifts come from SENT weeks only, as the calendar feed's do: before a week is sent a
regenerate may still move them, and a tender shown a shift they then lose would turn up for
it. A shift is "to come" until it ends, so one being worked is still on the page.

Each shift carries its text (:func:`pubsched.mail.wording.shift_text`: the times made from
its instants, its label only when it says more) so the page and the email read alike.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..mail.wording import days, shift_text, zone_words
from ..pub import Pub
from ..week.offer import week_offers
from ..week.runs import shifts
from ..week.time import as_utc
from .tenders import Tender
from .time_off import Span


def upcoming(pub: Pub, tender: Tender, now: datetime) -> list[dict[str, Any]]:
    """The tender's assigned shifts in sent weeks that have not ended, in time order."""
    rows = pub.query(
        "SELECT a.week_of, s.id, s.label, s.starts_at, s.ends_at "
        "FROM pub_assignments a JOIN pub_shifts s ON s.id = a.shift_id "
        "JOIN pub_schedule_runs r ON r.week_of = a.week_of "
        "WHERE a.tender_id = %s AND r.status = 'sent' ORDER BY s.starts_at, s.id",
        [tender.id])
    at = as_utc(now)
    tz = pub.config.tz
    return [{"id": int(r["id"]), "week_of": str(r["week_of"]),
             "text": shift_text(str(r["label"]), r["starts_at"], r["ends_at"], tz),
             "now": as_utc(r["starts_at"]) <= at}
            for r in rows if as_utc(r["ends_at"]) > at]


def form_shifts(pub: Pub, tender: Tender, week: str, now: datetime) -> list[dict[str, Any]]:
    """The week's shifts as the form offers them (:mod:`pubsched.week.offer`): each
    ``tickable``, or with ``why_not`` (the skills it needs; ``started``: the form leaves
    it out, but what the tender said about it still shows)."""
    week_shifts = shifts(pub, week)
    offered = week_offers(pub, week_shifts, tender, now)
    tz = pub.config.tz
    return [{"id": s.id, "label": s.label, "night": s.night, "starts_at": s.starts_at,
             "ends_at": s.ends_at, "text": shift_text(s.label, s.starts_at, s.ends_at, tz),
             "tickable": offered[s.id].tickable, "why_not": offered[s.id].why_not,
             "needs": sorted(offered[s.id].needs), "started": offered[s.id].started,
             "away": _away_text(offered[s.id].away)}
            for s in week_shifts]


def _away_text(span: Span | None) -> str | None:
    """The time off that makes a shift "away" on the form, in words; None: not away."""
    return None if span is None else days(span.starts_on, span.ends_on)


def zone_of(pub: Pub, moments: list[datetime]) -> str:
    return zone_words(pub.config.tz, moments)
