"""Held and fenced writes under real concurrency on a real PostgreSQL: a close run by another
process waits for a unit that holds the run in COLLECTING; a zombie whose lease was taken
over by the same kind writes nothing, and the new holder's write lands."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rowstate import Lifecycle, UnitRefusedError
from rowstate.stores import PostgresStore
from support import races
from support.engine import RUNS

pytestmark = pytest.mark.postgres

WEEK = "2026-01-05"
CLOSE_IN_A_CHILD = """
import json, sys, time
sys.path[:0] = [{tests!r}, {root!r}]
from support.engine import RUNS
from rowstate import Lifecycle
from rowstate.stores import PostgresStore
store = PostgresStore(sys.argv[1])
runs = Lifecycle(store, RUNS)
res = runs.run({week!r}, "close", lambda lease: "closed")
print(json.dumps({{"applied": res.applied, "reason": res.reason, "at": time.time()}}))
store.close()
"""


def _setup(dsn: str) -> tuple[PostgresStore, Lifecycle]:
    store = PostgresStore(dsn)
    runs = Lifecycle(store, RUNS)
    runs.create_schema()
    store.execute_script("CREATE TABLE submissions (week_of TEXT, who TEXT)")
    runs.create(WEEK)
    assert runs.transition(WEEK, "COLLECTING").applied
    return store, runs


def _wait_for_lock_waiter(admin_dsn: str, dbname: str, app: str, timeout: float = 20) -> None:
    until = time.monotonic() + timeout
    while not races.backends(admin_dsn, dbname, app, waiting_on_lock=True):
        assert time.monotonic() < until, "the close never waited on the held row"
        time.sleep(0.02)


def test_a_close_in_another_process_waits_for_the_unit_holding_collecting(
        pg_dsn: str, pg_admin_dsn: str) -> None:
    store, runs = _setup(pg_dsn)
    tests = str(Path(__file__).resolve().parents[1])  # the shared helpers
    script = CLOSE_IN_A_CHILD.format(tests=tests, root=str(Path(tests).parent), week=WEEK)
    child_dsn = races.with_app_name(pg_dsn, "closer")
    try:
        with runs.atomic() as tx:
            assert tx.hold(WEEK, "COLLECTING").held
            child = subprocess.Popen([sys.executable, "-c", script, child_dsn],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            _wait_for_lock_waiter(pg_admin_dsn, races.dbname_of(pg_dsn), "closer")
            tx.execute("INSERT INTO submissions VALUES (%s, %s)", [WEEK, "just in time"])
            committed_at = time.time()
        out, err = child.communicate(timeout=30)
        assert child.returncode == 0, err
        got = json.loads(out)
        assert got["applied"] and got["at"] >= committed_at  # applied only after the commit
        assert runs.state(WEEK) == "CLOSED"
        assert runs.history(WEEK)[-1].to_state == "CLOSED"
        with runs.atomic() as tx:  # a unit that starts after the close is refused
            held = tx.hold(WEEK, "COLLECTING")
            assert (held.held, held.reason) == (False, "STATE_MISMATCH")
            with pytest.raises(UnitRefusedError):
                tx.execute("INSERT INTO submissions VALUES (%s, %s)", [WEEK, "too late"])
        with store.atomic() as tx:
            assert tx.execute("SELECT who FROM submissions") == [{"who": "just in time"}]
    finally:
        store.close()


def test_a_zombie_fenced_write_is_refused_and_the_new_holders_lands(pg_dsn: str) -> None:
    """The first holder pauses past its TTL; the same kind reclaims the lease; the first
    holder wakes and tries to write under its fence: refused, while the second's lands."""
    store = PostgresStore(pg_dsn)
    short = Lifecycle(store, _short_ttl())
    short.create_schema()
    store.execute_script("CREATE TABLE assignments (week_of TEXT, who TEXT, token BIGINT)")
    short.create(WEEK)
    short.transition(WEEK, "COLLECTING")
    short.run(WEEK, "close", lambda lease: None)
    assert short.state(WEEK) == "CLOSED"
    paused = threading.Event()
    resume = threading.Event()
    results: dict[str, Any] = {}

    def zombie(lease: Any) -> str:
        paused.set()
        assert resume.wait(30)
        try:
            with lease.atomic() as tx:
                results["zombie_fence"] = tx.refused
                tx.execute("INSERT INTO assignments VALUES (%s, %s, %s)",
                           [WEEK, "zombie", lease.token])
        except UnitRefusedError as exc:
            results["zombie_error"] = exc.reason
            raise
        return "generated"

    def first() -> None:
        try:
            results["first"] = short.run(WEEK, "generate", zombie, holder="first")
        except UnitRefusedError as exc:
            results["first_raised"] = exc.reason

    t = threading.Thread(target=first)
    t.start()
    assert paused.wait(30)
    time.sleep(1.2)  # past the 1 s TTL

    def second_act(lease: Any) -> str:
        with lease.atomic() as tx:
            tx.execute("INSERT INTO assignments VALUES (%s, %s, %s)",
                       [WEEK, "second", lease.token])
        return "generated"

    second = short.run(WEEK, "generate", second_act, holder="second")
    assert second.applied and second.state == "ASSIGNED"
    resume.set()
    t.join(30)
    assert results.get("zombie_fence") == "LEASE_LOST"
    assert results.get("first_raised") == "LEASE_LOST"
    with store.atomic() as tx:
        rows = tx.execute("SELECT who FROM assignments ORDER BY who")
    assert rows == [{"who": "second"}]
    store.close()


