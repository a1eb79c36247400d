"""A tender's shifts as an iCalendar file (RFC 5545), made with ``icalendar``.

The file is a snapshot published to the tender (``METHOD:PUBLISH``), not an invitation: it
asks for no reply. What makes it safe to import more than once is the UID: one per
(week, shift, tender), derived from those three and nothing else, so that a calendar that
already holds the event updates it instead of adding a copy. The schedule email's attachment
and any calendar feed must therefore take their UIDs from :func:`shift_uid`.

Times are written in UTC (``DTSTART:...Z``): the shift's instants are stored in UTC, and a
UTC time needs no VTIMEZONE block that a client could read differently.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import date, datetime, timedelta

from icalendar import Calendar, Event

PRODID = "-//rowstate//pubsched//EN"
UID_DOMAIN = "pubsched"


def shift_uid(week_of: date, shift_id: int | str, tender_email: str) -> str:
    """The stable UID of one tender's event for one shift of one week.

    The tender is named by a digest of their address, lowercased (addresses are unique
    case-insensitively), so the UID does not spell the address out in every calendar that
    stores it.
    """
    tender = hashlib.sha256(tender_email.strip().lower().encode()).hexdigest()[:16]
    return f"week-{week_of.isoformat()}-shift-{shift_id}-tender-{tender}@{UID_DOMAIN}"


def shifts_calendar(
    week_of: date,
    tender_email: str,
    events: Iterable[tuple[int | str, str, datetime, datetime]],
    *,
    stamp: datetime,
    location: str | None = None,
) -> bytes:
    """The ``.ics`` bytes for ``events`` as (shift id, summary, starts_at, ends_at) in UTC.

    ``stamp`` (DTSTAMP: when this version of the event was made) is passed in, never read
    from the clock, so the same input gives the same bytes. ``location`` (the pub's
    address) becomes every event's LOCATION, so a phone can map the way to the shift.
    """
    return feed_calendar(tender_email, ((week_of, *event) for event in events), stamp=stamp,
                         location=location)


def feed_calendar(
    tender_email: str,
    events: Iterable[tuple[date, int | str, str, datetime, datetime]],
    *,
    stamp: datetime,
    location: str | None = None,
) -> bytes:
    """The ``.ics`` bytes of shifts over several weeks, as (week, shift id, summary,
    starts_at, ends_at): a tender's subscribed feed. Each event keeps the UID the schedule
    email's attachment gave it, so a calendar holding both shows each shift once."""
    calendar = _calendar("PUBLISH")
    for week_of, shift_id, summary, starts_at, ends_at in events:
        event = _event(week_of, shift_id, tender_email, summary, starts_at, ends_at,
                       stamp=stamp, location=location)
        event.add("transp", "OPAQUE")
        calendar.add_component(event)
    ical: bytes = calendar.to_ical()
    return ical


def cancelled_calendar(
    week_of: date,
    shift_id: int | str,
    tender_email: str,
    summary: str,
    starts_at: datetime,
    ends_at: datetime,
    *,
    stamp: datetime,
    location: str | None = None,
) -> bytes:
    """The ``.ics`` bytes that take one shift off a tender's calendar (a cover taken from
    them): ``METHOD:CANCEL``, the event's own UID (:func:`shift_uid`, so the calendar that
    holds it from the schedule email or the feed removes that very event),
    ``STATUS:CANCELLED`` and a higher ``SEQUENCE`` than the published event's 0."""
    calendar = _calendar("CANCEL")
    event = _event(week_of, shift_id, tender_email, summary, starts_at, ends_at,
                   stamp=stamp, location=location)
    event.add("status", "CANCELLED")
    event.add("sequence", 1)
    calendar.add_component(event)
    ical: bytes = calendar.to_ical()
    return ical


def _calendar(method: str) -> Calendar:
    calendar = Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add("method", method)
    calendar.add("calscale", "GREGORIAN")
    return calendar


def _event(week_of: date, shift_id: int | str, tender_email: str, summary: str,
           starts_at: datetime, ends_at: datetime, *, stamp: datetime,
           location: str | None) -> Event:
    """One shift's event as every calendar of ours carries it (its UID: :func:`shift_uid`);
    the caller adds what makes it a publication or a cancellation."""
    event = Event()
    event.add("uid", shift_uid(week_of, shift_id, tender_email))
    event.add("dtstamp", _utc(stamp, "stamp"))
    event.add("dtstart", _utc(starts_at, "starts_at"))
    event.add("dtend", _utc(ends_at, "ends_at"))
    event.add("summary", summary)
    if location:
        event.add("location", location)
    return event


def _utc(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() != timedelta(0):
        raise ValueError(f"{name} must be an aware UTC datetime, not {moment!r}")
    return moment
