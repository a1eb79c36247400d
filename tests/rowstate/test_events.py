"""Events: one per applied move, written in the same atomic write (the audit history and a
transactional outbox), read back by ``history``, delivered by the relay at least once, in
order, with a stable id; published after commit when the binding has no events table.

The contrib stores run these by default (``@conformance``), because the store takes part:

* test_the_event_is_part_of_the_atomic_write: the move and its event in one of the
  store's transactions, rolled back together on a UNIQUE violation (error translation);
* test_the_relay_delivers_each_event_once_in_order: the relay's reads and marks, on the
  store;
* test_without_an_events_table_events_are_published_after_commit and
  test_async_publishers_after_commit: the commit hooks (published once the store's
  transaction committed);
* test_event_data_round_trips_whatever_json_it_is: the event's JSON as the store's driver
  reads it back (a Django cursor loads jsonb as text unless the store says otherwise).

The rest is the core's SQL and the relay's logic: ``-m contrib`` runs it on them too.
The bad calls are ``@refused_before_io``: one backend, no statement sent.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import uuid
from typing import Any

import pytest

from rowstate import DefinitionError, Event, ValidationError
from rowstate.contrib.nats import NatsPublisher
from support.engine import (
    JOBS,
    RUNS,
    Backend,
    Clock,
    conformance,
    events_of,
    on,
    refused_before_io,
)

JOBS_NO_OUTBOX = dataclasses.replace(JOBS, events=None)
# a second tenant's jobs: the same machine, its own events table (its ids start at 1 too)
JOBS_B = dataclasses.replace(JOBS, table="jobs_b", events="events_b")


def walk(jobs: Any, key: str) -> None:
    """prepare (as the owner, ann), a refusal, cancel, retry, another refusal: 3 applied."""
    applied = [
        jobs.transition(key, "READY", owner="ann", data={"step": 1}).applied,
        jobs.transition(key, "DONE", from_="RUNNING").applied,
        jobs.transition(key, "FAILED", data={"why": "cancelled"}).applied,
        jobs.transition(key, "READY", data=["retry", 2]).applied,
        jobs.transition(key, "READY", from_="NEW").applied,
    ]
    assert applied == [True, False, True, True, False]


def test_one_event_per_applied_move_none_on_refusal(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW", owner="ann")
    walk(jobs, "j1")
    rows = events_of(backend, "job")
    assert [(r[2], r[3], r[4]) for r in rows] == [
        ("prepare", "NEW", "READY"), ("cancel", "READY", "FAILED"), ("retry", "FAILED", "READY")]
    assert {r[1] for r in rows} == {'["j1"]'}
    assert [r[7] for r in rows] == [1, 2, 3]  # the version the move wrote


def test_history_returns_a_rows_events_in_order(backend: Backend) -> None:
    clock = Clock()
    jobs = backend.make(JOBS, clock=clock)
    backend.seed(JOBS, id="j1", state="NEW", owner="ann")
    backend.seed(JOBS, id="j2", state="NEW")
    walk(jobs, "j1")
    clock.advance(5)
    assert jobs.transition("j2", "READY").applied
    assert jobs.run("j1", "start", lambda lease: True, data={"run": 1}).applied

    history = jobs.history("j1")
    assert [(e.edge, e.from_state, e.to_state) for e in history] == [
        ("prepare", "NEW", "READY"), ("cancel", "READY", "FAILED"),
        ("retry", "FAILED", "READY"), ("start", "READY", "RUNNING")]
    assert [e.data for e in history] == [{"step": 1}, {"why": "cancelled"}, ["retry", 2],
                                         {"run": 1}]
    assert [e.owner for e in history] == ["ann", None, None, None]
    assert [e.version for e in history] == [1, 2, 3, 4]
    assert all(e.machine == "job" and e.key == ("j1",) for e in history)
    assert [e.at for e in history] == [clock.now - _seconds(5)] * 3 + [clock.now]
    ids = [e.id for e in history]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert [e.edge for e in jobs.history("j2")] == ["prepare"]
    assert jobs.history("nobody") == []


def _seconds(n: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=n)


@conformance
def test_the_event_is_part_of_the_atomic_write(backend: Backend) -> None:
    runs = backend.make(RUNS)
    backend.seed(RUNS, week_of="w1")
    backend.seed(RUNS, week_of="w2")
    assert runs.transition("w1", "COLLECTING").applied
    # w2's write fails inside the database (the UNIQUE invariant): its event goes with it
    assert runs.transition("w2", "COLLECTING", data={"lost": True}).reason == "INVARIANT"
    assert runs.history("w2") == []
    assert [e.key for e in runs.history("w1")] == [("w1",)]
    assert backend.count("rowstate_events") == 1


@refused_before_io
def test_history_needs_an_events_table(backend: Backend) -> None:
    jobs = backend.make(JOBS_NO_OUTBOX)
    with backend.no_io(), pytest.raises(ValidationError, match="no events table"):
        jobs.history("j1")


# -- the relay -----------------------------------------------------------------------------


@conformance
def test_the_relay_delivers_each_event_once_in_order(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="a", state="NEW", owner="ann")
    backend.seed(JOBS, id="b", state="NEW", owner="ann")
    got: list[Event] = []
    relay = backend.relay([got.append])
    assert relay.deliver() == 0

    walk(jobs, "a")
    walk(jobs, "b")
    assert relay.deliver() == 6
    assert relay.deliver() == 0  # marked delivered
    assert [e.id for e in got] == [e.id for e in jobs.history("a") + jobs.history("b")]
    for key in ("a", "b"):
        mine = [e for e in got if e.key == (key,)]
        assert [e.version for e in mine] == [1, 2, 3]
        assert [e.to_state for e in mine] == ["READY", "FAILED", "READY"]
    assert relay.namespace and all(e.source == relay.namespace for e in got)
    assert all(e.stable_id == f"{relay.namespace}:job:{e.id}" for e in got)
    assert got[0].data == {"step": 1} and got[0].owner == "ann"

    assert jobs.transition("a", "FAILED").applied
    assert relay.drain() == 1
    assert [e.to_state for e in got[6:]] == ["FAILED"]


def test_a_failing_publisher_stops_the_pass_and_is_retried(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW", owner="ann")
    walk(jobs, "j1")
    seen: list[int | None] = []
    fail_on: set[int] = set()

    def flaky(event: Event) -> None:
        seen.append(event.id)
        if event.version in fail_on:
            fail_on.discard(event.version)
            raise ConnectionError("broker down")

    fail_on.add(2)
    relay = backend.relay([flaky], batch=100)
    with pytest.raises(ConnectionError):
        relay.deliver()
    first, second, third = (e.id for e in jobs.history("j1"))
    assert seen == [first, second]  # the pass stopped at the failing event
    assert backend.count("rowstate_events", "delivered_at IS NULL") == 2

    assert relay.deliver() == 2
    assert seen == [first, second, second, third]  # at least once, in order, same ids
    assert relay.deliver() == 0


def test_every_publisher_sees_every_event(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW", owner="ann")
    walk(jobs, "j1")
    one: list[Event] = []
    two: list[Event] = []
    assert backend.relay([one.append, two.append]).drain() == 3
    assert one == two and len(one) == 3


@on("async")
def test_the_async_relay_awaits_async_publishers(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW", owner="ann")
    walk(jobs, "j1")
    got: list[Event] = []

    async def publish(event: Event) -> None:
        got.append(event)

    assert backend.relay([publish]).drain() == 3
    assert [e.version for e in got] == [1, 2, 3]


@on("async")
def test_nats_jetstream_receives_each_event_once(backend: Backend, nats_url: str) -> None:
    import nats

    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW", owner="ann")
    walk(jobs, "j1")
    stream = f"RS_TEST_{uuid.uuid4().hex[:12].upper()}"
    prefix = f"rstest_{uuid.uuid4().hex[:12]}"
    nc = backend.wait(nats.connect(nats_url, connect_timeout=5))
    try:
        js = nc.jetstream()
        add_stream(backend, js, stream, f"{prefix}.>")
        try:
            relay = backend.relay([NatsPublisher(js, prefix=prefix)])
            assert relay.drain() == 3
            # a crash between the publish and the mark: the relay delivers everything again,
            # and JetStream drops the duplicates by their Nats-Msg-Id
            backend.execute("UPDATE rowstate_events SET delivered_at = NULL")
            assert relay.drain() == 3
            info = backend.wait(js.stream_info(stream))
            assert info.state.messages == 3
            history = jobs.history("j1")
            for seq, event in enumerate(history, start=1):
                msg = backend.wait(js.get_msg(stream, seq))
                assert msg.subject == f"{prefix}.job"
                assert msg.headers is not None
                # history's events come from the table, not through a relay: no namespace
                delivered = event._replace(source=relay.namespace)
                assert msg.headers["Nats-Msg-Id"] == delivered.stable_id
                assert delivered.stable_id == f"{relay.namespace}:job:{event.id}"
                body = json.loads(msg.data)
                assert body["id"] == delivered.stable_id
                assert (body["key"], body["edge"], body["to"]) == (["j1"], event.edge,
                                                                   event.to_state)
                assert body["data"] == event.data and body["version"] == seq
        finally:
            backend.wait(js.delete_stream(stream))
    finally:
        backend.wait(nc.close())


def add_stream(backend: Backend, js: Any, stream: str, subjects: str) -> None:
    """The test's stream on the shared server, asked again after a server error: once in
    CI the machine's nats-server answered "error creating store for stream" (500, err_code
    10049) to a fresh name, a fault of its disk store, not of the relay under test."""
    from nats.js.errors import ServerError

    for attempt in range(3):
        try:
            backend.wait(js.add_stream(name=stream, subjects=[subjects]))
            return
        except ServerError:
            if attempt == 2:
                raise
            time.sleep(0.5)


INJECTION = 'rowstate_events" ; DROP TABLE jobs; --'


@refused_before_io
def test_the_relay_checks_its_table_name_as_the_binding_does(backend: Backend) -> None:
    """The name is pasted into SQL text: a name that is not plain never reaches it."""
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    assert jobs.transition("j1", "READY").applied
    with backend.no_io():
        for bad in (INJECTION, 'ev"; DROP TABLE jobs; --', "a.b.c", "", "x.", "1ev", "ev ev"):
            with pytest.raises(DefinitionError, match="relay table"):
                backend.relay([], table=bad).deliver()
    assert backend.count("jobs") == 1 and backend.count("rowstate_events") == 1
    assert backend.relay([], table="rowstate_events").drain() == 1


def test_stable_ids_are_unique_across_events_tables(backend: Backend) -> None:
    """Two tables' events share machine and ids; their stable ids differ, stay the same
    for a relay built again on the same table, and change when the table is recreated."""
    a, b = backend.make(JOBS), backend.make(JOBS_B)
    backend.seed(JOBS, id="j1", state="NEW", owner="ann")
    backend.seed(JOBS_B, id="j1", state="NEW", owner="ann")
    walk(a, "j1")
    walk(b, "j1")
    got_a: list[Event] = []
    got_b: list[Event] = []
    relay_a = backend.relay([got_a.append])
    relay_b = backend.relay([got_b.append], table="events_b")
    assert relay_a.drain() == relay_b.drain() == 3
    assert [e.id for e in got_a] == [e.id for e in got_b]  # the same ids...
    assert not {e.stable_id for e in got_a} & {e.stable_id for e in got_b}  # ...told apart
    backend.execute("UPDATE rowstate_events SET delivered_at = NULL")
    again: list[Event] = []
    assert backend.relay([again.append]).drain() == 3  # a restarted relay: the same ids
    assert [e.stable_id for e in again] == [e.stable_id for e in got_a]
    given: list[Event] = []
    backend.execute("UPDATE rowstate_events SET delivered_at = NULL")
    assert backend.relay([given.append], namespace="eu-1").drain() == 3
    assert [e.stable_id for e in given] == [f"eu-1:job:{e.id}" for e in got_a]
    with pytest.raises(DefinitionError, match="namespace"):
        backend.relay([], namespace="")

    backend.execute("DROP TABLE rowstate_events")  # recreated: its ids start again at 1
    jobs_c = dataclasses.replace(JOBS, table="jobs_c")  # its DDL creates the table again
    c = backend.make(jobs_c)
    backend.seed(jobs_c, id="j2", state="NEW", owner="ann")
    walk(c, "j2")
    fresh: list[Event] = []
    assert backend.relay([fresh.append]).drain() == 3
    assert [e.id for e in fresh] == [e.id for e in got_a]
    assert not {e.stable_id for e in fresh} & {e.stable_id for e in got_a}


@on("async")
def test_two_events_tables_into_one_jetstream_stream(backend: Backend, nats_url: str) -> None:
    """Both tables' events reach the stream, and each once: the stream deduplicates a
    redelivery but not the other table's event with the same machine and id."""
    import nats

    a, b = backend.make(JOBS), backend.make(JOBS_B)
    for binding, lc in ((JOBS, a), (JOBS_B, b)):
        backend.seed(binding, id="j1", state="NEW", owner="ann")
        walk(lc, "j1")
    stream = f"RS_TEST_{uuid.uuid4().hex[:12].upper()}"
    prefix = f"rstest_{uuid.uuid4().hex[:12]}"
    nc = backend.wait(nats.connect(nats_url, connect_timeout=5))
    try:
        js = nc.jetstream()
        add_stream(backend, js, stream, f"{prefix}.>")
        try:
            relays = [backend.relay([NatsPublisher(js, prefix=prefix)]),
                      backend.relay([NatsPublisher(js, prefix=prefix)], table="events_b")]
            assert [r.drain() for r in relays] == [3, 3]
            backend.execute("UPDATE rowstate_events SET delivered_at = NULL")
            backend.execute("UPDATE events_b SET delivered_at = NULL")
            assert [r.drain() for r in relays] == [3, 3]  # redelivered: deduplicated
            info = backend.wait(js.stream_info(stream))
            assert info.state.messages == 6
            ids = []
            for seq in range(1, 7):
                msg = backend.wait(js.get_msg(stream, seq))
                assert msg.headers is not None
                ids.append(msg.headers["Nats-Msg-Id"])
                assert json.loads(msg.data)["id"] == ids[-1]
            expected = [f"{r.namespace}:job:{e.id}" for r, lc in zip(relays, (a, b), strict=True)
                        for e in lc.history("j1")]
            assert ids == expected and len(set(ids)) == 6
        finally:
            backend.wait(js.delete_stream(stream))
    finally:
        backend.wait(nc.close())


