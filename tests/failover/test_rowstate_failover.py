"""rowstate's transitions across a Patroni failover: what a caller was told, and what the
rows hold afterwards.

Worker threads (one of them on the asyncio twin) and a worker process move rows around a
small cycle (A -> B -> C -> A), each move with its ``from_``, one row at a time and in
``transition_many`` batches, through ``rowstate.connect(<the cluster's multi-host URL>)``
(``connect_async`` for the asyncio one), while the test SIGKILLs the leader node
(Patroni and its PostgreSQL) and brings it back. Each worker owns its rows, so its own
ledger says exactly what each row's history must be. Every call ends one of four ways:

  acknowledged   the move applied (or a batch's keys), and its event is tagged ``by=``
  refused        ``applied=False``: the engine said no (no racer exists, so in synchronous
                 mode there must be none: a refusal here would be a connection problem
                 passed off as a refusal)
  unknown        :class:`~rowstate.OutcomeUnknown`: resolved by the worker at once with
                 ``lifecycle.resolve(..., since=<version before>, by=<tag>)``, retried
                 until the cluster answers
  failed         any other store error (the connection lost before anything could
                 commit, no connection to be had): nothing may have moved

Afterwards each row's history (its events, by tag) is compared with the ledger: an
acknowledged move missing is lost, a resolution is right when its tag is in the history
exactly when it said ``applied``, a failed call must have left no event, and the row's
state and version must be the ledger's. A probe measures when the surviving node first
took a write, to time the store's first write against it (the pool's reconnect delay,
:mod:`rowstate.stores.pgpool`). Figures are printed under "failover figures".
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

import rowstate
from rowstate import (
    AsyncLifecycle,
    Binding,
    Edge,
    Lifecycle,
    Machine,
    OutcomeUnknown,
    StoreError,
)
from support.figures import Figures
from support.patroni import Node, PatroniCluster, first_writable

pytestmark = [pytest.mark.failover, pytest.mark.timeout(600)]

LAP = Machine(
    "lap",
    states=["A", "B", "C"],
    initial="A",
    edges=[Edge("ab", "A", "B"), Edge("bc", "B", "C"), Edge("ca", "C", "A")],
)
NEXT = {"A": "B", "B": "C", "C": "A"}

#: the longest the store may go without a write after a kill (see test_failover.py)
MAX_WRITE_OUTAGE = 60.0
#: the store's first write after the surviving node took its first: the pool's retries
#: (rowstate.stores.pgpool) wait 0.5 s at most; the rest is room for a loaded machine
MAX_LAG_AFTER_WRITABLE = 2.5

WORKERS = 4
SINGLE_ROWS = 3  # per worker, moved one at a time
BATCH_ROWS = 3  # per worker, moved together by transition_many


@dataclass
class Call:
    """One call and what became of it."""

    tag: str
    keys: tuple[str, ...]
    from_: str
    to: str
    versions: tuple[int, ...]  # each key's version before the call
    started: float
    ended: float = 0.0
    outcome: str = ""  # acknowledged | refused | unknown | failed
    detail: str = ""
    resolved: tuple[bool, ...] = ()  # per key, for an unknown one
    resolved_at: float = 0.0


@dataclass
class Ledger:
    calls: list[Call] = field(default_factory=list)
    rows: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (state, version)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def successes_after(self, at: float) -> list[float]:
        return sorted(c.ended for c in list(self.calls)
                      if c.outcome == "acknowledged" and c.started > at)


class Worker(threading.Thread):
    """Moves its own rows until told to stop; see the module docstring."""

    def __init__(self, number: int, lc: Any, ledger: Ledger, stop: threading.Event,
                 *, resync: bool) -> None:
        super().__init__(name=f"lap-worker-{number}", daemon=True)
        self.number, self.lc, self.ledger, self.stop_event = number, lc, ledger, stop
        self.resync = resync  # async mode: a row a failover turned back is read again
        self.singles = [f"w{number}-s{i}" for i in range(SINGLE_ROWS)]
        self.batch = [f"w{number}-b{i}" for i in range(BATCH_ROWS)]
        self.seq = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self.seq += 1
                if self.seq % 4 == 0:
                    self.move(tuple(self.batch))
                else:
                    self.move((self.singles[self.seq % SINGLE_ROWS],))
                time.sleep(0.005)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def move(self, keys: tuple[str, ...]) -> None:
        rows = self.ledger.rows
        state = rows[keys[0]][0]
        assert all(rows[k][0] == state for k in keys), "a batch's rows drifted apart"
        call = Call(tag=f"w{self.number}:{self.seq}", keys=keys, from_=state, to=NEXT[state],
                    versions=tuple(rows[k][1] for k in keys), started=time.monotonic())
        self.ledger.calls.append(call)
        try:
            if len(keys) == 1:
                result = self.wait(self.lc.transition(keys[0], call.to, from_=state,
                                                      by=call.tag))
                applied: tuple[str, ...] = (keys[0],) if result.applied else ()
                call.detail = "" if result.applied else str(result.reason)
            else:
                bulk = self.wait(self.lc.transition_many(call.to, keys=list(keys),
                                                         from_=state, by=call.tag))
                applied = tuple(str(key[0]) for key in bulk.applied)
                call.detail = "; ".join(f"{k}: {why}" for k, why in bulk.refused)
        except OutcomeUnknown as exc:
            call.ended, call.outcome, call.detail = time.monotonic(), "unknown", str(exc)
            self.resolve(call)
            return
        except StoreError as exc:
            call.ended, call.outcome = time.monotonic(), "failed"
            call.detail = f"{type(exc).__name__}: {exc}"
            return
        call.ended = time.monotonic()
        call.outcome = "acknowledged" if len(applied) == len(keys) else "refused"
        for k, before in zip(keys, call.versions, strict=True):
            if k in applied:
                rows[k] = (call.to, before + 1)
        if call.outcome == "refused" and self.resync:
            for k in keys:
                if k not in applied:
                    self.reread(k)

    def resolve(self, call: Call) -> None:
        """``resolve`` each key of an unknown call, retried while the cluster is away."""
        answers = []
        for k, before in zip(call.keys, call.versions, strict=True):
            deadline = time.monotonic() + MAX_WRITE_OUTAGE
            while True:
                try:
                    got = self.wait(self.lc.resolve(k, call.to, from_=call.from_,
                                                    since=before, by=call.tag))
                    break
                except StoreError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            answers.append(got.applied)
            assert got.state is not None and got.version is not None
            self.ledger.rows[k] = (got.state, got.version)
        call.resolved, call.resolved_at = tuple(answers), time.monotonic()
        if self.resync and len(set(self.ledger.rows[k][0] for k in call.keys)) > 1:
            for k in call.keys:
                self.reread(k)

    def reread(self, key: str) -> None:
        """Async mode: a failover lost this row's last moves; follow the row as it is."""
        row = self.wait(self.lc.get(key))
        assert row is not None
        self.ledger.rows[key] = (str(row["state"]), int(row["version"]))

    def wait(self, answer: Any) -> Any:
        """A lifecycle's answer (the async worker's: awaited on its loop)."""
        return answer


