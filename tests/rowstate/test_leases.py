"""Leases of side-effecting edges: claim -> act -> finalize, release with ``last_error`` on
failure, a live lease blocking every other edge, stale leases reclaimed by the same kind only,
and fencing: a holder whose lease was taken over can no longer write.

The contrib stores run these by default (``@conformance``), because the store takes part:

* test_run_claims_acts_and_finalizes: the claim and the finalize, two of the store's
  transactions around the act, and the claimed row as the store hands it back;
* test_a_raising_act_propagates_after_the_lease_is_released: the release still runs on
  the store while the act's exception is on its way out;
* test_a_cancelled_async_act_releases_its_lease: an async store serves the release of a
  task that was cancelled mid-act;
* test_without_a_token_column_the_database_clock_fences: the fence is the claim's time as
  the store read it back (the database's clock, SQLite's stamped by the store), compared
  in SQL with what the store binds.

The rest is the core's SQL: ``-m contrib`` runs it on them too. The bad calls are
``@refused_before_io``: one backend, no statement sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from rowstate import (
    ActFailed,
    ActiveLease,
    Binding,
    Edge,
    InvalidTransitionError,
    Lease,
    Machine,
    ValidationError,
)
from support.engine import (
    JOBS,
    RUNS,
    Backend,
    Clock,
    as_dict,
    conformance,
    on,
    refused_before_io,
)


@conformance
def test_run_claims_acts_and_finalizes(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY", last_error="old failure")
    seen: list[ActiveLease] = []

    def act(lease: ActiveLease) -> str:
        seen.append(lease)
        return "started"

    res = jobs.run("j1", "start", act, holder="w1", payload={"attempts": 1}, data={"by": "w1"})

    assert (res.applied, res.reason, res.previous, res.state) == (True, None, "READY",
                                                                  "RUNNING")
    assert (res.value, res.acted, res.error) == ("started", True, None)
    assert res.event is not None
    assert (res.event.edge, res.event.from_state, res.event.to_state) == ("start", "READY",
                                                                          "RUNNING")
    assert res.event.data == {"by": "w1"}
    [lease] = seen
    assert (lease.key, lease.edge.name, lease.token) == (("j1",), "start", 1)
    # while the act ran, the row carried the lease
    assert (lease.row["lease_kind"], lease.row["lease_holder"]) == ("start", "w1")
    assert lease.row["lease_at"] is not None and lease.row["state"] == "READY"
    row = as_dict(jobs.get("j1"))
    assert row["state"] == "RUNNING" and row["attempts"] == 1
    assert (row["lease_at"], row["lease_kind"], row["lease_holder"]) == (None, None, None)
    assert row["last_error"] is None  # a success clears the last failure
    assert row["lease_token"] == 1 and row["version"] == 1


def test_a_refused_claim_does_not_act(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    calls: list[Any] = []
    res = jobs.run("j1", "start", calls.append)
    assert (res.applied, res.reason, res.acted, res.state) == (False, "STATE_MISMATCH", False,
                                                               "NEW")
    assert jobs.run("nobody", "start", calls.append).reason == "RECORD_NOT_FOUND"
    assert calls == []
    claim = jobs.claim("j1", "start")
    assert (claim.claimed, claim.reason, claim.token) == (False, "STATE_MISMATCH", None)


def test_an_act_that_returns_act_failed_releases_the_lease_and_stamps_the_error(
        backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")

    failed = ActFailed("nobody answered")
    res = jobs.run("j1", "start", lambda lease: failed, payload={"attempts": 7})

    assert (res.applied, res.reason, res.reasons) == (False, "ACT_FAILED", ("ACT_FAILED",))
    assert (res.acted, res.value, res.state) == (True, failed, "READY")
    assert res.error == "nobody answered"
    row = as_dict(jobs.get("j1"))
    assert row["state"] == "READY" and row["attempts"] is None and row["version"] == 0
    assert (row["lease_at"], row["lease_kind"], row["lease_holder"]) == (None, None, None)
    assert row["last_error"] == "nobody answered"
    # retryable at once: the lease is free
    assert jobs.run("j1", "start", lambda lease: True).applied
    assert as_dict(jobs.get("j1"))["last_error"] is None


@pytest.mark.parametrize("value", [0, None, False, [], ""])
def test_a_falsy_return_is_a_success(backend: Backend, value: object) -> None:
    """A retried send that finds nobody left to mail returns 0: the run must still move."""
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")
    res = jobs.run("j1", "start", lambda lease: value)
    assert (res.applied, res.state, res.value) == (True, "RUNNING", value)


@conformance
def test_a_raising_act_propagates_after_the_lease_is_released(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")

    def act(lease: ActiveLease) -> bool:
        raise RuntimeError("smtp down")

    with pytest.raises(RuntimeError, match="smtp down"):
        jobs.run("j1", "start", act)

    row = as_dict(jobs.get("j1"))
    assert row["state"] == "READY"
    assert (row["lease_at"], row["lease_kind"]) == (None, None)
    assert row["last_error"] == "RuntimeError: smtp down"
    assert jobs.history("j1") == []
    assert jobs.transition("j1", "FAILED").applied  # nothing blocks the row


def test_a_live_lease_blocks_every_other_edge(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")
    held = jobs.claim("j1", "start", holder="w1")
    assert held.claimed and held.token == 1
    acted: list[Any] = []

    assert jobs.transition("j1", "FAILED").reason == "LEASE_HELD"  # a pure edge
    assert jobs.claim("j1", "ping", holder="w2").reason == "LEASE_HELD"  # another kind
    assert jobs.claim("j1", "start", holder="w2").reason == "LEASE_HELD"  # the same kind
    blocked = jobs.run("j1", "start", acted.append, holder="w2")
    assert (blocked.reason, blocked.acted) == ("LEASE_HELD", False)
    assert acted == []
    assert jobs.can_transition("j1", "FAILED").reasons == ("LEASE_HELD",)

    assert jobs.finalize("j1", held).applied
    assert jobs.state("j1") == "RUNNING"


def test_unapprove_is_refused_while_a_send_is_in_flight(backend: Backend) -> None:
    runs = backend.make(RUNS)
    backend.seed(RUNS, week_of="w1", status="approved")  # derived APPROVED
    send = runs.claim("w1", "send", holder="mailer")
    assert send.claimed
    assert runs.transition("w1", "ASSIGNED").reason == "LEASE_HELD"
    assert runs.release("w1", send, error="bounced").released
    assert runs.transition("w1", "ASSIGNED").applied


def test_a_stale_lease_is_reclaimed_by_the_same_kind_only(backend: Backend) -> None:
    clock = Clock()
    jobs = backend.make(JOBS, clock=clock)  # lease ttl: 60 s
    backend.seed(JOBS, id="j1", state="READY")
    crashed = jobs.claim("j1", "start", holder="killed-worker")
    assert crashed.claimed

    clock.advance(60)  # at the TTL: still live
    assert jobs.claim("j1", "start", holder="w2").reason == "LEASE_HELD"
    clock.advance(1)
    other_kind = jobs.claim("j1", "ping", holder="w3")
    assert (other_kind.claimed, other_kind.reason) == (False, "LEASE_HELD")
    assert jobs.can_transition("j1", "READY", from_="NEW").reasons == ("STATE_MISMATCH",)

    again = jobs.claim("j1", "start", holder="w2")
    assert again.claimed and again.token == 2
    row = as_dict(jobs.get("j1"))
    assert (row["lease_holder"], row["lease_kind"], row["lease_token"]) == ("w2", "start", 2)
    assert backend.time(row["lease_at"]) == clock.now  # the takeover stamps a new claim time
    assert jobs.finalize("j1", again).applied


def test_a_zombie_can_neither_finalize_nor_release(backend: Backend) -> None:
    clock = Clock()
    jobs = backend.make(JOBS, clock=clock)
    backend.seed(JOBS, id="j1", state="READY")
    zombie = jobs.claim("j1", "start", holder="zombie")
    clock.advance(61)
    taker = jobs.claim("j1", "start", holder="taker")
    assert taker.claimed and taker.token == zombie.token + 1

    fin = jobs.finalize("j1", zombie, payload={"attempts": 9})
    assert (fin.applied, fin.reason, fin.reasons) == (False, "LEASE_LOST", ("LEASE_LOST",))
    rel = jobs.release("j1", zombie, error="zombie failed")
    assert (rel.released, rel.reason) == (False, "LEASE_LOST")
    row = as_dict(jobs.get("j1"))
    assert (row["state"], row["lease_holder"], row["attempts"]) == ("READY", "taker", None)
    assert row["last_error"] is None

    assert jobs.finalize("j1", taker).applied
    # the row moved on: the zombie's finalize is still refused as a lost lease
    assert jobs.finalize("j1", zombie).reason == "LEASE_LOST"
    assert jobs.release("j1", taker).reason == "LEASE_LOST"  # finalized: nothing to release


def test_run_reports_a_lease_lost_while_acting(backend: Backend) -> None:
    clock = Clock()
    jobs = backend.make(JOBS, clock=clock)
    other = backend.make(JOBS, clock=clock)
    backend.seed(JOBS, id="j1", state="READY")

    def slow_act(lease: ActiveLease) -> Any:
        clock.advance(61)  # the act outlives its lease; another worker takes over
        return backend.raw(other).claim("j1", "start", holder="taker")

    res = jobs.run("j1", "start", slow_act, holder="slow")

    assert (res.applied, res.reason, res.acted) == (False, "LEASE_LOST", True)
    assert res.value.claimed and res.value.token == 2  # the act's value: the taker's claim
    row = as_dict(jobs.get("j1"))
    assert (row["state"], row["lease_holder"], row["lease_token"]) == ("READY", "taker", 2)
    assert jobs.history("j1") == []


def test_fencing_tokens_strictly_increase(backend: Backend) -> None:
    clock = Clock()
    jobs = backend.make(JOBS, clock=clock)
    backend.seed(JOBS, id="j1", state="READY")
    tokens = []
    for _ in range(3):
        claim = jobs.claim("j1", "ping", holder="w")
        tokens.append(claim.token)
        assert jobs.release("j1", claim).released
    claim = jobs.claim("j1", "start", holder="w")
    tokens.append(claim.token)
    clock.advance(120)
    tokens.append(jobs.claim("j1", "start", holder="w2").token)  # a takeover
    assert tokens == [1, 2, 3, 4, 5]
    assert jobs.finalize("j1", claim).reason == "LEASE_LOST"


@refused_before_io
def test_finalize_and_release_need_a_claimed_lease(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="NEW")
    refused = jobs.claim("j1", "start")
    with backend.no_io():
        with pytest.raises(ValidationError):
            jobs.finalize("j1", refused)
        with pytest.raises(ValidationError):
            jobs.release("j1", refused)


@on("async")
def test_async_acts_run_under_the_async_lifecycle(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")
    backend.seed(JOBS, id="j2", state="READY")

    async def act(lease: ActiveLease) -> str:
        await asyncio.sleep(0.01)
        return f"started {lease.key[0]}"

    async def failing(lease: ActiveLease) -> None:
        await asyncio.sleep(0)
        raise ConnectionError("peer gone")

    res = jobs.run("j1", "start", act)
    assert (res.applied, res.value, res.state) == (True, "started j1", "RUNNING")
    with pytest.raises(ConnectionError):
        jobs.run("j2", "start", failing)
    assert as_dict(jobs.get("j2"))["last_error"] == "ConnectionError: peer gone"
    assert jobs.state("j2") == "READY"


@refused_before_io
def test_the_sync_lifecycle_refuses_an_async_act(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")

    async def act(lease: ActiveLease) -> bool:
        return True

    with backend.no_io(), pytest.raises(TypeError, match="AsyncLifecycle"):
        jobs.run("j1", "start", act)
    assert as_dict(jobs.get("j1"))["lease_at"] is None


JOBS_NO_TOKEN = dataclasses.replace(
    JOBS, lease=Lease(at="lease_at", kind="lease_kind", holder="lease_holder", error="last_error",
                      ttl=60), events=None)


def test_without_a_token_column_the_claim_time_fences(backend: Backend) -> None:
    clock = Clock()
    jobs = backend.make(JOBS_NO_TOKEN, clock=clock)
    backend.seed(JOBS, id="j1", state="READY")
    zombie = jobs.claim("j1", "start", holder="zombie")
    assert zombie.claimed and zombie.token is None
    assert backend.time(zombie.fence) == clock.now
    clock.advance(61)
    taker = jobs.claim("j1", "start", holder="taker")
    assert taker.claimed and backend.time(taker.fence) == clock.now

    assert jobs.finalize("j1", zombie).reason == "LEASE_LOST"
    assert jobs.release("j1", zombie).reason == "LEASE_LOST"
    assert jobs.finalize("j1", taker).applied
    assert jobs.state("j1") == "RUNNING"


@conformance
def test_without_a_token_column_the_database_clock_fences(backend: Backend) -> None:
    jobs = backend.make(JOBS_NO_TOKEN)
    backend.seed(JOBS, id="j1", state="READY")
    first = jobs.claim("j1", "ping", holder="w1")
    assert first.claimed and first.fence is not None
    assert jobs.release("j1", first, error="retry later").released
    assert as_dict(jobs.get("j1"))["last_error"] == "retry later"
    assert jobs.run("j1", "start", lambda lease: lease.token is None).applied


@conformance
@on("async")
def test_a_cancelled_async_act_releases_its_lease(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")
    started = asyncio.Event()

    async def hangs(lease: ActiveLease) -> bool:
        started.set()
        await asyncio.sleep(3600)
        return True

    async def cancel_mid_act() -> None:
        task = asyncio.ensure_future(jobs.aio.run("j1", "start", hangs))
        await asyncio.wait_for(started.wait(), timeout=30)
        task.cancel()  # e.g. a caller's timeout while the side effect is in flight
        with pytest.raises(asyncio.CancelledError):
            await task

    backend.wait(cancel_mid_act())
    row = as_dict(jobs.get("j1"))
    assert (row["state"], row["lease_at"], row["lease_kind"]) == ("READY", None, None)
    assert row["last_error"] is not None and "CancelledError" in row["last_error"]
    assert jobs.run("j1", "start", lambda lease: True).applied


def test_sync_run_refuses_an_act_that_returns_a_coroutine(tmp_path: object) -> None:
    """A sync front end cannot await: the act's coroutine is refused and the lease freed."""
    import rowstate
    from rowstate.ext import Batch
    from support.engine import RUNS

    store = rowstate.connect("sqlite://")
    try:
        runs = rowstate.Lifecycle(store, RUNS)
        runs.create_schema()
        store.run(Batch((("INSERT INTO pub_schedule_runs (week_of, v2_state) "
                          "VALUES ('w', 'APPROVED')", []),)))

        async def send(lease: object) -> bool:
            return True

        with pytest.raises(TypeError, match="awaitable"):
            runs.run("w", "send", lambda lease: send(lease))
        row = runs.get("w")
        assert row is not None
        assert (row["v2_state"], row["acting_at"]) == ("APPROVED", None)
        assert "awaitable" in row["last_error"]
    finally:
        store.close()


