"""Lanes (rowstate.core.lane) against the general path: the same moves, the same answers.

A plain move (a key, a target, from-states, perhaps an owner) runs on its lane; the same
move with ``payload={}`` takes the general path (values dict, generator, explained CAS).
Two rows get the same random history, one through each, on every backend: every result
(applied or refused, reasons, states, the row as written, the event) must match, with and
without an events table. Refusals cover STATE_MISMATCH, RECORD_NOT_FOUND, NOT_OWNER, a
several-state move whose guess misses, and a leased edge's finalize inside run().
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rowstate import NOW, ActiveLease, Binding, Edge, Machine, RowstateError, ValidationError
from rowstate.core.lane import WINDOW
from support.engine import JOBS, Backend, Clock, on, refused_before_io

STATES = ("NEW", "READY", "RUNNING", "DONE", "FAILED")
JOBS_EV = dataclasses.replace(JOBS, table="jobs_lanes_ev", events="jobs_lanes_ev_events")
JOBS_PLAIN = dataclasses.replace(JOBS, table="jobs_lanes", events=None)
# no lease, no finalization claim: a one-state move is checked for its state only, and its
# refusal is explained by the lane itself (Lane.refused)
PURE = Machine("pure_job", states=list(STATES), initial="NEW",
               edges=[Edge("prepare", "NEW", "READY"), Edge("run", "READY", "RUNNING"),
                      Edge("cancel", "READY", "FAILED"), Edge("finish", "RUNNING", "DONE"),
                      Edge("crash", "RUNNING", "FAILED"), Edge("retry", "FAILED", "READY")])
PURE_JOBS = Binding(PURE, table="jobs_lanes_pure", key=("id",), owner="owner",
                    version="version", columns=("status", "finished_at"), events=None,
                    on_enter={"DONE": {"finished_at": NOW, "status": "done"}})
TARGETS = ("READY", "DONE", "FAILED", "RUNNING")  # RUNNING: leased but in PURE_JOBS
FROMS: tuple[Any, ...] = (None, "NEW", "READY", "RUNNING", "FAILED", ("READY", "RUNNING"),
                          ("RUNNING", "READY"))
_ids = itertools.count()

move = st.tuples(st.sampled_from(TARGETS), st.sampled_from(FROMS),
                 st.sampled_from((None, "alice", "bob")), st.booleans())
history = st.lists(move, min_size=1, max_size=12)

# columns that differ between the twin rows by construction
_OWN = ("id", "finished_at")


def _answer(call: Any, *args: Any, **kwargs: Any) -> Any:
    """The result, or the error a move the machine lacks raises (before any I/O)."""
    try:
        return call(*args, **kwargs)
    except RowstateError as exc:
        return exc


def _same(result: Any) -> tuple[Any, ...]:
    if isinstance(result, Exception):
        return (type(result), str(result))
    row = None if result.row is None else {k: v for k, v in result.row.items()
                                           if k not in _OWN}
    event = None
    if result.event is not None:
        e = result.event
        event = (e.machine, e.edge, e.from_state, e.to_state, e.owner, e.data, e.version,
                 e.id is None)
    return (result.applied, result.reason, tuple(result.reasons), result.previous,
            result.state, row, event)


def _twins(backend: Backend, binding: Binding, owner: str | None) -> tuple[Any, str, str]:
    lc = backend.make(binding)
    n = next(_ids)
    lane_key, general_key = f"lane-{n}", f"general-{n}"
    for key in (lane_key, general_key):
        backend.seed(binding, id=key, state="NEW", owner=owner)
    return lc, lane_key, general_key


@on()
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.parametrize("binding", [JOBS_PLAIN, JOBS_EV, PURE_JOBS],
                         ids=["leased", "leased-events", "state-only"])
@given(moves=history, row_owner=st.sampled_from((None, "alice")))
def test_a_lane_answers_as_the_general_path(backend: Backend, moves: list[Any],
                                            binding: Binding, row_owner: str | None) -> None:
    lc, lane_key, general_key = _twins(backend, binding, row_owner)
    for to, from_, owner, missing in moves:
        keys = ("nobody", "nobody") if missing else (lane_key, general_key)
        on_lane = _answer(lc.transition, keys[0], to, from_=from_, owner=owner)
        general = _answer(lc.transition, keys[1], to, from_=from_, owner=owner, payload={})
        assert _same(on_lane) == _same(general), (to, from_, owner)
        if isinstance(on_lane, Exception) or not on_lane.applied or missing:
            continue
        assert on_lane.event is not None and on_lane.event.key == (lane_key,)
        if binding.events:  # the event returned is the row written (on SQLite, its time
            stored = lc.history(lane_key)[-1]  # too: the store's clock, read once)
            assert on_lane.event.id == stored.id
            if backend.db == "sqlite":
                assert on_lane.event.at == stored.at
    assert lc.get(lane_key)["version"] == lc.get(general_key)["version"]
    if binding.events:
        lane_edges = [(e.edge, e.from_state, e.to_state) for e in lc.history(lane_key)]
        general_edges = [(e.edge, e.from_state, e.to_state) for e in lc.history(general_key)]
        assert lane_edges == general_edges


@on()
def test_a_guess_that_misses_settles_from_the_row_it_read(backend: Backend) -> None:
    """READY|RUNNING -> FAILED is guessed from the state it last left; a row in the other
    state costs the refused guess and the read, then lands from the state the read saw."""
    lc, key, other = _twins(backend, JOBS_PLAIN, None)
    assert lc.transition(key, "READY", from_="NEW").applied
    assert lc.transition(key, "FAILED", from_=("READY", "RUNNING")).applied  # guess: READY
    assert lc.transition(other, "READY", from_="NEW").applied

    def to_running(lease: ActiveLease) -> None:
        return None

    assert lc.run(other, "start", to_running).applied
    before = backend.statements
    moved = lc.transition(other, "FAILED", from_=("READY", "RUNNING"))
    assert (moved.applied, moved.previous, moved.state) == (True, "RUNNING", "FAILED")
    assert moved.event is not None and moved.event.edge == "crash"
    assert backend.statements - before == 3  # the missed guess, the read, the write


@on()
def test_a_finalize_on_its_lane_is_fenced(backend: Backend) -> None:
    """A finalize is a lane: a zombie's finalize (its lease taken over) is refused as
    LEASE_LOST, and the second holder's lands."""
    clock = Clock()
    lc = backend.make(JOBS_PLAIN, clock=clock)  # lease ttl: 60 s
    key = f"fenced-{next(_ids)}"
    backend.seed(JOBS_PLAIN, id=key, state="READY")
    first = lc.claim(key, "start", holder="zombie")
    clock.advance(61)
    second = lc.claim(key, "start", holder="second")
    assert second.claimed and second.token != first.token
    zombie = lc.finalize(key, first)
    assert (zombie.applied, zombie.reason) == (False, "LEASE_LOST")
    landed = lc.finalize(key, second)
    assert (landed.applied, landed.previous, landed.state) == (True, "READY", "RUNNING")


