"""Durable timers: deadlines stored on the row, fired through the normal door by
``fire_due``, exactly once even with several tickers; once-per-row notices sent at most once;
one failing row reported while the others proceed.

The contrib stores run one of these by default (``@conformance``):
test_four_tickers_at_once_move_each_due_row_exactly_once, a race: four tickers at once on
the store's connections (threads, or tasks on one loop). The rest is the core's SQL and
the tick's logic: ``-m contrib`` runs it on them too.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from datetime import timedelta
from typing import Any

from rowstate import ActiveLease, TimedEdge
from rowstate.ext import Batch
from support.engine import RUNS, TICKETS, Backend, Clock, as_dict, conformance, on


class Recorder:
    """Thread-safe record of the acts and notices a tick ran."""

    def __init__(self, fail: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.lock = threading.Lock()
        self.acted: list[str] = []
        self.sent: list[str] = []
        self.fail = set(fail)

    def act(self, lease: ActiveLease) -> str:
        key = lease.key[0]
        with self.lock:
            self.acted.append(key)
        if key in self.fail:
            raise RuntimeError(f"pager down for {key}")
        return f"paged {key}"

    def notify(self, row: Any) -> None:
        with self.lock:
            self.sent.append(row["id"])
        if row["id"] in self.fail:
            raise RuntimeError(f"mail down for {row['id']}")

    def kwargs(self) -> dict[str, Any]:
        return {"acts": {"escalate": self.act}, "notify": {"remind": self.notify}}


def states(tickets: Any, keys: list[str]) -> dict[str, str]:
    return {k: tickets.state(k) for k in keys}


def test_due_rows_move_and_the_others_wait(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    now = clock.now
    backend.seed(TICKETS, id="past", state="OPEN", expires_at=now - timedelta(seconds=1))
    backend.seed(TICKETS, id="exactly", state="OPEN", expires_at=now)
    backend.seed(TICKETS, id="later", state="OPEN", expires_at=now + timedelta(seconds=60))
    backend.seed(TICKETS, id="never", state="OPEN")
    backend.seed(TICKETS, id="closed", state="CLOSED", expires_at=now - timedelta(hours=1))
    rec = Recorder()
    keys = ["past", "exactly", "later", "never", "closed"]

    report = tickets.fire_due(**rec.kwargs())

    assert sorted((f.key, f.name, f.applied) for f in report.fired) == [
        (("exactly",), "expire", True), (("past",), "expire", True)]
    assert report.applied == 2 and report.errors == ()
    assert states(tickets, keys) == {"past": "EXPIRED", "exactly": "EXPIRED", "later": "OPEN",
                                     "never": "OPEN", "closed": "CLOSED"}
    assert [e.edge for e in tickets.history("past")] == ["expire"]
    assert tickets.fire_due(**rec.kwargs()).fired == ()  # nothing is due twice

    clock.advance(60)
    assert [f.key for f in tickets.fire_due(**rec.kwargs()).fired] == [("later",)]
    assert tickets.state("later") == "EXPIRED"
    assert rec.acted == [] and rec.sent == []


def test_a_guard_holds_a_timer_back(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    backend.seed(TICKETS, id="manual", state="OPEN", autopilot=0, expires_at=clock.now)
    backend.seed(TICKETS, id="auto", state="OPEN", autopilot=1, expires_at=clock.now)
    rec = Recorder()
    assert [f.key for f in tickets.fire_due(**rec.kwargs()).fired] == [("auto",)]
    assert tickets.state("manual") == "OPEN"
    backend.update(TICKETS, "manual", autopilot=1)
    assert [f.key for f in tickets.fire_due(**rec.kwargs()).fired] == [("manual",)]
    assert tickets.state("manual") == "EXPIRED"


def test_the_pub_run_closes_on_autopilot_only_and_nudges_once(backend: Backend) -> None:
    clock = Clock()
    runs = backend.make(RUNS, clock=clock)
    backend.seed(RUNS, week_of="w1", v2_state="COLLECTING",
                 deadline_at=clock.now - timedelta(minutes=5))
    closed: list[Any] = []
    nudged: list[Any] = []
    tick = {"acts": {"close": lambda lease: closed.append(lease.key) or True},
            "notify": {"collecting_alert": lambda row: nudged.append(row["week_of"])}}

    first = runs.fire_due(**tick)  # autopilot 0: the cron only nudges
    assert [(f.name, f.applied) for f in first.fired] == [("collecting_alert", True)]
    assert runs.state("w1") == "COLLECTING" and closed == [] and nudged == ["w1"]
    assert as_dict(runs.get("w1"))["collecting_alert_at"] is not None
    assert runs.fire_due(**tick).fired == ()  # the nudge is not sent again

    backend.update(RUNS, "w1", autopilot=1)
    second = runs.fire_due(**tick)
    assert [(f.name, f.applied) for f in second.fired] == [("close", True)]
    assert closed == [("w1",)] and runs.state("w1") == "CLOSED"
    assert nudged == ["w1"]
    assert [e.edge for e in runs.history("w1")] == ["close"]


def test_a_notice_is_sent_at_most_once_even_when_sending_fails(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    for key in ("a", "b", "c"):
        backend.seed(TICKETS, id=key, state="OPEN", remind_at=clock.now)
    backend.seed(TICKETS, id="later", state="OPEN", remind_at=clock.now + timedelta(hours=1))
    backend.seed(TICKETS, id="shut", state="CLOSED", remind_at=clock.now)
    rec = Recorder(fail={"b"})

    report = tickets.fire_due(**rec.kwargs())

    by_key = {f.key[0]: f for f in report.fired}
    assert sorted(by_key) == ["a", "b", "c"]
    assert by_key["a"].applied and by_key["c"].applied
    assert not by_key["b"].applied and "mail down for b" in (by_key["b"].error or "")
    assert [f.key for f in report.errors] == [("b",)]
    assert sorted(rec.sent) == ["a", "b", "c"]
    for key in ("a", "b", "c"):  # claimed before sending: a failure is never resent
        assert backend.time(as_dict(tickets.get(key))["reminded_at"]) == clock.now
    clock.advance(7200)
    assert [f.key for f in tickets.fire_due(**rec.kwargs()).fired] == [("later",)]
    assert sorted(rec.sent) == ["a", "b", "c", "later"]
    assert tickets.state("a") == "OPEN"  # a notice does not move the row


def test_one_failing_row_is_reported_while_the_others_proceed(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    for key in ("a", "bad", "c"):
        backend.seed(TICKETS, id=key, state="OPEN", escalate_at=clock.now)
    rec = Recorder(fail={"bad"})

    report = tickets.fire_due(**rec.kwargs())

    by_key = {f.key[0]: f for f in report.fired}
    assert {k: f.applied for k, f in by_key.items()} == {"a": True, "bad": False, "c": True}
    assert "RuntimeError: pager down for bad" in (by_key["bad"].error or "")
    assert [f.key for f in report.errors] == [("bad",)]
    assert states(tickets, ["a", "bad", "c"]) == {"a": "ESCALATED", "bad": "OPEN",
                                                  "c": "ESCALATED"}
    bad = as_dict(tickets.get("bad"))
    assert bad["lease_at"] is None and "pager down" in bad["last_error"]

    rec.fail.clear()  # still due: the next tick retries it
    assert [(f.key, f.applied) for f in tickets.fire_due(**rec.kwargs()).fired] == [
        (("bad",), True)]
    assert sorted(rec.acted) == ["a", "bad", "bad", "c"]


def test_a_missing_callback_is_reported_for_its_due_rows_and_moves_nothing(
    backend: Backend,
) -> None:
    """Callbacks are needed only for what a tick actually fires: nothing is due, nothing is
    asked; a due row whose callback is missing is reported (not a crash of the tick) and
    left as it was, and the other timers still fire."""
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    assert tickets.fire_due().fired == ()  # no callbacks needed when nothing is due
    past = clock.now - timedelta(seconds=1)
    tickets.create("esc", escalate_at=past)
    tickets.create("rem", remind_at=past)
    tickets.create("exp", expires_at=past)

    report = tickets.fire_due()

    by_key = {f.key[0]: f for f in report.fired}
    assert by_key["exp"].applied and tickets.state("exp") == "EXPIRED"
    for key, name in (("esc", "escalate"), ("rem", "remind")):
        fired = by_key[key]
        assert not fired.applied and fired.error is not None and name in fired.error
    assert tickets.state("esc") == "OPEN" and as_dict(tickets.get("esc"))["lease_at"] is None
    assert as_dict(tickets.get("rem"))["reminded_at"] is None  # not claimed: sent later
    rec = Recorder()
    again = tickets.fire_due(**rec.kwargs())
    assert sorted(f.key[0] for f in again.fired if f.applied) == ["esc", "rem"]


def test_poison_rows_do_not_starve_a_healthy_one(backend: Backend) -> None:
    """Rows whose act keeps failing sort first (earliest deadline) but are skipped within
    their back-off, so a limit of 2 still reaches the healthy row behind them."""
    clock = Clock()
    binding = dataclasses.replace(
        TICKETS, lease=dataclasses.replace(TICKETS.lease, failed_at="failed_at"),
        timers=(TimedEdge("escalate", due="escalate_at", backoff=60.0),),
        notices=(), column_types={**TICKETS.column_types})
    tickets = backend.make(binding, clock=clock)
    for i, key in enumerate(("poison1", "poison2", "healthy")):
        tickets.create(key, escalate_at=clock.now - timedelta(minutes=10 - i))
    rec = Recorder(fail={"poison1", "poison2"})

    first = tickets.fire_due(acts={"escalate": rec.act}, limit=2)
    assert sorted(f.key[0] for f in first.fired) == ["poison1", "poison2"]
    assert all(f.error for f in first.fired)
    second = tickets.fire_due(acts={"escalate": rec.act}, limit=2)
    assert [(f.key[0], f.applied) for f in second.fired] == [("healthy", True)]
    assert tickets.state("healthy") == "ESCALATED"
    clock.advance(61)  # the back-off is over: the poison rows are tried again
    third = tickets.fire_due(acts={"escalate": rec.act}, limit=2)
    assert sorted(f.key[0] for f in third.fired) == ["poison1", "poison2"]


def test_a_timer_rechecks_its_deadline_and_guards_in_the_write(backend: Backend) -> None:
    """Between the tick's SELECT of due rows and its write, the operator extends the deadline
    of one row and turns autopilot off on another: neither may be moved."""
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    for key in ("extended", "manual", "due"):
        backend.seed(TICKETS, id=key, state="OPEN", expires_at=clock.now)
    rec = Recorder()

    op = tickets.core.fire_due(**rec.kwargs())
    step = next(op)  # the SELECT of due rows for the first timer
    assert isinstance(step, Batch)
    rows = backend.blocking(backend.store).run(step)
    assert sorted(r[0] for r in rows[0]) == ["due", "extended", "manual"]
    backend.update(TICKETS, "extended", expires_at=clock.now + timedelta(days=1))
    backend.update(TICKETS, "manual", autopilot=0)
    try:
        step = op.send(rows)
        while True:
            got = backend.blocking(backend.store).run(step) if isinstance(step, Batch) \
                else step.fn(step.arg)
            step = op.send(got)
    except StopIteration as stop:
        report = stop.value

    by_key = {f.key[0]: f for f in report.fired}
    assert by_key["due"].applied
    assert not by_key["extended"].applied and not by_key["manual"].applied
    assert states(tickets, ["extended", "manual", "due"]) == {
        "extended": "OPEN", "manual": "OPEN", "due": "EXPIRED"}


@conformance
@on("postgres")
def test_four_tickers_at_once_move_each_due_row_exactly_once(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    expiring = [f"x{i:02d}" for i in range(30)]
    escalating = [f"e{i:02d}" for i in range(10)]
    reminding = [f"r{i:02d}" for i in range(10)]
    past = clock.now - timedelta(seconds=5)
    for key in expiring:
        backend.seed(TICKETS, id=key, state="OPEN", expires_at=past)
    for key in escalating:
        backend.seed(TICKETS, id=key, state="OPEN", escalate_at=past)
    for key in reminding:
        backend.seed(TICKETS, id=key, state="OPEN", remind_at=past)
    backend.seed(TICKETS, id="later", state="OPEN", expires_at=clock.now + timedelta(hours=1))
    rec = Recorder()

    reports = backend.at_once(4, tickets, "fire_due", **rec.kwargs())
    # the tickers did race: rows were tried by more than one of them
    assert sum(len(r.fired) for r in reports) > sum(r.applied for r in reports)

    applied = Counter(f.key[0] for r in reports for f in r.fired if f.applied)
    assert applied == Counter({k: 1 for k in expiring + escalating + reminding})
    assert all(not r.errors for r in reports)
    assert Counter(rec.acted) == Counter({k: 1 for k in escalating})  # each act ran once
    assert Counter(rec.sent) == Counter({k: 1 for k in reminding})
    for key in expiring:
        assert [e.edge for e in tickets.history(key)] == ["expire"]
    for key in escalating:
        assert [e.edge for e in tickets.history(key)] == ["escalate"]
    assert tickets.state("later") == "OPEN"
    assert backend.count("tickets", "version > 1") == 0