def _short_ttl() -> Any:
    return dataclasses.replace(RUNS, lease=dataclasses.replace(RUNS.lease, ttl=1.0))


def _hold_in_a_thread(dsn: str, got: dict[str, Any]) -> threading.Thread:
    """A second unit (its own connection, application name "holder") holding ASSIGNED
    shared, as a roster edit would; ``got["held"]`` its verdict and when."""
    def hold() -> None:
        store = PostgresStore(races.with_app_name(dsn, "holder"))
        try:
            with Lifecycle(store, RUNS).atomic() as tx:
                held = tx.hold(WEEK, "ASSIGNED")
                got["held"], got["at"] = (held.held, held.reason), time.time()
        except UnitRefusedError:
            pass  # a refused hold's unit cannot commit: the verdict is already recorded
        finally:
            store.close()

    thread = threading.Thread(target=hold)
    thread.start()
    return thread


def test_an_exclusive_hold_keeps_every_other_holder_out_until_it_ends(
        pg_dsn: str, pg_admin_dsn: str) -> None:
    """The unit that writes what depends on the state and then moves the row (an approve
    stamping its roster) holds exclusively: a shared holder that came second waits, then
    sees the move, so it can never slip a row in between the writes and the move. A shared
    hold would have let it in at once (checked first, so the test tells them apart)."""
    store, runs = _setup(pg_dsn)
    for edge in ("close", "generate"):
        assert runs.run(WEEK, edge, lambda lease: None).applied
    try:
        with runs.atomic() as tx:  # shared beside shared: the second does not wait
            assert tx.hold(WEEK, "ASSIGNED").held
            got: dict[str, Any] = {}
            _hold_in_a_thread(pg_dsn, got).join(10)
            assert got["held"] == (True, None)
        with runs.atomic() as tx:
            assert tx.hold(WEEK, "ASSIGNED", exclusive=True).held
            got = {}
            thread = _hold_in_a_thread(pg_dsn, got)
            _wait_for_lock_waiter(pg_admin_dsn, races.dbname_of(pg_dsn), "holder")
            tx.execute("INSERT INTO submissions VALUES (%s, %s)", [WEEK, "the roster"])
            assert runs.transition(WEEK, "APPROVED").applied
            committed_at = time.time()
        thread.join(10)
        assert got["held"] == (False, "STATE_MISMATCH") and got["at"] >= committed_at
    finally:
        store.close()


def test_exclusive_is_true_or_false(pg_dsn: str) -> None:
    from rowstate import ValidationError

    store, runs = _setup(pg_dsn)
    try:
        with pytest.raises(ValidationError, match="exclusive is True or False"), \
                runs.atomic() as tx:
            tx.hold(WEEK, "COLLECTING", exclusive="yes")  # type: ignore[arg-type]
    finally:
        store.close()