# -- returning= ----------------------------------------------------------------------------


@on()
def test_returning_sends_back_only_the_named_columns(backend: Backend) -> None:
    """A write's row holds what the caller named, plus the key, the state and the version
    the event reads; the statement itself sends no more (one-state moves, claims)."""
    lc = backend.make(JOBS_PLAIN)
    key = f"ret-{next(_ids)}"
    backend.seed(JOBS_PLAIN, id=key, state="NEW", priority=3)
    moved = lc.transition(key, "READY", from_="NEW", returning=("priority",))
    assert moved.applied and moved.event is not None and moved.event.version == 1
    assert dict(moved.row) == {"id": key, "state": "READY", "version": 1, "priority": 3}
    everything = lc.transition(key, "FAILED", from_="READY")
    assert set(everything.row) == set(lc.get(key))  # the default: every column
    refused = lc.transition(key, "DONE", from_="RUNNING", returning=())
    assert (refused.applied, refused.reason) == (False, "STATE_MISMATCH")
    assert set(refused.row) == set(lc.get(key))  # a refusal shows the row as it is

    assert lc.transition(key, "READY", from_="FAILED").applied
    claim = lc.claim(key, "start", returning=("priority",))
    assert claim.claimed and claim.fence == claim.token
    assert set(claim.row) == {"id", "state", "priority", "lease_token"}
    assert lc.finalize(key, claim).applied
    held = lc.claim_finalization(key, "job-1", "complete", returning=())
    assert held.claimed and set(held.row) == {"id", "state", "fin_token"}
    assert held.token == held.row["fin_token"]


