"""What the parser checks before anything is opened: an instant with an offset, a Monday, a
whole number. A bad value here is exit 2 from argparse itself, and the database is never
opened."""

from __future__ import annotations

import argparse
from datetime import date, datetime

from ..db.ids import DIGITS, LIMIT
from ..verdicts import BadInput
from ..week.time import OutOfRange, in_range
from ..week.time.days import FIRST_DAY, LAST_DAY


def instant(text: str) -> datetime:
    """An ISO 8601 instant with an offset or ``Z``; a naive time is refused, because the
    same wall time names different instants in the pub's zone and on the operator's."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no offset: give the instant with Z or +HH:MM") from None
    try:  # year 1 at +14:00 is before UTC's first day: bad input, not a traceback later
        return in_range(value)
    except OutOfRange as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def wall(text: str) -> datetime:
    """An ISO 8601 date and time on the pub's wall clock (no offset: the zone is the pub's,
    known once the database is open) or an instant with an offset; the pub's zone is
    applied by the command (:func:`pubsched.cli.commands.weeks.cmd_week_action`)."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a date and time: {text!r} (such as 2026-12-02T20:00, the pub's time)"
        ) from None
    if value.tzinfo is not None:
        try:
            return in_range(value)
        except OutOfRange as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if not FIRST_DAY <= value.date() <= LAST_DAY:
        raise argparse.ArgumentTypeError(f"{text!r} is too near the calendar's edge")
    return value


def week(text: str) -> str:
    """The Monday's ISO date (anything else is bad input before the database is opened)."""
    from ..week.runs import week_key

    try:
        return week_key(text)
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def day(text: str) -> date:
    """A calendar date ``YYYY-MM-DD`` (a report's range)."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"a date is YYYY-MM-DD, got {text!r}") from None


def whole(text: str) -> int:
    """A whole number a row or a count can be (ids are 64-bit integers: :mod:`..db.ids`);
    a longer one would reach the database as an error, not as "no such"."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if abs(value) >= LIMIT:
        raise argparse.ArgumentTypeError(f"{text!r} is too big to name anything (at most "
                                         f"{DIGITS} digits)")
    return value


def whole_or_none(text: str) -> int | None:
    """``--max-shifts N|none``: ``none`` (any case) clears the maximum."""
    return None if text.strip().lower() == "none" else whole(text)
