"""The cluster the failover tests start, and what a plain client sees when its leader dies.

No rowstate here: psycopg 3 and a multi-host URL only, so these figures are the baseline any
library on this cluster inherits (time without writes, acknowledged commits kept or lost,
the clocks), measured on the configuration operators run (deploy/patroni/patroni.yml).
Each figure is printed under "failover figures" at the end of the run.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import psycopg
import pytest

from support.failover_load import Ack, Writers
from support.figures import Figures
from support.patroni import PatroniCluster

pytestmark = [pytest.mark.failover, pytest.mark.timeout(600)]

#: the longest a client may go without a successful write after the leader node dies:
#: the leader key's ttl (10 s) and a loop (2 s) in deploy/patroni/patroni.yml, with room
#: for a loaded machine
MAX_WRITE_OUTAGE = 60.0


@dataclass(frozen=True)
class Round:
    """One kill of the leader node and its return, as the writers saw it."""

    killed: str
    promoted: str
    killed_at: float
    to_first_write: float  # seconds from the SIGKILL to the new primary's first ack
    rejoin: float  # seconds from restarting the old leader to a healthy cluster again
    rewound: bool  # the old leader ran pg_rewind to rejoin
    old_last: Ack  # the old leader's last acknowledged row
    new_first: Ack  # the new leader's first
    behind: float = 0.0  # seconds the standby received nothing before the kill
    acked_behind: frozenset[int] = frozenset()  # rows acknowledged meanwhile

    def describe(self, mode: str, number: int) -> str:
        step = (self.new_first.txn_at - self.old_last.txn_at).total_seconds()
        cut = (f" {self.behind:g} s after its walsender froze ({len(self.acked_behind)}"
               " commits acknowledged meanwhile)" if self.behind else "")
        return (f"{mode} round {number}: killed {self.killed} (leader){cut}; {self.promoted} took "
                f"its first write {self.to_first_write:.1f} s after the kill; {self.killed} "
                f"back as a standby {self.rejoin:.1f} s after its restart "
                f"(pg_rewind: {'yes' if self.rewound else 'no'}); now() from the old leader's "
                f"last commit to the new one's first: {step:+.3f} s")


def _fail_over(cluster: PatroniCluster, writers: Writers, *, synchronous: bool,
               behind: float = 0.0) -> Round:
    """Kill the leader node mid-stream, wait for the writers' first success on the other
    node, bring the killed node back and wait until it streams again. ``behind``: freeze
    the leader's walsender that many seconds before the kill (a standby lagging behind when
    the leader dies)."""
    leader = cluster.wait_healthy(synchronous=synchronous)
    started = time.monotonic()
    if writers.wait_for_ack(since=started, not_port=-1, timeout=30) is None:
        raise cluster.explain("the writers got no commit acknowledged before the kill")
    time.sleep(1.0)  # a stream of commits, so that the kill lands mid-stream
    with contextlib.ExitStack() as paused:
        if behind:
            paused.enter_context(cluster.replication_paused(leader))
        cut_at = time.monotonic()
        time.sleep(behind)
        killed_at = time.monotonic()
        cluster.kill(leader)
    first = writers.wait_for_ack(since=killed_at, not_port=leader.pg_port,
                                 timeout=MAX_WRITE_OUTAGE)
    if first is None:
        raise cluster.explain(f"no write succeeded within {MAX_WRITE_OUTAGE:g} s of killing "
                              f"{leader.name}")
    time.sleep(1.0)  # the new leader alone takes writes for a while
    log_size = leader.log_file.stat().st_size
    restarted = time.monotonic()
    cluster.start_node(leader)
    cluster.wait_healthy(synchronous=synchronous)
    rejoin = time.monotonic() - restarted
    with leader.log_file.open("rb") as log:
        log.seek(log_size)
        rewound = b"running pg_rewind from" in log.read()
    old = [ack for ack in writers.acks_since(started) if ack.port == leader.pg_port]
    promoted = next(node for node in cluster.nodes if node.pg_port == first.port)
    acked_behind = frozenset(ack.id for ack in old if behind and ack.at > cut_at)
    return Round(killed=leader.name, promoted=promoted.name, killed_at=killed_at,
                 to_first_write=first.at - killed_at, rejoin=rejoin, rewound=rewound,
                 old_last=max(old, key=lambda ack: ack.at), new_first=first,
                 behind=behind, acked_behind=acked_behind)


def _clock_went_back(writers: Writers, rounds: list[Round]) -> int:
    """Rows the new leader acknowledged with a now() or clock_timestamp() earlier than the
    old leader's last acknowledged commit's (a clock a failover turned back), over every
    round."""
    acked = list(writers.ledger.acked)
    return sum(1 for one in rounds for ack in acked
               if ack.at > one.killed_at and ack.port == one.new_first.port
               and (ack.txn_at < one.old_last.txn_at or ack.clock_at < one.old_last.clock_at))


def _outcome(writers: Writers, rounds: list[Round], mode: str) -> tuple[list[Ack], str]:
    """The acknowledged rows the table lacks, and the line that says what became of each
    kind of answer."""
    stored = writers.stored()
    ledger = writers.ledger
    lost = [ack for ack in ledger.acked if ack.id not in stored]
    unknown_kept = sum(1 for row_id in ledger.unknown if row_id in stored)
    refused_kept = [row_id for row_id in ledger.refused if row_id in stored]
    assert not refused_kept, f"rows the server refused were written: {refused_kept}"
    line = (f"{mode} mode, {len(rounds)} kill(s) of the leader: {len(ledger.acked)} commits "
            f"acknowledged, {len(lost)} of them lost; {len(ledger.unknown)} of unknown outcome "
            f"(connection broke after sending: {unknown_kept} committed, "
            f"{len(ledger.unknown) - unknown_kept} not); {len(ledger.refused)} refused; "
            f"rows whose now() or clock_timestamp() went back across a switch: "
            f"{_clock_went_back(writers, rounds)}; "
            f"median time to the first write after a kill: "
            f"{sorted(one.to_first_write for one in rounds)[len(rounds) // 2]:.1f} s")
    return lost, line


def test_the_cluster_comes_up_with_a_synchronous_standby(cluster: PatroniCluster,
                                                         figures: Figures) -> None:
    roles = sorted(member["role"] for member in cluster.members())
    assert roles == ["leader", "sync_standby"], cluster.members()
    leader, standby = cluster.leader(), cluster.sync_standby()
    assert leader is not None and standby is not None and leader is not standby
    with psycopg.connect(leader.dsn, autocommit=True) as conn:
        names = conn.execute("SHOW synchronous_standby_names").fetchone()
        sync = conn.execute("SELECT application_name FROM pg_stat_replication"
                            " WHERE sync_state = 'sync'").fetchall()
    assert names is not None and standby.name in names[0]
    assert sync == [(standby.name,)]
    with psycopg.connect(cluster.url, autocommit=True) as conn:  # the URL finds the leader
        port = conn.execute("SELECT inet_server_port()").fetchone()
    assert port == (leader.pg_port,)
    with psycopg.connect(standby.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
    figures.add(f"cluster: etcd and two Patroni nodes up, a leader with a synchronous "
                f"standby streaming, {cluster.start_seconds:.1f} s after the first process "
                "started (initdb, base backup of the standby included)")


def _clock_offset(dsn: str, samples: int = 20) -> tuple[float, float]:
    """(server clock minus this process's clock, the round trip of that sample) in seconds,
    from the sample with the shortest round trip (NTP's estimate: the server read its clock
    half-way through the round trip, give or take half of it)."""
    best: tuple[float, float] | None = None
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(samples):
            before = time.time()
            row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
            after = time.time()
            assert row is not None
            trip = after - before
            if best is None or trip < best[1]:
                best = (float(row[0]) - (before + after) / 2, trip)
    assert best is not None
    return best


def test_the_two_nodes_read_one_clock(cluster: PatroniCluster, figures: Figures) -> None:
    """Both nodes run on this machine, so they read the same kernel clock: their offsets
    from the client agree within the measurement's own uncertainty. (On two machines this is
    NTP's job, and the difference is what a lease's age read on a new primary is off by.)"""
    leader, standby = cluster.leader(), cluster.sync_standby()
    assert leader is not None and standby is not None
    lead_offset, lead_trip = _clock_offset(leader.dsn)
    standby_offset, standby_trip = _clock_offset(standby.dsn)
    difference = standby_offset - lead_offset
    uncertainty = (lead_trip + standby_trip) / 2
    assert abs(difference) <= uncertainty + 0.001, (difference, uncertainty)
    figures.add(f"clocks: {leader.name} (leader) {lead_offset * 1e3:+.3f} ms and {standby.name} "
                f"(standby) {standby_offset * 1e3:+.3f} ms from the client's clock; the nodes "
                f"differ by {difference * 1e3:+.3f} ms (+/- {uncertainty * 1e3:.3f} ms): one "
                "machine, one clock")


def test_no_acknowledged_commit_is_lost_across_synchronous_failovers(
        cluster: PatroniCluster, figures: Figures) -> None:
    """Three times: SIGKILL the leader node (Patroni and its PostgreSQL) while four writers
    commit through the multi-host URL, and bring it back; the third time the standby has
    been sent nothing for half a second when the leader dies. Every commit a client saw
    succeed is in the table afterwards (Patroni promotes only the synchronous standby, which
    had each acknowledged commit's WAL before the COMMIT answered: while the standby gets
    nothing, no COMMIT answers)."""
    writers = Writers(cluster.url)
    writers.start()
    try:
        rounds = [_fail_over(cluster, writers, synchronous=True, behind=behind)
                  for behind in (0.0, 0.0, 0.5)]
        time.sleep(0.5)
    finally:
        writers.stop()
    for number, one in enumerate(rounds, 1):
        figures.add(one.describe("sync", number))
    lost, line = _outcome(writers, rounds, "sync")
    figures.add(line)
    assert not lost, (f"{len(lost)} acknowledged commits lost in synchronous mode, ids "
                      f"{[ack.id for ack in lost[:10]]}...")
    assert all(one.promoted != one.killed for one in rounds)


def test_what_an_asynchronous_failover_loses(cluster: PatroniCluster,
                                             figures: Figures) -> None:
    """The same kill with synchronous mode off: a COMMIT answers before the standby has its
    WAL, so what the standby had not received when the leader died is gone (and the old
    leader's copy is rewound away when it rejoins). Two rounds: the standby streaming as
    usual (on loopback it is rarely behind: measured, not asserted), then sent nothing for
    half a second before the kill, as a standby on a congested link: the commits
    acknowledged in that half second are lost, and the ledger that finds no loss in
    synchronous mode finds them (``maximum_lag_on_failover``, 1 MB, still lets the standby
    take over: a longer pause would leave the cluster without a leader instead)."""
    cluster.set_synchronous(False)
    writers = Writers(cluster.url)
    writers.start()
    try:
        streaming = _fail_over(cluster, writers, synchronous=False)
        lagging = _fail_over(cluster, writers, synchronous=False, behind=0.5)
        time.sleep(0.5)
    finally:
        writers.stop()  # the next test's `cluster` turns synchronous mode back on
    rounds = [streaming, lagging]
    for number, one in enumerate(rounds, 1):
        figures.add(one.describe("async", number))
    lost, line = _outcome(writers, rounds, "async")
    lost_ids = {ack.id for ack in lost}
    in_round_1 = sum(1 for ack in lost if ack.at <= streaming.killed_at + 1.0)
    figures.add(line + f"; lost in round 1: {in_round_1}, in round 2"
                f" (walsender frozen): {len(lost_ids & lagging.acked_behind)} of the "
                f"{len(lagging.acked_behind)} acknowledged after it froze")
    assert lost_ids & lagging.acked_behind, "the ledger saw no loss where there must be one"