@on()
def test_run_finalizes_with_the_event_s_columns_only(backend: Backend) -> None:
    """run()'s result has no row: its finalize sends back only what the event needs; the
    act's lease.row is whole by default and holds the named columns with returning=."""
    lc = backend.make(JOBS_PLAIN)
    key = f"run-{next(_ids)}"
    backend.seed(JOBS_PLAIN, id=key, state="READY", priority=7)
    seen: list[dict[str, Any]] = []

    def act(lease: ActiveLease) -> str:
        seen.append(dict(lease.row))
        return "done"

    ran = lc.run(key, "start", act)
    assert ran.applied and ran.event is not None and ran.event.version == 1
    assert set(seen[0]) == set(lc.get(key))
    assert lc.transition(key, "FAILED", from_="RUNNING").applied
    assert lc.transition(key, "READY", from_="FAILED").applied
    ran = lc.run(key, "start", act, returning=("priority",))
    assert ran.applied and seen[1]["priority"] == 7 and "status" not in seen[1]


@refused_before_io
def test_a_bad_returning_is_refused_before_any_io(backend: Backend) -> None:
    lc = backend.make(JOBS_PLAIN)
    key = f"bad-{next(_ids)}"
    backend.seed(JOBS_PLAIN, id=key, state="NEW")
    with backend.no_io():
        for bad in ("priority", ("no_such_column",), (1,), [["id"]]):
            with pytest.raises(ValidationError):
                lc.transition(key, "READY", from_="NEW", returning=bad)
            with pytest.raises(ValidationError):
                lc.claim(key, "start", returning=bad)
    assert lc.get(key)["state"] == "NEW"


# -- contended lanes (PostgreSQL: the write and its read in one statement) -----------------


def _contend(lc: Any, key: str) -> None:
    """Refusals enough for the lane to send its write and read as one statement."""
    for _ in range(WINDOW):
        assert not lc.transition(key, "DONE", from_="RUNNING").applied


@on("postgres")
def test_a_contended_lane_answers_in_one_statement(backend: Backend) -> None:
    lc = backend.make(PURE_JOBS)
    key, other = f"hot-{next(_ids)}", f"hot-{next(_ids)}"
    for k in (key, other):
        backend.seed(PURE_JOBS, id=k, state="NEW")
    _contend(lc, key)
    before = backend.statements
    refused = lc.transition(key, "DONE", from_="RUNNING")
    general = lc.transition(key, "DONE", from_="RUNNING", payload={})
    assert backend.statements - before == 1 + 2  # the combined one; the general path's two
    assert _same(refused) == _same(general)
    missing = lc.transition("nobody", "DONE", from_="RUNNING")
    assert (missing.applied, missing.reason, missing.row) == (False, "RECORD_NOT_FOUND", None)
    before = backend.statements
    moved = lc.transition(key, "READY", from_="NEW")  # another lane: not contended
    assert moved.applied and backend.statements - before == 1
    for _ in range(2):
        assert lc.transition(key, "RUNNING", from_="READY").applied
        assert lc.transition(key, "FAILED", from_="RUNNING").applied
        assert lc.transition(key, "READY", from_="FAILED").applied
    assert lc.transition(key, "RUNNING", from_="READY").applied
    before = backend.statements
    done = lc.transition(key, "DONE", from_="RUNNING", returning=())
    assert done.applied and backend.statements - before == 1
    twin = lc.transition(other, "DONE", from_="RUNNING")  # the contended lane, refused
    assert (twin.reason, twin.state) == ("STATE_MISMATCH", "NEW")
    assert lc.get(key)["state"] == "DONE" and lc.get(key)["version"] == 9


@on("postgres-sync")
def test_a_contended_lane_that_waited_reads_the_row_again(backend: Backend) -> None:
    """The combined statement's read sees its snapshot: a write that waited for another
    writer and then found the row moved would see the row still in the from-state. The
    lane reads it again, and the refusal shows the state the other writer left."""
    lc = backend.make(PURE_JOBS)
    key = f"race-{next(_ids)}"
    backend.seed(PURE_JOBS, id=key, state="RUNNING")
    _contend(lc, f"{key}-none")
    with psycopg.connect(backend.where, autocommit=False) as rival:
        rival.execute("UPDATE jobs_lanes_pure SET state = 'FAILED', version = version + 1 "
                      "WHERE id = %s", (key,))
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(lc.transition, key, "DONE", from_="RUNNING")
            time.sleep(0.3)
            assert not waiting.done()  # blocked on the rival's row lock
            rival.commit()
            result = waiting.result(timeout=10)
    assert (result.applied, result.reason, result.state) == (False, "STATE_MISMATCH",
                                                              "FAILED")
