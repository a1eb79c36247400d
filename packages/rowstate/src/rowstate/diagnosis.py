"""What the inspector reports: one row seen whole (:class:`RowReport`), and the rows of a
binding that are stuck (:class:`StuckReport`).

Plain data, like :mod:`rowstate.results`: the core's diagnosis part
(:mod:`rowstate.core.diagnose`) builds them from reads, and a front end (``rowstate
inspect``/``rowstate stuck``, an admin page, a health check) renders them. Every time is
an aware datetime as the database read it, and every age is in seconds, measured against
the database's clock read in the same unit (``now``), not the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from .results import EdgeCheck, Event


class LeaseView(NamedTuple):
    """The row's lease of a side-effecting edge. ``expired``: set and past its TTL, so any
    edge may move the row and its own kind may reclaim it (``core.rules.lease_expired``,
    the very check the writes read)."""

    held: bool
    kind: str | None
    holder: str | None
    token: int | None
    at: datetime | None
    age: float | None
    ttl: float
    expired: bool
    error: str | None = None
    failed_at: datetime | None = None


class ClaimView(NamedTuple):
    """The row's finalization claim; ``expired``: held and past its TTL (another holder
    may take it over)."""

    held: bool
    holder: str | None
    scope: str | None
    token: int | None
    at: datetime | None
    age: float | None
    ttl: float
    expired: bool


class TimerView(NamedTuple):
    """One timed edge of the row. ``overdue``: in the edge's from-state and past its due
    column; ``fires_now``: ``fire_due``'s own query would pick it now; ``blocked``: the
    reasons it would not (a live lease, a guard, NOT_DUE, ...)."""

    edge: str
    column: str
    due: datetime | None
    overdue: bool
    fires_now: bool
    blocked: tuple[str, ...]


class NoticeView(NamedTuple):
    """One once-per-row notice: when it is due, whether it was sent, whether it is owed."""

    name: str
    column: str
    due: datetime | None
    sent_at: datetime | None
    owed_now: bool
    blocked: tuple[str, ...]


class RowReport(NamedTuple):
    """One row as the inspector sees it, read in one read-only unit."""

    machine: str
    table: str
    key: tuple[Any, ...]
    state: str | None
    now: datetime
    row: Mapping[str, Any]
    lease: LeaseView | None  # None: the binding has no lease
    finalization: ClaimView | None  # None: the binding has no finalization claim
    edges: tuple[EdgeCheck, ...]
    timers: tuple[TimerView, ...]
    notices: tuple[NoticeView, ...]
    events: tuple[Event, ...]  # the last ones, oldest first
    events_total: int  # how many the row has (``events`` may be the tail of them)
    has_events: bool  # the binding has an events table


class StuckRow(NamedTuple):
    """One stuck thing: the row's key, the time it started (the lease's claim, the claim's,
    the due time, the event's creation), how many seconds ago that was, and the group's
    details (the lease kind, the timer's edge, the event's id, ...)."""

    key: tuple[Any, ...]
    at: datetime | None
    age: float | None
    detail: Mapping[str, Any]


class StuckGroup(NamedTuple):
    """One kind of stuck: how many there are (``total``) and the first of them, oldest
    first."""

    name: str
    total: int
    rows: tuple[StuckRow, ...]


class StuckReport(NamedTuple):
    """The stuck rows of one binding: expired leases, overdue timers, finalization claims
    past their TTL and, when ``undelivered`` (the binding is relayed, or the caller asked),
    events older than ``older`` seconds that no relay delivered. ``groups`` holds the
    groups the binding can have (a lease, timers, a claim, undelivered events counted),
    empty or not."""

    machine: str
    table: str
    now: datetime
    older: float
    limit: int
    groups: tuple[StuckGroup, ...]
    undelivered: bool = False  # the undelivered events were counted (``unrelayed_events``)

    @property
    def total(self) -> int:
        return sum(g.total for g in self.groups)

    def group(self, name: str) -> StuckGroup:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)


#: the groups of a :class:`StuckReport`, in the order they are listed
STUCK_GROUPS = ("expired_leases", "overdue_timers", "expired_claims", "unrelayed_events")