class AsyncWorker(Worker):
    """A :class:`Worker` on the asyncio twin (``connect_async``, ``AsyncLifecycle``): its
    own event loop in its thread, its own store, the same moves and ledger."""

    def __init__(self, number: int, url: str, binding: Binding, ledger: Ledger,
                 stop: threading.Event, *, resync: bool) -> None:
        self.url, self.binding = url, binding
        self.loop = asyncio.new_event_loop()
        super().__init__(number, None, ledger, stop, resync=resync)  # its lc: in run()

    def run(self) -> None:
        asyncio.set_event_loop(self.loop)
        store = rowstate.connect_async(self.url, max_size=2)
        self.lc = AsyncLifecycle(store, self.binding)
        try:
            super().run()
        finally:
            self.loop.run_until_complete(store.close())
            self.loop.close()

    def wait(self, answer: Any) -> Any:
        return self.loop.run_until_complete(answer)


@dataclass(frozen=True)
class Round:
    killed: str
    promoted: str
    killed_at: float
    writable_at: float  # the surviving node's first write, by the probe
    first_write_at: float  # the store's

    @property
    def to_first_write(self) -> float:
        return self.first_write_at - self.killed_at

    @property
    def lag(self) -> float:
        return self.first_write_at - self.writable_at


def _fail_over(cluster: PatroniCluster, ledger: Ledger, *, synchronous: bool,
               behind: float = 0.0) -> Round:
    """Kill the leader node mid-stream (``behind``: its walsender frozen that many seconds
    before), time the surviving node's first write and the store's, and bring the killed
    node back as a standby."""
    leader = cluster.wait_healthy(synchronous=synchronous)
    time.sleep(1.5)  # a stream of moves, so that the kill lands mid-stream
    others = [node for node in cluster.nodes if node is not leader]
    killed_at = time.monotonic()
    with contextlib.ExitStack() as paused:
        if behind:  # the standby is sent nothing for that long before the kill
            paused.enter_context(cluster.replication_paused(leader))
            time.sleep(behind)
            killed_at = time.monotonic()
        cluster.kill(leader)
    dead_at = time.monotonic()  # a call started after this cannot reach the old leader
    probed = first_writable(others, killed_at + MAX_WRITE_OUTAGE)
    if probed is None:
        raise cluster.explain(f"no node took a write within {MAX_WRITE_OUTAGE:g} s")
    promoted, writable_at = probed
    deadline = writable_at + MAX_WRITE_OUTAGE
    while not (firsts := ledger.successes_after(dead_at)) and time.monotonic() < deadline:
        time.sleep(0.02)
    if not firsts:
        raise cluster.explain("the store wrote nothing after the new primary took writes")
    time.sleep(1.0)  # the new leader alone takes moves for a while
    cluster.start_node(leader)
    cluster.wait_healthy(synchronous=synchronous)
    return Round(killed=leader.name, promoted=promoted.name, killed_at=killed_at,
                 writable_at=writable_at, first_write_at=firsts[0])