MAIL = Machine("outcome_mail", states=["OWED", "SENT", "REFUSED", "DROPPED"], initial="OWED",
               edges=[Edge("send", "OWED", "SENT", lease="mail"),
                      Edge("refuse", "OWED", "REFUSED", lease="mail"),
                      Edge("drop", "OWED", "DROPPED", lease="mail"),
                      Edge("give_up", "OWED", "DROPPED"),
                      Edge("retry", "REFUSED", "OWED")])
MAILS = Binding(MAIL, table="outcome_mails", key=("id",),
                lease=Lease(token="token", error="last_error"), payload=("detail",))


def test_a_finalize_may_end_in_another_outcome_of_the_same_lease(backend: Backend) -> None:
    """The act's outcome is known after the side effect: a lease claimed on ``send``
    finishes through ``refuse`` (same kind, same source), fenced by the same token."""
    mails = backend.make(MAILS)
    mails.create("m1")
    claim = mails.claim("m1", "send")
    refused = mails.finalize("m1", claim, to="REFUSED", payload={"detail": "550 no such user"},
                             note="the server refused it")
    assert (refused.applied, refused.previous, refused.state) == (True, "OWED", "REFUSED")
    assert refused.event is not None and refused.event.edge == "refuse"
    assert refused.event.note == "the server refused it"
    row = as_dict(mails.get("m1"))
    assert (row["detail"], row["acting_at"], row["token"]) == ("550 no such user", None, 1)
    # the same claim cannot finish twice, through any outcome
    assert not mails.finalize("m1", claim).applied
    assert mails.transition("m1", "OWED").applied
    first = mails.claim("m1", "send")
    assert first.claimed and first.token == 2
    assert mails.finalize("m1", first, to="DROPPED").state == "DROPPED"


@on("sync")
def test_a_zombie_finishing_through_another_outcome_is_refused(backend: Backend) -> None:
    clock = Clock()
    mails = backend.make(MAILS, clock=clock)
    mails.create("m1")
    zombie = mails.claim("m1", "send")
    clock.advance(MAILS.lease.ttl + 1)  # type: ignore[union-attr]
    fresh = mails.claim("m1", "send")
    assert fresh.claimed and fresh.token == 2
    lost = mails.finalize("m1", zombie, to="REFUSED")
    assert not lost.applied and lost.reason == "LEASE_LOST"
    assert mails.finalize("m1", fresh, to="REFUSED").applied


@refused_before_io
def test_a_finalize_to_a_state_without_an_outcome_edge_raises_before_any_io(
        backend: Backend) -> None:
    mails = backend.make(MAILS)
    mails.create("m1")
    claim = mails.claim("m1", "send")
    with backend.no_io():
        with pytest.raises(InvalidTransitionError, match="no 'mail' edge from OWED to OWED"):
            mails.finalize("m1", claim, to="OWED")
        with pytest.raises(InvalidTransitionError, match="unknown state"):
            mails.finalize("m1", claim, to="LOST")
    assert mails.finalize("m1", claim).state == "SENT"
