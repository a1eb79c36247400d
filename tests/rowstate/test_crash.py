"""Crashes and lost connections between claim, act and finalize.

* A worker process SIGKILLed mid-act leaves its lease: nobody takes it before the TTL; after
  it, another process of the same kind reclaims and finalizes, a different kind never can.
* A zombie (its lease was taken over after the TTL) can neither finalize nor release: the
  result says LEASE_LOST and the row is byte-for-byte untouched.
* PostgreSQL backends terminated between claim and finalize, while a transition waits on a
  row lock, and during a leased act: the call raises ConnectionLostError, nothing is half
  written (row, version and events agree), and retrying the same call is safe.

Timing: leases here live ``TTL`` seconds by the database's clock; the tests wait for it by
reading that clock (support.races.wait_past_ttl), not by sleeping a guessed amount.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import rowstate
import rowstate.stores
from rowstate import Lifecycle, Reason
from support import races as rh
from support import strategies as S

TTL = 2.0  # long enough to check "before the TTL" on a loaded machine; short to wait out
VICTIM = "rs_victim"  # application_name of the connections the tests terminate


def snapshot(url: str) -> str:
    return rh.checksum(url, (rh.TABLE, rh.EVENTS))


def never(lease: rowstate.ActiveLease) -> bool:
    raise AssertionError(f"an act ran although the lease is held: {lease}")


def test_killed_worker_lease_is_reclaimed_after_ttl_by_the_same_kind_only(
        url: str, children: list[rh.Child]) -> None:
    rh.create_rows(url, rh.race_binding(TTL), ["job"])
    holder = rh.Child("hold", url, TTL)
    children.append(holder)
    assert holder.expect()["ready"] == holder.pid
    holder.send("job work")
    assert holder.expect() == {"acting": 1}
    os.kill(holder.pid, signal.SIGKILL)  # mid-act, our own child only
    holder.close()
    assert holder.proc.returncode == -signal.SIGKILL

    row = rh.read_row(url, "job")
    assert (row["state"], row["acting_kind"], row["acting_token"], row["version"]) == (
        "A", "work", 1, 0), "the dead worker's lease must stay on the row"

    store = rh.open_store(url)
    try:
        lc = Lifecycle(store, rh.race_binding(TTL))
        before = snapshot(url)
        # before the TTL: nobody, of any kind, by any door
        assert lc.claim("job", "work").reason == Reason.LEASE_HELD
        assert lc.claim("job", "audit").reason == Reason.LEASE_HELD
        assert lc.run("job", "work", never).reason == Reason.LEASE_HELD
        assert lc.transition("job", "B", from_="A").reason == Reason.LEASE_HELD
        check = lc.can_transition("job", "B", from_="A")
        assert not check.allowed and Reason.LEASE_HELD in check.reasons
        assert rh.db_seconds_since(url, "acting_at", "job") < TTL, (
            "the machine was too slow to check before the TTL ran out")
        assert snapshot(url) == before

        rh.wait_past_ttl(url, "job", TTL)
        # after the TTL: a different kind still cannot take it
        assert lc.claim("job", "audit").reason == Reason.LEASE_HELD
        assert lc.run("job", "audit", never).reason == Reason.LEASE_HELD
        assert snapshot(url) == before
    finally:
        store.close()

    other = rh.Child("run", url, TTL)
    children.append(other)
    other.expect()
    other.send("job audit")  # another process, another kind: refused
    assert other.expect() == {"applied": False, "reason": Reason.LEASE_HELD, "state": "A",
                              "acted": False}
    other.send("job work")  # another process, the same kind: reclaims and finalizes
    assert other.expect() == {"applied": True, "reason": None, "state": "C", "acted": True}
    other.send("quit")
    other.close()
    assert other.proc.returncode == 0, other.stderr

    row = rh.read_row(url, "job")
    assert (row["state"], row["version"], row["acting_token"]) == ("C", 1, 2)
    assert row["acting_at"] is None and row["acting_kind"] is None
    assert [(e["edge"], e["from_state"], e["to_state"], e["version"])
            for e in rh.read_events(url, "job")] == [("work", "A", "C", 1)]


def test_zombie_cannot_finalize_or_release_after_takeover(
        url: str, children: list[rh.Child]) -> None:
    rh.create_rows(url, rh.race_binding(TTL), ["z1", "z2"])
    zombie = rh.Child("zombie", url, TTL)  # claim(), then finalize() when told
    zombie_run = rh.Child("zombie_run", url, TTL)  # run() whose act outlives its lease
    children.extend([zombie, zombie_run])
    zombie.expect()
    zombie_run.expect()
    zombie.send("z1")
    assert zombie.expect() == {"claimed": True, "token": 1, "reason": None}
    zombie_run.send("z2")
    assert zombie_run.expect() == {"acting": 1}

    rh.wait_past_ttl(url, "z1", TTL)
    rh.wait_past_ttl(url, "z2", TTL)
    store = rh.open_store(url)
    try:
        lc = Lifecycle(store, rh.race_binding(TTL))
        takeover = {k: lc.claim(k, "work", holder="rescuer") for k in ("z1", "z2")}
        assert all(c.claimed and c.token == 2 for c in takeover.values()), takeover

        before = snapshot(url)
        zombie.send("go")
        got = zombie.expect()
        assert got["finalize"] == {"applied": False, "reason": Reason.LEASE_LOST, "state": "A"}
        assert got["release"] == {"applied": False, "reason": Reason.LEASE_LOST}
        zombie_run.send("go")
        assert zombie_run.expect() == {"applied": False, "reason": Reason.LEASE_LOST,
                                       "state": "A", "acted": True}
        assert snapshot(url) == before, "a zombie wrote to the row"
        for key in ("z1", "z2"):
            row = rh.read_row(url, key)
            assert (row["acting_token"], row["acting_holder"], row["version"]) == (
                2, "rescuer", 0)
            assert row["last_error"] is None

        for key, claim in takeover.items():
            fin = lc.finalize(key, claim)
            assert fin.applied and fin.state == "C"
        after = snapshot(url)
        zombie.send("again")  # the row has moved on: still refused, still untouched
        assert zombie.expect() == {"finalize": {"applied": False,
                                                "reason": Reason.LEASE_LOST, "state": "C"}}
        assert snapshot(url) == after
    finally:
        store.close()
    for key in ("z1", "z2"):
        row = rh.read_row(url, key)
        assert (row["state"], row["version"]) == ("C", 1)
        assert len(rh.read_events(url, key)) == 1
    for child in (zombie, zombie_run):
        child.send("quit")
        child.close()
        assert child.proc.returncode == 0, child.stderr


# -- PostgreSQL connection loss ------------------------------------------------------------


@pytest.fixture
def victim(pg_dsn: str) -> Iterator[rowstate.stores.PostgresStore]:
    """A store whose one connection carries application_name VICTIM."""
    rh.create_rows(pg_dsn, rh.race_binding(TTL), ["job", "job2"])
    store = rowstate.stores.PostgresStore(rh.with_app_name(pg_dsn, VICTIM), min_size=1, max_size=1)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def unchecked_victim(pg_dsn: str) -> Iterator[rowstate.stores.PostgresStore]:
    """The victim with its connection kept per thread instead of pooled: the pool checks a
    connection at checkout and replaces one killed while idle (so the next call does not
    fail: tests/rowstate/test_stores.py), which would hide the crash these tests are about."""
    rh.create_rows(pg_dsn, rh.race_binding(TTL), ["job", "job2"])
    store = rowstate.stores.PostgresStore(rh.with_app_name(pg_dsn, VICTIM), per_thread=True)
    try:
        yield store
    finally:
        store.close()


def kill_victims(pg_admin_dsn: str, pg_dsn: str) -> None:
    pids = rh.backends(pg_admin_dsn, rh.dbname_of(pg_dsn), VICTIM)
    assert pids, "no victim connection to terminate"
    rh.terminate(pg_admin_dsn, pids)


def consistent(url: str, key: str, state: str, version: int) -> None:
    """Row and events agree: ``version`` applied moves, ``version`` events, in ``state``."""
    row = rh.read_row(url, key)
    events = rh.read_events(url, key)
    assert (row["state"], row["version"], len(events)) == (state, version, version), (
        row, events)


def test_connection_lost_between_claim_and_finalize(
        unchecked_victim: rowstate.stores.PostgresStore, pg_dsn: str, pg_admin_dsn: str) -> None:
    lc = Lifecycle(unchecked_victim, rh.race_binding(TTL))
    claim = lc.claim("job", "work")
    assert claim.claimed
    kill_victims(pg_admin_dsn, pg_dsn)
    with pytest.raises(rowstate.ConnectionLostError) as info:
        lc.finalize("job", claim)
    assert isinstance(info.value.__cause__, Exception)  # the driver's error is kept
    consistent(pg_dsn, "job", "A", 0)
    assert rh.read_row(pg_dsn, "job")["acting_kind"] == "work", "the lease must stay"

    retry = lc.finalize("job", claim)  # the same call, on a fresh connection
    assert retry.applied and retry.state == "C"
    consistent(pg_dsn, "job", "C", 1)
    again = lc.finalize("job", claim)
    assert not again.applied and again.reason == Reason.LEASE_LOST
    consistent(pg_dsn, "job", "C", 1)


def test_connection_lost_while_waiting_on_a_row_lock(
        victim: rowstate.stores.PostgresStore, pg_dsn: str, pg_admin_dsn: str) -> None:
    lc = Lifecycle(victim, rh.race_binding(TTL))
    lc.get("job")  # the victim's connection exists before the lock is taken
    dbname = rh.dbname_of(pg_dsn)
    for key, rival_moves_first in (("job", False), ("job2", True)):
        outcome: dict[str, Any] = {}

        def call(key: str = key, outcome: dict[str, Any] = outcome) -> None:
            try:
                outcome["result"] = lc.transition(key, "B", from_="A")
            except BaseException as exc:
                outcome["error"] = exc

        with rh.raw(pg_dsn) as blocker:
            blocker.execute("BEGIN")
            blocker.execute(f"SELECT * FROM {rh.TABLE} WHERE id = %s FOR UPDATE", [key])
            worker = threading.Thread(target=call)
            worker.start()
            pids: list[int] = []
            for _ in range(500):
                pids = rh.backends(pg_admin_dsn, dbname, VICTIM, waiting_on_lock=True)
                if pids or not worker.is_alive():
                    break
                time.sleep(0.01)
            assert pids, f"the transition never waited on the lock: {outcome}"
            rh.terminate(pg_admin_dsn, pids)
            worker.join(timeout=30)
            assert not worker.is_alive()
            blocker.execute("ROLLBACK")
        assert isinstance(outcome.get("error"), rowstate.ConnectionLostError), outcome
        consistent(pg_dsn, key, "A", 0)

        if rival_moves_first:
            rival = rh.open_store(pg_dsn)
            try:
                assert Lifecycle(rival, rh.race_binding(TTL)).transition(
                    key, "B", from_="A").applied
            finally:
                rival.close()
            retry = lc.transition(key, "B", from_="A")
            assert not retry.applied and retry.reason == Reason.STATE_MISMATCH
        else:
            retry = lc.transition(key, "B", from_="A")
            assert retry.applied
        consistent(pg_dsn, key, "B", 1)


def test_connection_lost_during_a_leased_act(
        unchecked_victim: rowstate.stores.PostgresStore, pg_dsn: str, pg_admin_dsn: str) -> None:
    """The act kills the run's connection: finalize cannot land and raises; the lease stays
    (the act may have had its effect), so a retry is refused until the TTL and then runs
    the edge exactly once."""
    lc = Lifecycle(unchecked_victim, rh.race_binding(TTL))
    acts: list[int | None] = []

    def act(lease: rowstate.ActiveLease) -> bool:
        acts.append(lease.token)
        kill_victims(pg_admin_dsn, pg_dsn)
        return True

    with pytest.raises(rowstate.ConnectionLostError):
        lc.run("job", "work", act)
    assert acts == [1]
    consistent(pg_dsn, "job", "A", 0)
    assert rh.read_row(pg_dsn, "job")["acting_kind"] == "work"

    early = lc.run("job", "work", never)
    assert not early.applied and early.reason == Reason.LEASE_HELD
    rh.wait_past_ttl(pg_dsn, "job", TTL)
    retry = lc.run("job", "work", lambda lease: acts.append(lease.token) or True)
    assert retry.applied and retry.state == "C"
    assert acts == [1, 2]
    consistent(pg_dsn, "job", "C", 1)
    assert not lc.run("job", "work", never).applied
    consistent(pg_dsn, "job", "C", 1)


# -- a finalize that cannot land after the act ran -----------------------------------------


def fuzz_rows(url: str) -> None:
    """The strategies.FUZZ table (at most one RUNNING row per tenant) with (t1,2) OPEN and
    (t1,3) RUNNING."""
    store = rh.open_store(url)
    try:
        Lifecycle(store, S.FUZZ).create_schema()
    finally:
        store.close()
    with rh.raw(url) as conn:
        conn.execute("INSERT INTO fuzz_rows (tenant, n, state) VALUES "
                     "('t1', 2, 'OPEN'), ('t1', 3, 'RUNNING')")


def fuzz_row(url: str, key: tuple[str, int]) -> dict[str, Any]:
    with rh.raw(url) as conn:
        p = "?" if url.startswith("sqlite:") else "%s"
        cur = conn.execute(
            "SELECT state, version, acting_at, acting_kind, acting_token, last_error, amount "
            f"FROM fuzz_rows WHERE tenant = {p} AND n = {p}", list(key))
        names = [d[0] for d in cur.description]
        row = cur.fetchone()
        events = conn.execute("SELECT count(*) FROM fuzz_events").fetchone()[0]
    return {**dict(zip(names, row, strict=True)), "events": events}


def test_a_refused_finalize_releases_the_lease(url: str) -> None:
    """The act ran but its move is refused (INVARIANT: another row of the tenant is RUNNING).
    The lease must not stay behind for its whole TTL: it is released with last_error, the
    row stays in its from-state, and the run is retryable at once."""
    fuzz_rows(url)
    store = rh.open_store(url)
    acts: list[int | None] = []
    try:
        lc = Lifecycle(store, S.FUZZ)  # lease TTL: one hour
        res = lc.run(("t1", 2), "start", lambda lease: acts.append(lease.token) or True)
        assert (res.applied, res.reason, res.acted) == (False, Reason.INVARIANT, True)
        row = fuzz_row(url, ("t1", 2))
        assert (row["state"], row["version"], row["events"]) == ("OPEN", 0, 0)
        assert row["acting_at"] is None and row["acting_kind"] is None, "lease left behind"
        assert row["last_error"] and "INVARIANT" in row["last_error"]

        assert lc.transition(("t1", 3), "FAILED").applied
        again = lc.run(("t1", 2), "start", lambda lease: acts.append(lease.token) or True)
        assert again.applied and again.state == "RUNNING"
        assert acts == [1, 2]
        row = fuzz_row(url, ("t1", 2))
        assert (row["state"], row["version"], row["acting_kind"]) == ("RUNNING", 1, None)
    finally:
        store.close()


def test_a_finalize_the_database_refuses_releases_the_lease(pg_dsn: str) -> None:
    """PostgreSQL refuses the payload only at finalize (text for a BIGINT column the binding
    does not declare, so the value rules cannot know it): the ValidationError reaches the
    caller, nothing is half written, the lease is released. (Declared, the same value is
    refused before the claim: tests/rowstate/test_values.py.)"""
    fuzz_rows(pg_dsn)
    store = rh.open_store(pg_dsn)
    try:
        types = {c: t for c, t in S.FUZZ.column_types.items() if c != "amount"}
        lc = Lifecycle(store, dataclasses.replace(S.FUZZ, column_types=types))
        assert lc.transition(("t1", 3), "FAILED").applied
        with pytest.raises(rowstate.ValidationError):
            lc.run(("t1", 2), "start", lambda lease: True, payload={"amount": "lots"})
        row = fuzz_row(pg_dsn, ("t1", 2))
        assert (row["state"], row["version"], row["amount"]) == ("OPEN", 0, None)
        assert row["events"] == 1  # the FAILED move only
        assert row["acting_kind"] is None and "ValidationError" in row["last_error"]
        assert lc.run(("t1", 2), "start", lambda lease: True, payload={"amount": 3}).applied
        assert fuzz_row(pg_dsn, ("t1", 2))["amount"] == 3
    finally:
        store.close()
