"""The Prometheus observer: counters by outcome and reason, takeovers, fencing refusals, a
histogram of durations, and the database's gauges, as a registry exports them. On the four
backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rowstate import AsyncLifecycle, Lifecycle
from rowstate.contrib.prometheus import GaugesCollector, PrometheusObserver
from support.engine import JOBS, TICKETS, Backend, Clock, on


def metered(backend: Backend, binding: Any, observer: PrometheusObserver,
            clock: Clock | None = None) -> Any:
    backend.make(binding)
    cls: Any = AsyncLifecycle if backend.is_async else Lifecycle
    return backend.blocking(cls(backend.store, binding, clock=clock, observer=observer))


def test_counters_and_the_histogram(backend: Backend) -> None:
    registry = CollectorRegistry()
    jobs = metered(backend, JOBS, PrometheusObserver(registry))
    for key in ("a", "b", "c"):
        jobs.create(key)
    jobs.transition("a", "READY")
    jobs.transition("a", "READY", from_="NEW")
    jobs.transition("b", "DONE")
    jobs.get("c")

    def ops(operation: str, outcome: str, reason: str = "") -> float | None:
        return registry.get_sample_value("rowstate_operations_total", {
            "machine": "job", "operation": operation, "outcome": outcome, "reason": reason})

    assert ops("create", "applied") == 3
    assert ops("transition", "applied") == 1
    assert ops("transition", "refused", "STATE_MISMATCH") == 2
    assert ops("get", "read") == 1
    count = registry.get_sample_value("rowstate_operation_seconds_count",
                                      {"machine": "job", "operation": "transition"})
    total = registry.get_sample_value("rowstate_operation_seconds_sum",
                                      {"machine": "job", "operation": "transition"})
    assert count == 3 and total is not None and 0 < total < 10
    labels = {(name, value) for family in text_string_to_metric_families(
        generate_latest(registry).decode()) for sample in family.samples
        for name, value in sample.labels.items()}
    assert {name for name, _ in labels} == {"machine", "operation", "outcome", "reason", "le"}
    assert not {value for _, value in labels} & {"a", "b", "c"}  # never a row's key


def test_takeovers_and_fencing_refusals(backend: Backend) -> None:
    registry = CollectorRegistry()
    clock = Clock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    jobs = metered(backend, JOBS, PrometheusObserver(registry, namespace="app"), clock)
    backend.seed(JOBS, id="a", state="READY")
    zombie = jobs.claim("a", "start")
    takeovers = {"machine": "job", "edge": "start"}
    assert registry.get_sample_value("app_lease_takeovers_total", takeovers) is None
    clock.advance(120)
    fresh = jobs.claim("a", "start")
    assert registry.get_sample_value("app_lease_takeovers_total", takeovers) == 1
    assert not jobs.finalize("a", zombie).applied
    assert not jobs.release("a", zombie).released
    assert registry.get_sample_value("app_fencing_refusals_total", {"machine": "job"}) == 2
    assert jobs.finalize("a", fresh).applied
    assert registry.get_sample_value("app_fencing_refusals_total", {"machine": "job"}) == 2


def test_the_gauges_set_on_demand(backend: Backend) -> None:
    registry = CollectorRegistry()
    clock = Clock()
    observer = PrometheusObserver(registry)
    tickets = metered(backend, TICKETS, observer, clock)
    tickets.create("t1", expires_at=clock.now + timedelta(seconds=10))
    tickets.create("t2")
    clock.advance(20)
    observer.set_gauges(tickets.gauges())
    value = registry.get_sample_value
    assert value("rowstate_rows", {"machine": "ticket", "state": "OPEN"}) == 2
    assert value("rowstate_rows", {"machine": "ticket", "state": "CLOSED"}) == 0
    assert value("rowstate_overdue_timers", {"machine": "ticket", "edge": "expire"}) == 1
    assert value("rowstate_overdue_timers", {"machine": "ticket", "edge": "escalate"}) == 0
    assert value("rowstate_outbox_lag_seconds", {"machine": "ticket"}) == 20.0


@on("sync")
def test_the_gauges_read_at_each_scrape(backend: Backend) -> None:
    clock = Clock()
    tickets = backend.make(TICKETS, clock=clock)
    jobs = backend.make(JOBS, clock=clock)
    registry = CollectorRegistry()
    registry.register(GaugesCollector([tickets.gauges, jobs.gauges]))
    value = registry.get_sample_value
    assert value("rowstate_rows", {"machine": "job", "state": "NEW"}) == 0
    jobs.create("j")
    tickets.create("t", expires_at=clock.now)
    assert value("rowstate_rows", {"machine": "job", "state": "NEW"}) == 1
    assert value("rowstate_overdue_timers", {"machine": "ticket", "edge": "expire"}) == 1
    clock.advance(3)
    assert value("rowstate_outbox_lag_seconds", {"machine": "job"}) == 3.0


@on("sync")
def test_a_zombies_refused_unit_is_a_fencing_refusal(backend: Backend) -> None:
    registry = CollectorRegistry()
    clock = Clock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
    jobs = metered(backend, JOBS, PrometheusObserver(registry), clock)
    backend.seed(JOBS, id="a", state="READY")
    zombie = jobs.claim("a", "start")
    clock.advance(120)
    jobs.claim("a", "start")
    with jobs.atomic(fence=zombie) as tx:  # the zombie's own writes, fenced
        assert tx.refused == "LEASE_LOST"
    assert registry.get_sample_value("rowstate_fencing_refusals_total", {"machine": "job"}) == 1
    assert registry.get_sample_value("rowstate_operations_total", {
        "machine": "job", "operation": "fence", "outcome": "refused",
        "reason": "LEASE_LOST"}) == 1
