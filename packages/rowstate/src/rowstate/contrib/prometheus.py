"""Prometheus metrics of the engine (``pip install rowstate[prometheus]``).

``PrometheusObserver(registry=None, namespace="rowstate")``, given as ``observer=`` to
any number of lifecycles (one observer per registry: the metrics are registered once):

======================================================  ===================================
``rowstate_operations_total{machine,operation,          every operation, by outcome
outcome,reason}``                                       (applied/refused/read/error) and
                                                        reason ("" when none)
``rowstate_operation_seconds{machine,operation}``       a histogram of their durations
``rowstate_lease_takeovers_total{machine,edge}``        claims that took over an expired
                                                        lease
``rowstate_fencing_refusals_total{machine}``            refused LEASE_LOST: a zombie
                                                        holder's finalize, release or
                                                        fenced unit of work
======================================================  ===================================

The database's own figures are gauges, read when asked (never per operation):
``set_gauges(lc.gauges())`` (or ``await alc.gauges()``) before a scrape, or
:class:`GaugesCollector` for sync lifecycles, which reads them at each scrape:
``rowstate_rows{machine,state}``, ``rowstate_outbox_lag_seconds{machine}`` and
``rowstate_overdue_timers{machine,edge}``.

No label is a row's key: the labels' values are the machine's names and the engine's
reasons, a bounded set. The per-operation cost is a dict lookup of the labels' children
(cached: ``labels()`` is a lock and a tuple per call) and three increments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..gauges import Gauges
from ..observe import Finish, Observation
from ..results import Reason

# operations run from tens of microseconds (SQLite) to seconds (an act under run())
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
           0.5, 1.0, 2.5, 5.0, 10.0)


class PrometheusObserver:
    """Counters and a histogram per operation; gauges of the database on demand."""

    def __init__(self, registry: CollectorRegistry | None = None,
                 namespace: str = "rowstate") -> None:
        registry = REGISTRY if registry is None else registry
        self.operations = Counter("operations", "rowstate operations by outcome and reason",
                                  ("machine", "operation", "outcome", "reason"),
                                  namespace=namespace, registry=registry)
        self.seconds = Histogram("operation_seconds", "rowstate operations' durations",
                                 ("machine", "operation"), namespace=namespace,
                                 registry=registry, buckets=BUCKETS)
        self.takeovers = Counter("lease_takeovers", "claims that took over an expired lease",
                                 ("machine", "edge"), namespace=namespace, registry=registry)
        self.fencing = Counter("fencing_refusals", "writes refused because the lease was lost",
                               ("machine",), namespace=namespace, registry=registry)
        self.rows = Gauge("rows", "rows per state", ("machine", "state"),
                          namespace=namespace, registry=registry)
        self.outbox_lag = Gauge("outbox_lag_seconds", "age of the oldest undelivered event",
                                ("machine",), namespace=namespace, registry=registry)
        self.overdue = Gauge("overdue_timers", "rows whose timer is due and not yet fired",
                             ("machine", "edge"), namespace=namespace, registry=registry)
        # (machine, operation, outcome, reason) -> (its counter, its histogram): labels()
        # takes a lock and builds a tuple each call
        self._children: dict[tuple[str, str, str, str | None], tuple[Any, Any]] = {}

    def start(self, operation: str, machine: str) -> Finish:
        return self.record

    def record(self, o: Observation) -> None:
        key = (o.machine, o.operation, o.outcome, o.reason)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.operations.labels(o.machine, o.operation, o.outcome, o.reason or ""),
                self.seconds.labels(o.machine, o.operation))
        children[0].inc()
        children[1].observe(o.duration)
        if o.takeover:
            self.takeovers.labels(o.machine, o.edge or "").inc()
        if o.reason == Reason.LEASE_LOST:
            self.fencing.labels(o.machine).inc()

    def set_gauges(self, gauges: Gauges) -> None:
        """Set the database's gauges from one reading (``lc.gauges()``)."""
        for state, n in gauges.rows.items():
            self.rows.labels(gauges.machine, state).set(n)
        if gauges.outbox_lag is not None:
            self.outbox_lag.labels(gauges.machine).set(gauges.outbox_lag)
        for edge, n in gauges.overdue.items():
            self.overdue.labels(gauges.machine, edge).set(n)


class GaugesCollector(Collector):
    """The database's gauges read at each scrape, from sync readers (``lc.gauges`` of each
    :class:`rowstate.Lifecycle`): ``registry.register(GaugesCollector([lc.gauges]))``.
    Register it on a registry without a :class:`PrometheusObserver` of the same namespace
    (both would export the same names). An async app calls ``set_gauges`` instead."""

    def __init__(self, readers: Iterable[Callable[[], Gauges]],
                 namespace: str = "rowstate") -> None:
        self.readers = list(readers)
        self.namespace = namespace

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ns = self.namespace
        rows = GaugeMetricFamily(f"{ns}_rows", "rows per state", labels=("machine", "state"))
        lag = GaugeMetricFamily(f"{ns}_outbox_lag_seconds",
                                "age of the oldest undelivered event", labels=("machine",))
        overdue = GaugeMetricFamily(f"{ns}_overdue_timers",
                                    "rows whose timer is due and not yet fired",
                                    labels=("machine", "edge"))
        for read in self.readers:
            g = read()
            for state, n in g.rows.items():
                rows.add_metric((g.machine, state), n)
            if g.outbox_lag is not None:
                lag.add_metric((g.machine,), g.outbox_lag)
            for edge, n in g.overdue.items():
                overdue.add_metric((g.machine, edge), n)
        yield from (rows, lag, overdue)
