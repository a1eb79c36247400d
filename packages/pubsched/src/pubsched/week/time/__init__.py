"""The pub week and its local times: which Monday a week is, when its shifts are, when its
form opens and closes, when it is generated and sent.

Pure: no database, no clock (``now`` is always an argument), no environment read (the app
passes the zone, ``PUBSCHED_TZ``, default `DEFAULT_TZ`). Every instant handed out is an
aware UTC ``datetime``; local times exist only as rules ("Friday 18:00 in the pub's zone")
until they are turned into instants here.

A week
======
A week is named by its Monday (``week_of``), an ISO date ``YYYY-MM-DD`` or a ``date``.
Anything else (another weekday, ``2026-W49-1``, ``20261130``, a datetime) is `BadWeek`.
A Monday within `EDGE_MARGIN` of the calendar's first or last day (year 1, year 9999) is
`BadWeek` too, and an instant there `OutOfRange`: the moments up to four weeks before the
Monday and the shifts after it must all be representable, in every zone, before anything
is written.

Local times that do not exist, or exist twice
=============================================
One rule, `local_to_utc`, turns every local wall time into an instant (PEP 495's
``fold=0``):

- A time that does not exist (clocks spring forward over it) moves forward by the length
  of the gap: 02:30 on 2026-03-08 in New York is 03:30 EDT (07:30 UTC).
- A time that exists twice (clocks fall back over it) is its first occurrence, still on
  summer time: 01:30 on 2026-11-01 in New York is 01:30 EDT (05:30 UTC).

The pub runs by the clock on the wall, so a shift's length follows it. The default
18:00-02:00 shift on the night of Sat 2026-03-07 in New York runs 23:00-07:00 UTC (8 h:
02:00 does not exist and becomes 03:00 EDT, the same instant as 02:00 EST); on the night of
Sat 2026-10-31 it runs 22:00-07:00 UTC (9 h: 01:00-02:00 happens twice, and 02:00 comes
once, after both). In London the clocks change at 01:00 GMT: the night of Sat 2026-03-28
runs 18:00-01:00 UTC (7 h) and the night of Sat 2026-10-24 runs 17:00-02:00 UTC (9 h).
Moving forward by the gap keeps a span's length (02:15-02:45 becomes 03:15-03:45) but not
the order of times around it: on 2026-03-08 in New York 02:30 (= 03:30 EDT) comes after
03:00 (java.time's rule as well). So a shift whose start the gap moves past its end (a
Sunday 02:30-03:00 or 02:30-03:15 on that night) **moves whole**: it starts where its start
moved to and keeps its planned length (03:30-04:00 EDT, 03:30-04:15 EDT), never a length of
zero or less and never a week refused for it (`place_shift`, :mod:`.clocks`). Every shift
the clocks touch (a start or end that does not exist or happens twice, a length that is not
the wall clock's) carries a note in the operator's words (``WeekShift.note``), which
``week create`` prints and the week's page shows beside the shift.

Shifts
======
A `ShiftTemplate` is a weekday, a local start and end, and a number of slots; an end at or
before the start is on the next day (the shift crosses midnight) and belongs to the night
it starts (`WeekShift.night`, what the picker's one-shift-a-night rule counts). The
default, `DEFAULT_TEMPLATE`, is Thu, Fri and Sat 18:00-02:00 with 2 slots each: what
migration 0038 seeds into the pub's own template (the app reads that table,
:mod:`pubsched.week.template`, never this constant).

The run's times, and their defaults
===================================
`RunSettings` places each of the run's moments as a `LocalMoment`: a day relative to the
week's Monday (``-7`` = the Monday before) and a local time. The defaults, chosen so that
tenders answer early in the week before and know their shifts by the weekend before:

==================  ================================  =========================
opens_at            Monday of the week before, 10:00  the form opens
deadline_at         Wednesday before, 20:00           tenders should have answered
generate_at         Thursday before, 10:00            autopilot generates
send_window_start   Thursday before, 12:00            the operator may send
send_window_end     Friday before, 18:00              past it: "approved but not sent"
==================  ================================  =========================

The deadline does not end submissions (the close does); it drives the nudge and the
autopilot. The moments must come in the order of the table (opens < deadline <= generate
<= send window start < send window end), or `BadSettings`. A moment the override leaves
alone follows one it moves: when an extended deadline passes the generate time, the
generate time and the send window keep their default distances after it (the deadline
Thursday 15:00 puts the send window at Thursday 17:00 to Saturday 01:00 by default), so
the order holds; a moment the override sets itself is never moved.

A week's ``settings_override`` (migration 0033's JSON) is applied on top: an object whose
keys are those names (and ``"shifts"``, a list of templates for that week only), each
value either ``{"day": -5, "at": "22:00"}`` (relative, as above), ``"2026-11-26T12:00"``
(a local wall time, by the rules above) or ``"2026-11-26T17:00:00Z"`` (an exact instant,
any offset). An unknown key is `BadSettings`: a misspelt override must not silently
leave the default in force.
"""

from .clocks import Placed, place_shift
from .days import (
    DEFAULT_TZ,
    TZ_ENV,
    WEEKDAY_BY_NAME,
    BadSettings,
    BadWeek,
    NaiveTimeError,
    OutOfRange,
    RunMoment,
    WeekTimeError,
    as_utc,
    in_range,
    local_to_utc,
    parse_hh_mm,
    parse_override,
    wall_clock_before,
    week_containing,
    week_of,
    zone,
    zone_from_env,
)
from .runs import (
    DEFAULT_SETTINGS,
    LocalMoment,
    RunSettings,
    RunTimes,
    run_times,
    with_moment,
)
from .shifts import DEFAULT_TEMPLATE, ShiftTemplate, WeekShift, shifts_for_week, template_from_json

__all__ = [
    "DEFAULT_SETTINGS",
    "DEFAULT_TEMPLATE",
    "DEFAULT_TZ",
    "TZ_ENV",
    "WEEKDAY_BY_NAME",
    "BadSettings",
    "BadWeek",
    "LocalMoment",
    "NaiveTimeError",
    "OutOfRange",
    "Placed",
    "RunMoment",
    "RunSettings",
    "RunTimes",
    "ShiftTemplate",
    "WeekShift",
    "WeekTimeError",
    "as_utc",
    "in_range",
    "local_to_utc",
    "parse_hh_mm",
    "parse_override",
    "place_shift",
    "run_times",
    "shifts_for_week",
    "template_from_json",
    "wall_clock_before",
    "week_containing",
    "week_of",
    "with_moment",
    "zone",
    "zone_from_env",
]