def _in_a_process(number: int, url: str, binding: Binding, resync: bool,
                  go: Any, stop: Any, out: Any) -> None:
    """A worker in a process of its own (forked): its own store and rows; its ledger is
    sent back through ``out`` when ``stop`` is set."""
    store = rowstate.connect(url, max_size=2)
    try:
        lc = Lifecycle(store, binding)
        ledger = Ledger()
        worker = Worker(number, lc, ledger, stop, resync=resync)
        go.wait()
        _create_rows(lc, ledger, worker)
        worker.run()
        out.put((ledger.calls, ledger.rows, repr(worker.error) if worker.error else None))
    except BaseException as exc:  # reported by the parent
        out.put(([], {}, repr(exc)))
    finally:
        store.close()


def _create_rows(lc: Lifecycle, ledger: Ledger, worker: Worker) -> None:
    for key in worker.singles + worker.batch:
        assert lc.create(key).applied
        row = lc.get(key)
        assert row is not None
        ledger.rows[key] = ("A", int(row["version"]))


@dataclass
class Workload:
    lc: Lifecycle
    ledger: Ledger
    workers: list[Worker]
    stop: threading.Event
    process: Any  # a multiprocessing.Process running one more worker
    process_stop: Any
    process_out: Any

    def finish(self) -> None:
        """Stop the workers (the process's ledger joins this one); their errors fail the
        test."""
        self.stop.set()
        self.process_stop.set()
        for worker in self.workers:
            worker.join(timeout=MAX_WRITE_OUTAGE * 2)
        calls, rows, error = self.process_out.get(timeout=MAX_WRITE_OUTAGE * 2)
        self.process.join(timeout=10)
        assert error is None, f"the worker process: {error}"
        self.ledger.calls.extend(calls)
        self.ledger.rows.update(rows)
        assert all(w.error is None for w in self.workers), [w.error for w in self.workers]


