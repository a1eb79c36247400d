"""``/metrics`` in Prometheus' text format (prometheus-client), for whoever runs the pub's
server: is the tick alive, is mail going out, how fast are the pages.

Two kinds of figures, each where it is true:

* **read from the database at each scrape** (a collector, so every instance tells the
  same story, whichever one ran the tick or sent the mail): weeks by state, schedule
  deliveries by status, notices (every email owed) by kind and status, cover requests by
  state, each known label value there at 0 when nothing is in it; the mail log by outcome
  (``refused`` and ``unknown`` are the mail failures), and the tick's last success and
  failure (0: never) and duration (:mod:`pubsched.tick.status`). A database that does not
  answer within the deadline (:mod:`.within`) is ``pubsched_database_up 0``, not a failed
  or hung scrape; a group that cannot be read (a hand-edited row, a table locked past the
  statement timeout) is left out and named in ``pubsched_metrics_read_errors``, the other
  groups still there;
* **measured in this process**: request latency and counts by route template
  (``/admin/weeks/{week}``, never a tender's token) and method, and status.

Served behind the operator login at ``/admin/metrics``, or with ``serve --metrics-port N``
on a listener of its own bound to 127.0.0.1 (a scraper needs no session; nothing beyond
this machine reaches it). The registry is the app's own, not prometheus-client's global
one, so two apps in one process (the tests) never count into each other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..db.instants import instant
from ..deliveries.outbox import STATUS
from ..machine import COVER_STATES, STATES
from ..pub import Pub
from ..tick.run import COMPOSERS
from ..tick.status import last
from ..week.send import KIND as SCHEDULE
from ..week.view import weeks_list
from .within import Deadline, bounded, database_answers

log = logging.getLogger("pubsched.metrics")
MAIL_OUTCOMES = ("delivered", "refused", "unknown")
# the mail machine's edge each outcome finishes through (pubsched.deliveries.machine)
_OUTCOME_OF_EDGE = {"send": "delivered", "refuse": "refused", "lose": "unknown"}
#: every kind of email the pub owes: the schedule, and each the tick delivers
MAIL_KINDS = tuple(sorted({SCHEDULE, *COMPOSERS}))
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class PubCollector(Collector):
    """The figures read from the database (module docstring), at each scrape, within
    :data:`pubsched.web.within.DEADLINE`: every read of one scrape runs in one
    :class:`~pubsched.web.within.Deadline` (scrapes that meet share it), so a database
    that does not answer in time is ``pubsched_database_up 0`` at once, the process's own
    figures still there, and never a scrape that hangs."""

    def __init__(self, pub: Pub) -> None:
        self.pub = pub
        self.reads: Deadline[list[Metric]] = Deadline(self._read, name="pubsched-metrics")

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("pubsched_database_up",
                               "1 when the database answered this scrape in time")
        try:
            found = self.reads()
        except Exception as exc:  # a scrape must say the database is down, not fail
            why = str(exc) or f"no answer within {self.reads.seconds} s"
            log.warning("metrics: the database did not answer: %s", why)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from found

    def _read(self) -> list[Metric]:
        """Every group, each in a bounded unit of its own; raises when the database does
        not answer at all (``SELECT 1``)."""
        database_answers(self.pub)
        found: list[Metric] = []
        failed = GaugeMetricFamily("pubsched_metrics_read_errors", "1 for a group of "
                                   "figures that could not be read this scrape (its "
                                   "figures are left out; the log says why)",
                                   labels=["group"])
        for group, read in (("weeks", self._weeks), ("deliveries", self._deliveries),
                            ("notices", self._notices), ("covers", self._covers),
                            ("mail", self._mail), ("tick", self._tick)):
            try:
                with bounded(self.pub):
                    found += read()
            except Exception:  # one unreadable row must not hide every other figure
                log.exception("metrics: reading %s failed", group)
                failed.add_metric([group], 1)
        found.append(failed)
        return found

    def _weeks(self) -> Iterator[Metric]:
        # not ``pubsched_weeks``: promtool takes a name's "weeks" for a unit of time
        weeks = GaugeMetricFamily("pubsched_week_runs", "the pub's weeks (one run of the "
                                  "schedule each), by state", labels=["state"])
        states = [str(w["state"]) for w in weeks_list(self.pub)]
        for state in STATES:
            weeks.add_metric([state], states.count(state))
        yield weeks

    def _deliveries(self) -> Iterator[Metric]:
        deliveries = GaugeMetricFamily("pubsched_deliveries",
                                       "schedule emails by delivery status", labels=["status"])
        counted: dict[tuple[str, ...], int]
        if self.pub.schema.mail:  # the schedule's mail (0050): its states in words
            counted = {(STATUS[state],): n for (state,), n in _counts(self.pub.query(
                "SELECT state, COUNT(*) AS n FROM pub_mail WHERE kind = 'schedule' "
                "AND attempts > 0 GROUP BY state"), "state").items()}
        else:
            counted = _counts(self.pub.query("SELECT status, COUNT(*) AS n FROM "
                                             "pub_deliveries GROUP BY status"), "status")
        for status in ("sent", "failed", "in_flight"):
            deliveries.add_metric([status], counted.get((status,), 0))
        yield deliveries

    def _notices(self) -> Iterator[Metric]:
        if not self.pub.schema.mail:
            return
        owed = GaugeMetricFamily("pubsched_notices", "every email the pub owes, by kind "
                                 "and status (each known pair, 0 included)",
                                 labels=["kind", "status"])
        counted: dict[tuple[str, ...], int] = {
            (kind, STATUS.get(state, state)): n for (kind, state), n in _counts(
            self.pub.query("SELECT kind, state, COUNT(*) AS n FROM pub_mail "
                           "GROUP BY kind, state"), "kind", "state").items()}
        statuses = tuple(STATUS.values())
        for pair in _every(((k, st) for k in MAIL_KINDS for st in statuses), counted):
            owed.add_metric(list(pair), counted.get(pair, 0))
        yield owed

    def _covers(self) -> Iterator[Metric]:
        if not self.pub.schema.covers:
            return
        covers = GaugeMetricFamily("pubsched_cover_requests", "cover requests by state "
                                   "(each state, 0 included)", labels=["state"])
        counted = _counts(self.pub.query(
            "SELECT state, COUNT(*) AS n FROM pub_covers GROUP BY state"), "state")
        for (state,) in _every(((st,) for st in COVER_STATES), counted):
            covers.add_metric([state], counted.get((state,), 0))
        yield covers

    def _mail(self) -> Iterator[Metric]:
        mail = CounterMetricFamily("pubsched_mail_messages", "messages handed to the mail "
                                   "server, by outcome (refused, unknown: mail failures)",
                                   labels=["outcome"])
        outcomes = dict.fromkeys(MAIL_OUTCOMES, 0)
        for row in self.pub.query("SELECT kind, COUNT(*) AS n FROM pub_mail_log "
                                  "GROUP BY kind"):
            outcome = str(row["kind"]).rsplit(":", 1)[-1]
            key = outcome if outcome in outcomes else "delivered"  # kinds before outcomes
            outcomes[key] += int(row["n"])
        if self.pub.schema.mail:  # since 0050 the mail machine's finishes are the log
            for row in self.pub.query(
                    "SELECT edge, COUNT(*) AS n FROM rowstate_events WHERE machine = "
                    "'pub_mail' AND edge IN ('send', 'refuse', 'lose') GROUP BY edge"):
                outcomes[_OUTCOME_OF_EDGE[str(row["edge"])]] += int(row["n"])
        for outcome, n in outcomes.items():
            mail.add_metric([outcome], n)
        yield mail

    def _tick(self) -> Iterator[Metric]:
        """Both times always (0: never yet), so an alert on them has a series to read
        from the first scrape; the duration once a tick has run."""
        record = last(self.pub) or {}
        for name, column, help_text in (
                ("pubsched_tick_last_success_timestamp_seconds", "last_success_at",
                 "when the last tick finished (Unix time; 0: no tick yet)"),
                ("pubsched_tick_last_failure_timestamp_seconds", "last_failure_at",
                 "when a tick last raised (Unix time; 0: none has)")):
            gauge = GaugeMetricFamily(name, help_text)
            value = record.get(column)
            gauge.add_metric([], 0.0 if value is None else _seconds(value))
            yield gauge
        if record.get("last_duration_seconds") is not None:
            gauge = GaugeMetricFamily("pubsched_tick_last_duration_seconds",
                                      "how long the last tick took")
            gauge.add_metric([], _seconds(record["last_duration_seconds"]))
            yield gauge


def _every(known: Iterable[tuple[str, ...]], counted: Mapping[tuple[str, ...], int]
           ) -> list[tuple[str, ...]]:
    """Every known label value (or pair), then any other the database holds (a kind of an
    older version): a value with nothing in it is a 0, never a series that comes and goes,
    which a rate or an alert cannot read."""
    listed = list(known)
    return listed + sorted(set(counted) - set(listed))


def _counts(rows: Iterable[Mapping[str, Any]], *keys: str) -> dict[tuple[str, ...], int]:
    return {tuple(str(r[k]) for k in keys): int(r["n"]) for r in rows}


def _seconds(value: Any) -> float:
    """A timestamp column as Unix time (SQLite keeps ISO text), or a number as it is."""
    if isinstance(value, int | float):
        return float(value)
    return instant(value).timestamp()


def route_templates(routes: Iterable[BaseRoute], prefix: str = "") -> dict[Any, str]:
    """Each endpoint (what Starlette leaves in ``scope["endpoint"]``) -> its route's path
    template, through mounts and the apps wrapped around their routers (the operator
    gate): the label a request is counted under."""
    found: dict[Any, str] = {}
    for route in routes:
        if isinstance(route, Route):
            found.setdefault(route.endpoint, prefix + route.path)
        elif isinstance(route, Mount):
            found[route.app] = prefix + route.path + "/{path}"  # answered by the mount's app
            inner: Any = route.app
            while not hasattr(inner, "routes") and hasattr(inner, "app"):
                inner = inner.app
            if hasattr(inner, "routes"):
                found.update(route_templates(inner.routes, prefix + route.path))
    return found


class Metrics:
    """One app's registry: the database collector and the request figures."""

    def __init__(self, pub: Pub) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(PubCollector(pub))
        self.latency = Histogram("pubsched_http_request_duration_seconds",
                                 "time to answer a request, by route and method",
                                 ["route", "method"], registry=self.registry,
                                 buckets=LATENCY_BUCKETS)
        self.requests = Counter("pubsched_http_requests", "requests answered, by route, "
                                "method and status", ["route", "method", "status"],
                                registry=self.registry)
        self.routes: dict[Any, str] = {}

    def text(self) -> bytes:
        return bytes(generate_latest(self.registry))

    async def page(self, request: Request) -> Response:
        """``GET /admin/metrics`` (the operator's session, as every admin page)."""
        return Response(await run_in_threadpool(self.text), media_type=CONTENT_TYPE_LATEST)

    def serve_on(self, port: int) -> Any:
        """The listener of ``serve --metrics-port``, on 127.0.0.1 only; its server (for
        ``shutdown()``)."""
        server, _thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        return server


class RequestMetrics:
    """ASGI middleware: every HTTP request's duration and status, by route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = self.metrics.routes.get(scope.get("endpoint"), "unmatched")
            method = str(scope.get("method", "GET"))
            self.metrics.latency.labels(route, method).observe(time.perf_counter() - started)
            self.metrics.requests.labels(route, method, str(status)).inc()


__all__ = ["Metrics", "PubCollector", "RequestMetrics", "route_templates"]
