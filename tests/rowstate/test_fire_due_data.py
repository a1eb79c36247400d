"""``fire_due(data=...)``: the event data of every move a tick makes (an app records who
moved its rows: pubsched's ``{"by": "tick"}``), on every backend: the set-based pure timer
and the leased one alike; bad data is refused before any row moves."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rowstate import ActiveLease, ValidationError
from support.engine import TICKETS, Backend, Clock, refused_before_io


def test_every_move_of_a_tick_carries_its_data(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    past = clock.now - timedelta(seconds=1)
    backend.seed(TICKETS, id="a", state="OPEN", expires_at=past)
    backend.seed(TICKETS, id="b", state="OPEN", expires_at=past)
    backend.seed(TICKETS, id="c", state="OPEN", escalate_at=past)

    def act(lease: ActiveLease) -> str:
        return "paged"

    report = tickets.fire_due(acts={"escalate": act}, data={"by": "tick"})
    assert sorted((f.key[0], f.name, f.applied) for f in report.fired) == [
        ("a", "expire", True), ("b", "expire", True), ("c", "escalate", True)]
    for key, edge in (("a", "expire"), ("b", "expire"), ("c", "escalate")):
        assert [(e.edge, e.data) for e in tickets.history(key)] == [(edge, {"by": "tick"})]


def test_without_data_the_events_carry_none(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    backend.seed(TICKETS, id="a", state="OPEN", expires_at=clock.now)
    tickets.fire_due()
    assert [e.data for e in tickets.history("a")] == [None]


@refused_before_io
def test_bad_data_is_refused_before_any_row_moves(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    backend.seed(TICKETS, id="a", state="OPEN", expires_at=clock.now)
    with backend.no_io(), pytest.raises(ValidationError):
        tickets.fire_due(data={"by": object()})
    assert tickets.state("a") == "OPEN" and tickets.history("a") == []


def test_a_rows_birth_event_carries_its_data(backend: Backend) -> None:
    """``create``/``ensure`` (``data=``): who made the row, as a transition's event says
    who moved it; bad data is refused with no row made."""
    tickets = backend.make(TICKETS, clock=Clock())
    assert tickets.create("born", data={"by": "cli:ann"}).applied
    tickets.ensure("ensured", data={"by": "tick"})
    tickets.ensure("ensured", data={"by": "someone else"})  # exists: nothing new
    tickets.create("plain")
    assert [e.data for e in tickets.history("born")] == [{"by": "cli:ann"}]
    assert [e.data for e in tickets.history("ensured")] == [{"by": "tick"}]
    assert [e.data for e in tickets.history("plain")] == [None]
    with pytest.raises(ValidationError):
        tickets.create("bad", data={"by": object()})
    assert tickets.get("bad") is None