@contextlib.contextmanager
def _workload(cluster: PatroniCluster, *, resync: bool) -> Iterator[Workload]:
    """The rows and the workers moving them: WORKERS threads on one store, and one process
    with a store of its own (forked before this process opens any connection)."""
    suffix = uuid.uuid4().hex[:8]
    binding = Binding(LAP, table=f"laps_{suffix}", key=("id",), version="version",
                      events=f"lap_events_{suffix}")
    fork = multiprocessing.get_context("fork")
    go, process_stop, out = fork.Event(), fork.Event(), fork.Queue()
    process = fork.Process(target=_in_a_process, name="lap-worker-process", daemon=True,
                           args=(WORKERS, cluster.url, binding, resync, go, process_stop, out))
    process.start()
    stop = threading.Event()
    workers: list[Worker] = []
    store = None
    try:
        store = rowstate.connect(cluster.url, max_size=WORKERS + 2)
        lc = Lifecycle(store, binding)
        ledger = Ledger()
        workers = [Worker(n, lc, ledger, stop, resync=resync) for n in range(WORKERS)]
        workers.append(AsyncWorker(WORKERS + 1, cluster.url, binding, ledger, stop,
                                   resync=resync))
        lc.create_schema()
        for worker in workers:
            _create_rows(lc, ledger, worker)
        go.set()
        for worker in workers:
            worker.start()
        yield Workload(lc, ledger, workers, stop, process, process_stop, out)
    finally:
        stop.set()
        process_stop.set()
        go.set()
        for worker in workers:
            if worker.is_alive():
                worker.join(timeout=MAX_WRITE_OUTAGE * 2)
        process.join(timeout=MAX_WRITE_OUTAGE * 2)
        if process.is_alive():
            process.kill()
        if store is not None:
            store.close()


@dataclass
class Verdict:
    acked: int = 0
    lost: list[str] = field(default_factory=list)
    refused: list[Call] = field(default_factory=list)
    failed: int = 0
    failed_but_moved: list[str] = field(default_factory=list)
    unknown: list[Call] = field(default_factory=list)
    unknown_applied: int = 0
    wrong_resolutions: list[str] = field(default_factory=list)
    strays: list[str] = field(default_factory=list)  # events no call accounts for
    mismatched_rows: list[str] = field(default_factory=list)


def _check(lc: Lifecycle, ledger: Ledger) -> Verdict:
    """Each row's history against the ledger (see the module docstring)."""
    history: dict[str, list[str]] = {}
    for key in ledger.rows:
        history[key] = [str(event.by) for event in lc.history(key) if event.by]
    verdict = Verdict()
    explained: dict[str, set[str]] = {key: set() for key in ledger.rows}
    for call in ledger.calls:
        for index, key in enumerate(call.keys):
            present = history[key].count(call.tag)
            assert present <= 1, f"{call.tag} moved {key} {present} times"
            if call.outcome == "acknowledged":
                verdict.acked += 1
                explained[key].add(call.tag)
                if not present:
                    verdict.lost.append(f"{call.tag}/{key}")
            elif call.outcome == "unknown":
                applied = call.resolved[index]
                verdict.unknown_applied += applied
                if applied:
                    explained[key].add(call.tag)
                if bool(present) != applied:
                    verdict.wrong_resolutions.append(
                        f"{call.tag}/{key}: resolved applied={applied}, history has "
                        f"{'it' if present else 'nothing'}")
            elif present:  # refused or failed: nothing may have moved
                verdict.failed_but_moved.append(f"{call.tag}/{key} ({call.outcome})")
        if call.outcome == "unknown":
            verdict.unknown.append(call)
        elif call.outcome == "refused":
            verdict.refused.append(call)
        elif call.outcome == "failed":
            verdict.failed += 1
    for key, tags in history.items():
        verdict.strays += [f"{tag}/{key}" for tag in tags if tag not in explained[key]]
        row = lc.get(key)
        assert row is not None
        if (row["state"], row["version"]) != ledger.rows[key]:
            verdict.mismatched_rows.append(f"{key}: {row['state']} v{row['version']}, "
                                           f"ledger {ledger.rows[key]}")
    return verdict


