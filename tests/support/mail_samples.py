"""A small week of shifts and the people on it, for the mail tests."""

from __future__ import annotations

from datetime import UTC, date, datetime

from pubsched.mail.compose import Recipient, Roster, ShiftLine
from support import pubs

WEEK = date.fromisoformat(pubs.WEEK)  # the pub tests' week, as the composers take it
COMPOSED_AT = datetime(2026, 12, 5, 15, 30, tzinfo=UTC)  # when the samples are composed
TZ = "America/New_York"
OPERATOR = "ops@example.com"

ALICE = Recipient("alice@example.com", "Alice")
BOB = Recipient("bob@example.com", "Bob")
CAROL = Recipient("carol@example.com", "Carol")

# Thu, Fri, Sat 18:00-02:00 New York time (EST, UTC-5): each crosses midnight.
THU = ShiftLine(
    101,
    "Thursday night",
    datetime(2026, 12, 10, 23, tzinfo=UTC),
    datetime(2026, 12, 11, 7, tzinfo=UTC),
    TZ,
    ("Alice", "Bob"),
)
FRI = ShiftLine(
    102,
    "Friday night",
    datetime(2026, 12, 11, 23, tzinfo=UTC),
    datetime(2026, 12, 12, 7, tzinfo=UTC),
    TZ,
    ("Carol",),
)
SAT = ShiftLine(
    103,
    "Saturday night",
    datetime(2026, 12, 12, 23, tzinfo=UTC),
    datetime(2026, 12, 13, 7, tzinfo=UTC),
    TZ,
    ("Alice", "Carol"),
)
ROSTER = Roster(WEEK, (SAT, THU, FRI))  # out of order on purpose: the email sorts by time
OWN = {ALICE: {101, 103}, BOB: {101}, CAROL: {102, 103}}
