"""The database's gauges, read on demand: rows per state (a derived legacy state counted as
the core reads it), the outbox's lag (an undelivered event aged by the injected clock), and
overdue timers (a deadline passed by the clock). On the four backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rowstate import Binding, Machine
from rowstate.dialects import Postgres, SQLite
from rowstate.ext import Batch, drive
from rowstate.gauges import read_gauges
from support.engine import JOBS, RUNS, SLOTS, TICKETS, Backend, Clock, on


def test_rows_per_state(backend: Backend) -> None:
    runs = backend.make(RUNS)
    assert runs.gauges().rows == dict.fromkeys(RUNS.machine.states, 0)
    runs.create("w1")
    runs.create("w2")
    runs.transition("w2", "COLLECTING")
    backend.seed(RUNS, week_of="legacy", status="approved")  # v2_state NULL: derived
    backend.seed(RUNS, week_of="renamed", v2_state="GONE")  # a state the machine lacks
    got = runs.gauges()
    assert got.machine == "pub_run"
    assert got.rows == {"DRAFT": 1, "COLLECTING": 1, "CLOSED": 0, "ASSIGNED": 0,
                        "APPROVED": 1, "SENT": 0, "GONE": 1}


def test_outbox_lag_is_the_oldest_undelivered_events_age(backend: Backend) -> None:
    clock = Clock()
    jobs = backend.make(JOBS, clock=clock)
    assert jobs.gauges().outbox_lag == 0.0  # nothing written yet
    jobs.create("a")  # its birth event, written at the clock's now
    clock.advance(30)
    jobs.create("b")
    clock.advance(12.5)
    got = jobs.gauges()
    assert got.outbox_lag == 42.5 and got.at == clock.now
    first = backend.execute("SELECT MIN(id) FROM rowstate_events WHERE machine = ?", "job")
    backend.execute("UPDATE rowstate_events SET delivered_at = created_at WHERE id = ?",
                    first[0][0])
    assert jobs.gauges().outbox_lag == 12.5
    backend.execute("UPDATE rowstate_events SET delivered_at = created_at")
    assert jobs.gauges().outbox_lag == 0.0
    other = backend.make(SLOTS, clock=clock)  # another machine's events are not this one's
    other.create("s")
    clock.advance(5)
    assert (jobs.gauges().outbox_lag, other.gauges().outbox_lag) == (0.0, 5.0)


def test_outbox_lag_on_the_database_clock(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    jobs.create("a")
    backend.execute("UPDATE rowstate_events SET created_at = ?",
                    datetime.now(UTC) - timedelta(hours=1))
    lag = jobs.gauges().outbox_lag
    assert lag is not None and 3590 < lag < 3700


def test_no_events_table_no_lag(backend: Backend) -> None:
    plain = Binding(Machine("plain", states=["A"], initial="A", edges=[]), table="plain",
                    key=("id",), events=None)
    lc = backend.make(plain)
    lc.create("1")
    assert (lc.gauges().outbox_lag, lc.gauges().rows) == (None, {"A": 1})


def test_overdue_timers(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    soon = clock.now + timedelta(minutes=1)
    backend.seed(TICKETS, id="t1", state="OPEN", expires_at=soon, escalate_at=soon)
    backend.seed(TICKETS, id="t2", state="OPEN", expires_at=soon + timedelta(hours=1))
    backend.seed(TICKETS, id="done", state="CLOSED", expires_at=clock.now - timedelta(days=1))
    assert tickets.gauges().overdue == {"expire": 0, "escalate": 0}
    clock.advance(60)  # exactly due: a timer fires at due <= now
    assert tickets.gauges().overdue == {"expire": 1, "escalate": 1}
    clock.advance(3600)
    assert tickets.gauges().overdue == {"expire": 2, "escalate": 1}
    report = tickets.fire_due(acts={"escalate": lambda lease: True})
    assert report.applied == 2  # both expire (the first timer): none is left to escalate
    assert tickets.gauges().overdue == {"expire": 0, "escalate": 0}
    assert tickets.gauges().rows["OPEN"] == 0


def test_one_batch_for_every_figure() -> None:
    """All the figures in one round trip, whatever the dialect: the SQL shape, once."""
    for dialect in (SQLite(), Postgres(injected_clock=True)):
        op = read_gauges(TICKETS, dialect, Clock())
        batch = next(op)
        assert isinstance(batch, Batch) and not batch.transaction
        sqls = [sql for sql, _ in batch.statements]
        assert len(sqls) == 4  # states; two timers; the clock and the oldest event
        assert sqls[0].startswith('SELECT "state", COUNT(*) FROM "tickets" GROUP BY 1')
        assert "ORDER BY id LIMIT 1" in sqls[3] and "delivered_at IS NULL" in sqls[3]


@on("sync")
def test_driven_like_any_core_read(backend: Backend) -> None:
    lc = backend.make(TICKETS)
    lc.create("x")
    got: Any = drive(backend.store, read_gauges(TICKETS, lc.core.dialect, None))
    assert got.rows["OPEN"] == 1
