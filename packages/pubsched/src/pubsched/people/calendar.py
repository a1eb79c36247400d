"""A tender's shifts as an iCalendar file (RFC 5545), made with ``icalendar``.

The file is a snapshot published to the tender (``METHOD:PUBLISH``), not an invitation: it
asks for no reply. What makes it safe to import more than once is the UID: one per
(week, shift, tender), derived from those three and nothing else, so that a calendar that
already holds the event updates it instead of adding a copy. The schedule email's attachment
and any calendar feed must therefore take their UIDs from :func:`shift_uid`.

Times are written in UTC (``DTSTART:...Z``): the shift's instants are stored in UTC, and a
UTC time needs no VTIMEZONE block that a client could read differently.

Every event names the pub as its ORGANIZER (its name and the address its mail comes from:
RFC 5546 requires one in a PUBLISH and a CANCEL), and carries its SEQUENCE, which only
grows per UID (:mod:`pubsched.people.sequences`: a calendar keeps a cancelled event
cancelled unless what follows has a higher one). The subscribed feed also names itself
(``X-WR-CALNAME``: the pub's name) and asks to be fetched again hourly
(``REFRESH-INTERVAL`` of RFC 7986, and ``X-PUBLISHED-TTL`` for clients that read only
that one).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from icalendar import Calendar, Event, vCalAddress, vDuration

PRODID = "-//rowstate//pubsched//EN"
UID_DOMAIN = "pubsched"
REFRESH = timedelta(hours=1)  # how often a subscribed feed is fetched again


@dataclass(frozen=True)
class Organizer:
    """The pub, as its calendars name it: ``name`` (the pub's) and ``address`` (the one
    its mail comes from)."""

    name: str
    address: str


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
    organizer: Organizer,
    location: str | None = None,
    sequences: Mapping[int, int] | None = None,
) -> bytes:
    """The ``.ics`` bytes for ``events`` as (shift id, summary, starts_at, ends_at) in UTC.

    ``stamp`` (DTSTAMP: when this version of the event was made) is passed in, never read
    from the clock, so the same input gives the same bytes. ``location`` (the pub's
    address) becomes every event's LOCATION, so a phone can map the way to the shift.
    ``sequences``: each event's SEQUENCE by shift id (absent: 0).
    """
    calendar = _calendar("PUBLISH")
    for shift_id, summary, starts_at, ends_at in events:
        calendar.add_component(_published(week_of, shift_id, tender_email, summary,
                                          starts_at, ends_at, stamp=stamp,
                                          organizer=organizer, location=location,
                                          sequences=sequences))
    ical: bytes = calendar.to_ical()
    return ical


def feed_calendar(
    tender_email: str,
    events: Iterable[tuple[date, int | str, str, datetime, datetime]],
    *,
    stamp: datetime,
    organizer: Organizer,
    location: str | None = None,
    sequences: Mapping[int, int] | None = None,
) -> bytes:
    """The ``.ics`` bytes of shifts over several weeks, as (week, shift id, summary,
    starts_at, ends_at): a tender's subscribed feed, named after the pub and fetched again
    hourly. Each event keeps the UID the schedule email's attachment gave it, so a
    calendar holding both shows each shift once, and its SEQUENCE now (``sequences``)."""
    calendar = _calendar("PUBLISH")
    calendar.add("x-wr-calname", organizer.name)
    calendar.add("refresh-interval", REFRESH, parameters={"VALUE": "DURATION"})
    calendar.add("x-published-ttl", vDuration(REFRESH))
    for week_of, shift_id, summary, starts_at, ends_at in events:
        calendar.add_component(_published(week_of, shift_id, tender_email, summary,
                                          starts_at, ends_at, stamp=stamp,
                                          organizer=organizer, location=location,
                                          sequences=sequences))
    ical: bytes = calendar.to_ical()
    return ical


def _published(week_of: date, shift_id: int | str, tender_email: str, summary: str,
               starts_at: datetime, ends_at: datetime, *, stamp: datetime,
               organizer: Organizer, location: str | None,
               sequences: Mapping[int, int] | None) -> Event:
    event = _event(week_of, shift_id, tender_email, summary, starts_at, ends_at,
                   stamp=stamp, organizer=organizer, location=location,
                   sequence=(sequences or {}).get(int(shift_id), 0))
    event.add("transp", "OPAQUE")
    return event


def cancelled_calendar(
    week_of: date,
    shift_id: int | str,
    tender_email: str,
    summary: str,
    starts_at: datetime,
    ends_at: datetime,
    *,
    stamp: datetime,
    organizer: Organizer,
    sequence: int,
    location: str | None = None,
) -> bytes:
    """The ``.ics`` bytes that take one shift off a tender's calendar (a cover taken from
    them): ``METHOD:CANCEL``, the event's own UID (:func:`shift_uid`, so the calendar that
    holds it from the schedule email or the feed removes that very event),
    ``STATUS:CANCELLED``, the pub as ORGANIZER and ``sequence``, which must be higher than
    the event's SEQUENCE so far (at least 1: the schedule's is 0)."""
    if sequence < 1:
        raise ValueError(f"a cancel's SEQUENCE is higher than the schedule's 0, got {sequence}")
    calendar = _calendar("CANCEL")
    event = _event(week_of, shift_id, tender_email, summary, starts_at, ends_at,
                   stamp=stamp, organizer=organizer, location=location, sequence=sequence)
    event.add("status", "CANCELLED")
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
           organizer: Organizer, location: str | None, sequence: int) -> Event:
    """One shift's event as every calendar of ours carries it (its UID: :func:`shift_uid`,
    the pub as ORGANIZER, its SEQUENCE); the caller adds what makes it a publication or a
    cancellation."""
    event = Event()
    event.add("uid", shift_uid(week_of, shift_id, tender_email))
    event.add("dtstamp", _utc(stamp, "stamp"))
    event.add("sequence", int(sequence))
    event.add("organizer", vCalAddress(f"mailto:{organizer.address}"),
              parameters={"CN": organizer.name})
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
