"""How days, shifts and the pub's time zone read, in the emails and on the tender's page.

One shift, one label: ``Thu 10 Dec, 18:00 - 02:00``. Before this module the email wrote a
shift's stored label and then its times (``Thu 10 Dec 18:00-02:00: Thu 10 Dec 18:00 - Fri
02:00 GMT``): the stored label *was* the times. So the time part is always made here from the
shift's instants, and the stored label is shown beside it only when it says something the
times do not (a template's "Friday night"), never when it is the times again. The zone is
named once per email or page (:func:`zone_words`), not after every time.

Pure functions of their arguments (no clock, no environment), so the page and the mail
cannot disagree about a shift.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime
from zoneinfo import ZoneInfo

_FILLER = re.compile(r"[\s,.:;()\-\u2013\u2014/]+")


def zone(tz: ZoneInfo | str) -> ZoneInfo:
    return tz if isinstance(tz, ZoneInfo) else ZoneInfo(tz)


def day(value: date) -> str:
    """``Mon 7 Dec 2026``: a week is named by its Monday."""
    return f"{value:%a} {value.day} {value:%b %Y}"


def days(first: date, last: date) -> str:
    """``Fri 11 Dec - Sun 13 Dec 2026`` (both included; one day: ``Fri 11 Dec 2026``): a
    stretch of days, such as a tender's time off."""

    def one(d: date, year: bool) -> str:
        return f"{d:%a} {d.day} {d:%b}" + (f" {d.year}" if year else "")

    if first == last:
        return one(first, True)
    return f"{one(first, first.year != last.year)} - {one(last, True)}"


def moment(value: datetime, tz: ZoneInfo | str) -> str:
    """``Thu 3 Dec 18:00 EST``: a single instant (a deadline) names its zone itself."""
    local = value.astimezone(zone(tz))
    return f"{local:%a} {local.day} {local:%b %H:%M %Z}"


def shift_when(starts_at: datetime, ends_at: datetime, tz: ZoneInfo | str) -> str:
    """``Thu 10 Dec, 18:00 - 02:00``: the start's day and both clock times. A shift past
    midnight ends the next morning, which the times already say; one longer than a day
    names the end's day too, so it cannot be misread."""
    start, end = starts_at.astimezone(zone(tz)), ends_at.astimezone(zone(tz))
    end_text = f"{end:%H:%M}"
    if (ends_at - starts_at).total_seconds() >= 24 * 3600:
        end_text = f"{end:%a} {end.day} {end:%b %H:%M}"
    return f"{start:%a} {start.day} {start:%b}, {start:%H:%M} - {end_text}"


# what a label adds nothing with beside its day's name ("Thursday night" on a Thursday)
_PARTS_OF_DAY = frozenset({"night", "evening", "morning", "afternoon", "day", "shift"})


def own_label(label: str, starts_at: datetime, ends_at: datetime,
              tz: ZoneInfo | str) -> str | None:
    """The stored label when it says more than the shift's times, else None.

    A label is "just the time" when nothing is left of it once the words of its own times
    are taken out (its days' and months' names, day numbers, clock times, the punctuation
    between them, and the words for a part of the day): ``Thu 10 Dec 18:00-02:00`` and a
    Thursday's ``Thursday night`` are, ``Big Friday`` or ``Cellar`` are not."""
    start, end = starts_at.astimezone(zone(tz)), ends_at.astimezone(zone(tz))
    words: set[str] = set()
    for local in (start, end):
        words |= {f"{local:%a}", f"{local:%A}", f"{local:%b}", f"{local:%B}",
                  str(local.day), f"{local:%d}", f"{local:%H:%M}", f"{local:%H}", f"{local:%M}",
                  f"{local:%Z}", str(local.year)}
    words |= _PARTS_OF_DAY
    rest = [w for w in _FILLER.split(label) if w and w.lower() not in
            {x.lower() for x in words}]
    return label.strip() if rest else None


def shift_text(label: str, starts_at: datetime, ends_at: datetime,
               tz: ZoneInfo | str) -> str:
    """``Thu 10 Dec, 18:00 - 02:00 (Friday night)``, or the times alone."""
    when = shift_when(starts_at, ends_at, tz)
    extra = own_label(label, starts_at, ends_at, tz)
    return f"{when} ({extra})" if extra else when


def shift_in_zone(label: str, starts_at: datetime, ends_at: datetime,
                  tz: ZoneInfo | str) -> str:
    """``Thu 10 Dec, 18:00 - 02:00, New York time (EST)``: one shift said on its own (a
    cover request's email, a command's answer), so its zone is named with it."""
    return f"{shift_text(label, starts_at, ends_at, tz)}, {zone_words(tz, [starts_at])}"


def zone_words(tz: ZoneInfo | str, moments: Iterable[datetime] = ()) -> str:
    """``New York time (EST)``: the zone's city and the abbreviations in force at
    ``moments`` (two in a week that changes the clocks: ``EST/EDT``)."""
    where = zone(tz)
    city = where.key.rsplit("/", 1)[-1].replace("_", " ")
    abbreviations = sorted({f"{m.astimezone(where):%Z}" for m in moments})
    if city.upper() in ("UTC", "GMT", "UCT", "ZULU"):
        return "UTC"
    named = f"{city} time"
    return f"{named} ({'/'.join(abbreviations)})" if abbreviations else named


def calendar_summary(pub_name: str, label: str, starts_at: datetime, ends_at: datetime,
                     tz: ZoneInfo | str) -> str:
    """A calendar event's title: ``Shift at The Crown (Friday night)``; the calendar shows
    the times itself, so a label that is only the times is left out."""
    extra = own_label(label, starts_at, ends_at, tz)
    return f"Shift at {pub_name}" + (f" ({extra})" if extra else "")