def _describe(mode: str, rounds: list[Round], verdict: Verdict, ledger: Ledger) -> list[str]:
    calls = len(ledger.calls)
    on_asyncio = sum(1 for c in ledger.calls if c.tag.startswith(f"w{WORKERS + 1}:"))
    assert on_asyncio > 0, "the asyncio worker made no call"
    lines = [f"rowstate {mode} round {n}: killed {r.killed}; {r.promoted} took a write "
             f"{r.writable_at - r.killed_at:.1f} s after the kill, the store's first move "
             f"{r.to_first_write:.1f} s after it ({r.lag:+.2f} s after the node was writable)"
             for n, r in enumerate(rounds, 1)]
    unknown_keys = sum(len(c.keys) for c in verdict.unknown)
    lines.append(
        f"rowstate {mode} mode, {len(rounds)} kill(s), {WORKERS} threads, an asyncio worker "
        f"({on_asyncio} of the calls) and a process, one row and transition_many batches: "
        f"{calls} calls; {verdict.acked} moves acknowledged, "
        f"{len(verdict.lost)} lost; {len(verdict.unknown)} OutcomeUnknown ({unknown_keys} "
        f"moves) resolved: {verdict.unknown_applied} applied, "
        f"{unknown_keys - verdict.unknown_applied} not, {len(verdict.wrong_resolutions)} "
        f"wrong against the final history; {verdict.failed} failed before commit "
        f"({len(verdict.failed_but_moved)} moved anyway); {len(verdict.refused)} refused; "
        f"rows off the ledger (version only: a loss of 3 moves brings a row back to "
        f"the state its ledger holds): {len(verdict.mismatched_rows)}; max lag of the "
        f"store's first write behind the writable node: {max(r.lag for r in rounds):.2f} s")
    return lines


def test_acknowledged_moves_survive_synchronous_failovers_and_unknown_ones_resolve(
        cluster: PatroniCluster, figures: Figures) -> None:
    with _workload(cluster, resync=False) as load:
        rounds = [_fail_over(cluster, load.ledger, synchronous=True) for _ in range(3)]
        time.sleep(0.5)
        load.finish()
        verdict = _check(load.lc, load.ledger)
    for line in _describe("sync", rounds, verdict, load.ledger):
        figures.add(line)
    assert not verdict.lost, f"acknowledged moves lost in synchronous mode: {verdict.lost}"
    assert not verdict.wrong_resolutions, verdict.wrong_resolutions
    assert not verdict.failed_but_moved, verdict.failed_but_moved
    assert not verdict.refused, [(c.tag, c.detail) for c in verdict.refused]
    assert not verdict.strays, verdict.strays
    assert not verdict.mismatched_rows, verdict.mismatched_rows
    assert all(r.promoted != r.killed for r in rounds)
    lags = [round(r.lag, 2) for r in rounds]
    assert max(lags) <= MAX_LAG_AFTER_WRITABLE, (
        f"the store's first write came {lags} s after the new primary took writes")


