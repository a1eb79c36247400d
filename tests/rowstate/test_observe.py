"""The observer: one start and one finish per public operation, with its outcome, reason and
round trips; a takeover and a fencing refusal named; an observer that raises breaks
nothing; no observer, no change. On the four backends."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest

from rowstate import ActiveLease, AsyncLifecycle, Binding, Lifecycle
from rowstate.errors import InvalidTransitionError
from rowstate.observe import OPERATIONS, Calling, Finish, Observation
from support.engine import JOBS, TICKETS, Backend, Clock, on


def observed(backend: Backend, binding: Binding, observer: Any,
             clock: Clock | None = None) -> Any:
    backend.make(binding)  # the table
    cls: Any = AsyncLifecycle if backend.is_async else Lifecycle
    return backend.blocking(cls(backend.store, binding, clock=clock, observer=observer))


def brief(o: Observation) -> tuple[Any, ...]:
    return o.operation, o.edge, o.to, o.outcome, o.reason, o.round_trips


def test_one_observation_per_operation(backend: Backend) -> None:
    seen: list[Observation] = []
    jobs = observed(backend, JOBS, Calling(seen.append))

    def last(*expected: Any) -> None:
        assert brief(seen[-1]) == expected
        assert seen[-1].machine == "job" and seen[-1].duration > 0

    jobs.create("a")
    last("create", None, "NEW", "applied", None, 1)
    jobs.create("a")
    assert seen[-1].outcome == "refused" and seen[-1].reason == "RECORD_EXISTS"
    jobs.transition("a", "READY")
    last("transition", "prepare", "READY", "applied", None, 1)  # the lane: one batch
    jobs.transition("a", "READY", from_="NEW")
    last("transition", None, "READY", "refused", "STATE_MISMATCH", 1)  # its read went along
    jobs.transition("nobody", "READY")
    last("transition", None, "READY", "refused", "RECORD_NOT_FOUND", 1)
    jobs.can_transition("a", "DONE")
    last("can_transition", None, "DONE", "read", "STATE_MISMATCH", 1)
    claim = jobs.claim("a", "start")
    assert seen[-1].takeover is False
    last("claim", "start", "RUNNING", "applied", None, 1)
    jobs.claim("a", "start")
    last("claim", "start", "RUNNING", "refused", "LEASE_HELD", 1)
    jobs.release("a", claim)
    last("release", "start", "RUNNING", "applied", None, 1)
    jobs.release("a", claim)
    last("release", "start", "RUNNING", "refused", "LEASE_LOST", 1)
    assert seen[-1].fenced
    claim = jobs.claim("a", "start")
    jobs.finalize("a", claim)
    last("finalize", "start", "RUNNING", "applied", None, 1)
    jobs.ensure("b")
    assert brief(seen[-1])[:4] == ("ensure", None, "NEW", "applied")
    jobs.transition_many("READY", keys=["b", "a"])
    last("transition_many", None, "READY", "applied", None, seen[-1].round_trips)
    jobs.transition_many("READY", keys=["a"])
    assert brief(seen[-1])[:5] == ("transition_many", None, "READY", "refused",
                                   "STATE_MISMATCH")
    got = jobs.claim_finalization("b", "h1", "s")
    assert got.claimed
    last("claim_finalization", None, None, "applied", None, 1)
    jobs.claim_finalization("b", "h2", "s")
    last("claim_finalization", None, None, "refused", "HELD_BY_OTHER", 1)
    jobs.release_finalization("b", "h1", "s")
    last("release_finalization", None, None, "applied", None, 1)
    for read in (lambda: jobs.get("a"), lambda: jobs.history("a"),
                 lambda: jobs.find(state="READY"), lambda: jobs.count(state="READY"),
                 lambda: jobs.enabled_edges("a")):
        read()
        assert seen[-1].outcome == "read" and seen[-1].round_trips >= 1
    assert jobs.state("a") == "RUNNING"  # state() reads through get()
    assert seen[-1].operation == "get"
    jobs.fire_due()
    last("fire_due", None, None, "read", None, 0)  # JOBS has no timers: no statement at all
    ops = {o.operation for o in seen}
    assert ops == set(OPERATIONS) - {"run"}
    assert all(o.takeover is False for o in seen)


def test_run_and_what_runs_inside_it(backend: Backend) -> None:
    """An act's own operation is observed by itself, nested inside the run's, each with its
    own round trips (the run's: the claim and the finalize)."""
    seen: list[Observation] = []
    jobs = observed(backend, JOBS, Calling(seen.append))
    backend.seed(JOBS, id="a", state="READY")
    jobs.create("b")
    inner = backend.raw(jobs)

    def act(lease: ActiveLease) -> Any:
        return inner.transition("b", "READY")  # awaited by the async driver

    seen.clear()
    assert jobs.run("a", "start", act).applied
    assert [brief(o) for o in seen] == [
        ("transition", "prepare", "READY", "applied", None, 1),
        ("run", "start", "RUNNING", "applied", None, 2)]
    assert seen[1].duration >= seen[0].duration


def test_a_takeover_and_the_zombies_refusal(backend: Backend) -> None:
    clock = Clock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    seen: list[Observation] = []
    jobs = observed(backend, JOBS, Calling(seen.append), clock=clock)
    backend.seed(JOBS, id="a", state="READY")
    zombie = jobs.claim("a", "start", holder="one")
    assert zombie.claimed and seen[-1].takeover is False
    clock.advance(61)  # JOBS' lease lives 60 s
    fresh = jobs.claim("a", "start", holder="two")
    assert fresh.claimed
    assert brief(seen[-1]) == ("claim", "start", "RUNNING", "applied", None, 1)
    assert seen[-1].takeover  # the row's lease read before it is not counted as its trip
    assert not jobs.finalize("a", zombie).applied
    assert (seen[-1].reason, seen[-1].fenced) == ("LEASE_LOST", True)
    assert jobs.finalize("a", fresh).applied and not seen[-1].fenced


def test_an_error_is_observed_and_raised(backend: Backend) -> None:
    seen: list[Observation] = []
    jobs = observed(backend, JOBS, Calling(seen.append))
    with pytest.raises(InvalidTransitionError):
        jobs.claim("a", "prepare")  # no side effect: not a leased edge
    assert brief(seen[-1]) == ("claim", "prepare", "READY", "error", "InvalidTransitionError", 0)


class Raising:
    def __init__(self, when: str) -> None:
        self.when = when
        self.calls = 0

    def start(self, operation: str, machine: str) -> Finish:
        self.calls += 1
        if self.when == "start":
            raise RuntimeError("observer down")
        return self.finish

    def finish(self, observation: Observation) -> None:
        raise RuntimeError("observer down")


@pytest.mark.parametrize("when", ["start", "finish"])
def test_a_raising_observer_breaks_nothing(backend: Backend, when: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    observer = Raising(when)
    jobs = observed(backend, JOBS, observer)
    with caplog.at_level(logging.ERROR, logger="rowstate"):
        assert jobs.create("a").applied
        assert jobs.transition("a", "READY", by="ann", note="ready").applied
        assert jobs.run("a", "start", lambda lease: True).applied
    assert jobs.state("a") == "RUNNING"
    assert observer.calls == 4
    assert sum("observer" in r.getMessage() for r in caplog.records) == 4
    moved = backend.make(JOBS)  # unobserved: read behind the observer's back
    assert [(e.to_state, e.by, e.note) for e in moved.history("a")][1] == (
        "READY", "ann", "ready")  # the observed call passed every argument on


def test_without_an_observer_nothing_is_wrapped(backend: Backend) -> None:
    jobs = backend.raw(backend.make(JOBS))
    assert jobs.observer is None and jobs.runner is jobs.store
    assert not set(OPERATIONS) & set(vars(jobs))  # the class's own methods, unwrapped
    with_one = observed(backend, JOBS, Calling(lambda o: None))
    assert set(OPERATIONS) <= set(vars(backend.raw(with_one)))


@on("postgres-sync", "postgres-async")
def test_round_trips_are_counted_per_call_at_once(backend: Backend) -> None:
    """Eight transitions of eight rows at once (threads released by a barrier on the sync
    twin, tasks gathered on the async one), one of them refused: each call counts its own
    batch, none another's."""
    seen: list[Observation] = []
    tickets = observed(backend, TICKETS, Calling(seen.append))
    for i in range(7):
        tickets.create(f"t{i}")
    seen.clear()
    keys = [f"t{i}" for i in range(8)]  # t7 has no row
    if backend.is_async:
        raw = backend.raw(tickets)

        async def all_at_once() -> list[Any]:
            return list(await asyncio.gather(*(raw.transition(k, "CLOSED") for k in keys)))

        results = backend.wait(all_at_once())
    else:
        barrier = threading.Barrier(len(keys))

        def one(key: str) -> Any:
            barrier.wait(timeout=30)
            return tickets.transition(key, "CLOSED")

        with ThreadPoolExecutor(len(keys)) as pool:
            results = list(pool.map(one, keys))
    assert [r.reason for r in results] == [None] * 7 + ["RECORD_NOT_FOUND"]
    assert sorted((o.outcome, o.reason, o.round_trips) for o in seen) == (
        [("applied", None, 1)] * 7 + [("refused", "RECORD_NOT_FOUND", 1)])


@on("sync")
def test_an_observed_operation_joins_the_unit_it_runs_in(backend: Backend) -> None:
    seen: list[Observation] = []
    jobs = observed(backend, JOBS, Calling(seen.append))
    jobs.create("a")
    with pytest.raises(RuntimeError), jobs.atomic():
        assert jobs.transition("a", "READY").applied
        raise RuntimeError("rolled back")
    assert jobs.state("a") == "NEW"  # the counting runner ran the write in the unit
    assert [brief(o)[:4] for o in seen[1:]] == [
        ("transition", "prepare", "READY", "applied"), ("get", None, None, "read")]


@on("sync")
def test_a_units_hold_and_fence(backend: Backend) -> None:
    """A unit of work runs its row checks on its own connection: they are observed as the
    core's operations they are, a refused fence a fencing refusal."""
    clock = Clock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    seen: list[Observation] = []
    jobs = observed(backend, JOBS, Calling(seen.append), clock=clock)
    backend.seed(JOBS, id="a", state="READY")
    with jobs.atomic() as tx:
        assert tx.hold("a", "READY").held
    assert brief(seen[-1]) == ("hold", None, None, "applied", None, 1)
    zombie = jobs.claim("a", "start")
    with jobs.atomic(fence=zombie) as tx:
        assert not tx.refused
    assert brief(seen[-1]) == ("fence", "start", None, "applied", None, 1)
    clock.advance(61)
    jobs.claim("a", "start")
    with jobs.atomic(fence=zombie) as tx:
        assert tx.refused == "LEASE_LOST"
    assert brief(seen[-1]) == ("fence", "start", None, "refused", "LEASE_LOST", 1)
    assert seen[-1].fenced
    with pytest.raises(InvalidTransitionError), jobs.atomic() as tx:
        tx.hold("a", "NOWHERE")  # no such state: refused before any I/O
    assert brief(seen[-1]) == ("hold", None, None, "error", "InvalidTransitionError", 0)


def _verdict_of(result: Any) -> tuple[Any, ...]:
    """What a result says, without what differs between two tables (event ids, times)."""
    if isinstance(result, tuple) and hasattr(result, "_fields"):
        fields = [f for f in ("applied", "claimed", "released", "allowed", "reason",
                              "reasons", "state", "previous") if f in result._fields]
        return tuple(getattr(result, f) for f in fields)
    if isinstance(result, dict):
        return (result.get("state"),)
    return (result,)


def test_an_observer_changes_no_result(backend: Backend) -> None:
    """A random history on two twin tables, one lifecycle observed and one not: every
    result alike, and every observation's outcome and reason the result's own."""
    rng = random.Random(21)
    seen: list[Observation] = []
    plain = backend.make(JOBS)
    twin = dataclasses.replace(JOBS, table="jobs_observed")
    watched = observed(backend, twin, Calling(seen.append))
    claims: dict[str, list[Any]] = {"plain": [], "watched": []}
    states = ("READY", "DONE", "FAILED")  # the states a plain edge leads into
    for step in range(120):
        key = f"k{rng.randrange(4)}"
        what = rng.choice(["create", "transition", "transition", "claim", "finalize",
                           "release", "can", "get"])
        got = []
        for name, lc in (("plain", plain), ("watched", watched)):
            if what == "create":
                got.append(lc.create(key))
            elif what == "transition":
                got.append(lc.transition(key, states[step % len(states)]))
            elif what == "can":
                got.append(lc.can_transition(key, states[step % len(states)]))
            elif what == "get":
                got.append(lc.get(key))
            elif what == "claim":
                c = lc.claim(key, "start")
                if c.claimed:
                    claims[name].append(c)
                got.append(c)
            elif claims[name]:
                c = claims[name].pop(0)
                got.append(lc.finalize(c.key[0], c) if what == "finalize"
                           else lc.release(c.key[0], c))
        if len(got) < 2:
            continue
        assert _verdict_of(got[0]) == _verdict_of(got[1]), (step, what, key)
        o, r = seen[-1], got[1]
        ok = next((getattr(r, f) for f in ("applied", "claimed", "released")
                   if hasattr(r, f)), None)
        if ok is not None:
            assert o.outcome == ("applied" if ok else "refused"), (step, o, r)
            assert o.reason == (None if ok else r.reason), (step, o, r)
        else:
            assert o.outcome == "read"
    assert {o.operation for o in seen} == {"create", "transition", "claim", "finalize",
                                           "release", "can_transition", "get"}
    assert {o.outcome for o in seen} == {"applied", "refused", "read"}
