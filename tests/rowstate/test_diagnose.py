"""The diagnosis as an application calls it (``lc.do(lc.core.inspect(...))``,
``lc.do(lc.core.stuck())``), on the four backends: stale facts written through the engine
with a clock an hour in the past, read by a lifecycle on the database's clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from rowstate import ValidationError
from support.engine import JOBS, TICKETS, Backend, Clock, refused_before_io


def test_stuck_and_inspect_read_what_the_writes_left(backend: Backend) -> None:
    clock = Clock(Clock().now.replace(year=2025))  # long ago: every lease is stale now
    then, now = backend.make(JOBS, clock=clock), backend.make(JOBS)
    tickets_then, tickets = backend.make(TICKETS, clock=clock), backend.make(TICKETS)
    for key in ("dead", "live"):
        then.create(key)
        then.transition(key, "READY")
    assert then.claim("dead", "start", holder="h1").claimed
    assert now.claim("live", "start", holder="h2").claimed
    then.create("fin")
    assert then.claim_finalization("fin", "f1", "s1").claimed
    tickets_then.create("late", expires_at=clock.now + timedelta(minutes=5))
    tickets_then.create("early", expires_at=clock.now + timedelta(days=3650))

    report = now.do(now.core.stuck())
    assert report.machine == "job" and report.table == "jobs"
    leases = report.group("expired_leases")
    assert [r.key for r in leases.rows] == [("dead",)] and leases.total == 1
    assert leases.rows[0].detail["holder"] == "h1" and leases.rows[0].age > 86400
    assert [r.key for r in report.group("expired_claims").rows] == [("fin",)]
    # JOBS does not say a relay delivers its events: they are history, not stuck ...
    assert not report.undelivered
    assert [g.name for g in report.groups] == ["expired_leases", "expired_claims"]
    # ... unless the caller asks
    asked = now.do(now.core.stuck(undelivered=True))
    assert asked.undelivered and [r.key for r in asked.group("expired_leases").rows] == [
        ("dead",)]
    events = asked.group("unrelayed_events")
    assert events.total == 5 and {r.key for r in events.rows} == {("dead",), ("live",),
                                                                   ("fin",)}
    assert asked.total == report.total + 5
    # a relayed binding counts them unasked, and leaves them out when asked to
    relayed = backend.make(replace(JOBS, relayed=True))
    relayed_events = relayed.do(relayed.core.stuck()).group("unrelayed_events")
    assert [r.detail["id"] for r in relayed_events.rows] == [r.detail["id"]
                                                             for r in events.rows]
    left_out = relayed.do(relayed.core.stuck(undelivered=False))
    assert not left_out.undelivered and left_out.total == report.total
    with pytest.raises(KeyError):
        report.group("overdue_timers")  # JOBS has no timer
    timers = tickets.do(tickets.core.stuck(older=0)).group("overdue_timers")
    assert [(r.key, r.detail["edge"]) for r in timers.rows] == [(("late",), "expire")]

    row = now.do(now.core.inspect("dead", events=1))
    assert row is not None and row.state == "READY" and row.key == ("dead",)
    assert row.lease is not None and row.lease.expired and row.lease.holder == "h1"
    assert [e.to_state for e in row.events] == ["READY"] and row.events_total == 2
    live = now.do(now.core.inspect("live"))
    assert live is not None and live.lease is not None
    assert live.lease.held and not live.lease.expired
    assert now.do(now.core.inspect("nobody")) is None
    late = tickets.do(tickets.core.inspect("late"))
    assert late is not None
    assert [(t.edge, t.overdue, t.fires_now) for t in late.timers] == [
        ("expire", True, True), ("escalate", False, False)]
    assert late.row["expires_at"] == clock.now + timedelta(minutes=5)  # a datetime on both

    # what fire_due moves is stuck no more: the report reads fire_due's own query
    assert tickets.fire_due().applied == 1
    assert tickets.do(tickets.core.stuck()).group("overdue_timers").total == 0


@refused_before_io
def test_bad_arguments_raise_before_any_io(backend: Backend) -> None:
    lc = backend.make(JOBS)
    no_events = backend.make(replace(JOBS, events=None))
    with backend.no_io():
        for bad in ({"older": -1}, {"older": "60"}, {"limit": 0}, {"limit": True},
                    {"undelivered": "yes"}):
            with pytest.raises(ValidationError):
                lc.do(lc.core.stuck(**bad))
        with pytest.raises(ValidationError, match="no events table"):
            no_events.do(no_events.core.stuck(undelivered=True))
        with pytest.raises(ValidationError):
            lc.do(lc.core.inspect("k", events=-1))
        with pytest.raises(ValidationError):
            lc.do(lc.core.inspect(None))