def test_what_an_asynchronous_failover_costs_rowstate(cluster: PatroniCluster,
                                                      figures: Figures) -> None:
    """Measured, not a goal: with synchronous mode off, moves acknowledged on the old
    leader that the standby had not received are gone (a worker then finds its row in an
    earlier state: a refusal, the row read again and followed). Two rounds: the standby
    streaming as usual, then sent nothing for half a second before the kill, as in
    test_failover.py: the moves acknowledged meanwhile are lost, and the ledger finds them."""
    cluster.set_synchronous(False)
    with _workload(cluster, resync=True) as load:
        rounds = [_fail_over(cluster, load.ledger, synchronous=False),
                  _fail_over(cluster, load.ledger, synchronous=False, behind=0.5)]
        time.sleep(0.5)
        load.finish()
        verdict = _check(load.lc, load.ledger)
    lines = _describe("async", rounds, verdict, load.ledger)
    lines[-1] += (f"; wrong resolutions: {verdict.wrong_resolutions[:3]}"
                  if verdict.wrong_resolutions else "")
    for line in lines:
        figures.add(line)
    assert not verdict.failed_but_moved, verdict.failed_but_moved
    assert not verdict.strays, verdict.strays
    assert verdict.lost, "the ledger saw no loss where there must be one"
    # a refusal here is the row found where a lost move had not taken it, never a
    # connection problem passed off as one
    assert all("STATE_MISMATCH" in call.detail for call in verdict.refused), [
        (call.tag, call.detail) for call in verdict.refused]


def test_a_move_settled_on_a_live_primary_is_resolved_as_the_cluster_keeps_it(
        cluster: PatroniCluster, figures: Figures) -> None:
    """The caveat of settling (rowstate.stores.pgsettle): a session ended on a primary that
    is alive, while its COMMIT waits for the synchronous standby, keeps its commit, made
    locally only. Played for real: the leader's walsender frozen, a transition waiting in
    its COMMIT, that session ended on the server (as the store's settling does after a cut
    link), the leader killed a second later, the worker resolving its OutcomeUnknown as in
    the test above. Its answer must be what the cluster keeps: before the settling's
    barrier write, it resolved "applied" on the old primary at once, and the promoted
    standby never had the move."""
    suffix = uuid.uuid4().hex[:8]
    binding = Binding(LAP, table=f"laps_{suffix}", key=("id",), version="version",
                      events=f"lap_events_{suffix}")
    leader = cluster.wait_healthy(synchronous=True)
    store = rowstate.connect(cluster.url, max_size=2)
    try:
        lc = Lifecycle(store, binding)
        lc.create_schema()
        ledger = Ledger()
        worker = Worker(0, lc, ledger, threading.Event(), resync=False)
        key = worker.singles[0]
        assert lc.create(key).applied
        row = lc.get(key)
        assert row is not None
        ledger.rows[key] = ("A", int(row["version"]))
        with cluster.replication_paused(leader):
            mover = threading.Thread(target=worker.move, args=((key,),))
            mover.start()
            pid = _session_waiting_for_sync(leader)
            with psycopg.connect(leader.dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
            mover.join(timeout=1.0)
            answered_before_kill = not mover.is_alive()
            cluster.kill(leader)
        others = [node for node in cluster.nodes if node is not leader]
        if first_writable(others, time.monotonic() + MAX_WRITE_OUTAGE) is None:
            raise cluster.explain("the standby was not promoted")
        mover.join(timeout=MAX_WRITE_OUTAGE * 2)
        assert not mover.is_alive()
        cluster.start_node(leader)
        cluster.wait_healthy(synchronous=True)
        call = ledger.calls[0]
        kept = [str(event.by) for event in lc.history(key)].count(call.tag)
    finally:
        store.close()
    assert call.outcome == "unknown", (call.outcome, call.detail)
    figures.add(f"a COMMIT waiting for the sync standby, its session ended on the live "
                f"primary: OutcomeUnknown {'before' if answered_before_kill else 'after'} "
                f"the leader was killed a second later, resolved applied={call.resolved[0]}; "
                f"the cluster kept the move: {bool(kept)}")
    assert call.resolved[0] == bool(kept), (
        f"resolved applied={call.resolved[0]}, but the cluster "
        f"{'kept' if kept else 'lost'} the move")


def _session_waiting_for_sync(node: Node) -> int:
    """The pid of the session on ``node`` whose COMMIT waits for the synchronous standby."""
    deadline = time.monotonic() + 10
    with psycopg.connect(node.dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT pid FROM pg_stat_activity "
                               "WHERE wait_event = 'SyncRep'").fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.05)
    raise AssertionError(f"no session waits for the synchronous standby on {node.name}")