# -- no outbox: published after commit -----------------------------------------------------


@conformance
def test_without_an_events_table_events_are_published_after_commit(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("publisher down")

    jobs = backend.make(JOBS_NO_OUTBOX, publishers=[got.append, broken])
    backend.seed(JOBS, id="j1", state="NEW")

    with caplog.at_level(logging.ERROR, logger="rowstate"):
        res = jobs.transition("j1", "READY", data={"x": 1})
    assert res.applied  # committed: a failing publisher cannot undo it
    assert "publisher failed" in caplog.text
    assert jobs.transition("j1", "DONE", from_="RUNNING").reason == "STATE_MISMATCH"
    assert jobs.run("j1", "start", lambda lease: True).applied
    assert jobs.transition("j1", "DONE", payload={"result": "r"}).applied

    assert [(e.edge, e.from_state, e.to_state) for e in got] == [
        ("prepare", "NEW", "READY"), ("start", "READY", "RUNNING"), ("finish", "RUNNING", "DONE")]
    assert got[0].data == {"x": 1} and got[0].key == ("j1",)
    assert [e.version for e in got] == [1, 2, 3]
    assert all(e.id is None and e.stable_id == "" for e in got)
    assert jobs.state("j1") == "DONE"


def test_with_an_events_table_the_lifecycle_leaves_publishing_to_the_relay(
    backend: Backend,
) -> None:
    got: list[Event] = []
    jobs = backend.make(JOBS, publishers=[got.append])
    backend.seed(JOBS, id="j1", state="NEW")
    assert jobs.transition("j1", "READY").applied
    assert got == []
    assert backend.relay([got.append]).drain() == 1
    assert [e.edge for e in got] == ["prepare"]


@conformance
@on("async")
def test_async_publishers_after_commit(backend: Backend) -> None:
    got: list[Event] = []

    async def publish(event: Event) -> None:
        got.append(event)

    jobs = backend.make(JOBS_NO_OUTBOX, publishers=[publish])
    backend.seed(JOBS, id="j1", state="NEW")
    assert jobs.transition("j1", "READY").applied
    assert [e.to_state for e in got] == ["READY"]


DATA: list[Any] = ["hello", "123", '{"a": 1}', "", 7, 2.5, True, None, [], {"nested": ["x"]}]


@conformance
def test_event_data_round_trips_whatever_json_it_is(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    for i, data in enumerate(DATA):
        backend.seed(JOBS, id=f"j{i}", state="NEW")
        res = jobs.transition(f"j{i}", "READY", data=data)
        assert res.event is not None and res.event.data == data
        [event] = jobs.history(f"j{i}")
        assert (event.data, type(event.data)) == (data, type(data))
    got: list[Event] = []
    assert backend.relay([got.append]).drain() == len(DATA)
    assert [(e.data, type(e.data)) for e in got] == [(d, type(d)) for d in DATA]


def test_a_birth_without_an_events_table(backend: Backend) -> None:
    """create() on a binding without an outbox: its one statement returns the row and the
    clock, no event id (on PostgreSQL it read an id that was not there: IndexError)."""
    lc = backend.make(JOBS_NO_OUTBOX)
    born = lc.create("solo")
    assert born.applied and born.state == "NEW" and born.row is not None
    assert born.event is not None and born.event.id is None and born.event.at is not None
    assert lc.create("solo").reason == "RECORD_EXISTS"
