"""The OpenTelemetry observer: a span per operation, exported by the SDK's in-memory
exporter, with its attributes; an act's own span is the run's child; an error's status is
ERROR. On the four backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from rowstate import ActiveLease, AsyncLifecycle, Lifecycle
from rowstate.contrib.otel import OpenTelemetryObserver
from rowstate.errors import InvalidTransitionError
from support.engine import JOBS, Backend, on


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def traced(backend: Backend, exporter: InMemorySpanExporter) -> tuple[Any, Any]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    backend.make(JOBS)
    cls: Any = AsyncLifecycle if backend.is_async else Lifecycle
    lc = backend.blocking(cls(backend.store, JOBS,
                              observer=OpenTelemetryObserver(tracer)))
    return lc, tracer


def test_a_span_per_operation(backend: Backend, exporter: InMemorySpanExporter) -> None:
    jobs, _ = traced(backend, exporter)
    jobs.create("a")
    jobs.transition("a", "READY")
    jobs.transition("a", "DONE")
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["rowstate.create", "rowstate.transition",
                                       "rowstate.transition"]
    moved, refused = dict(spans[1].attributes or {}), dict(spans[2].attributes or {})
    assert moved == {"rowstate.machine": "job", "rowstate.operation": "transition",
                     "rowstate.edge": "prepare", "rowstate.to": "READY",
                     "rowstate.outcome": "applied", "rowstate.round_trips": 1}
    assert refused == {"rowstate.machine": "job", "rowstate.operation": "transition",
                       "rowstate.to": "DONE", "rowstate.outcome": "refused",
                       "rowstate.reason": "STATE_MISMATCH", "rowstate.round_trips": 1}
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)  # refusals: results
    assert all(s.end_time is not None and s.start_time is not None
               and s.end_time > s.start_time for s in spans)


def test_the_acts_span_is_the_runs_child(backend: Backend,
                                         exporter: InMemorySpanExporter) -> None:
    jobs, tracer = traced(backend, exporter)
    backend.seed(JOBS, id="a", state="READY")

    def act(lease: ActiveLease) -> bool:
        with tracer.start_as_current_span("send the mail"):
            return True

    assert jobs.run("a", "start", act).applied
    mail, run = exporter.get_finished_spans()
    assert (mail.name, run.name) == ("send the mail", "rowstate.run")
    assert mail.parent is not None and mail.parent.span_id == run.context.span_id
    assert run.start_time <= mail.start_time and mail.end_time <= run.end_time
    assert dict(run.attributes or {})["rowstate.round_trips"] == 2


def test_an_error_span(backend: Backend, exporter: InMemorySpanExporter) -> None:
    jobs, _ = traced(backend, exporter)
    with pytest.raises(InvalidTransitionError):
        jobs.claim("a", "prepare")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "InvalidTransitionError"
    assert dict(span.attributes or {})["rowstate.outcome"] == "error"


@on("async")
def test_spans_of_tasks_at_once_are_not_each_others_children(
        backend: Backend, exporter: InMemorySpanExporter) -> None:
    """Each task's span is current in its own task only: six transitions gathered on one
    loop make six root spans, none the parent of another."""
    jobs, _ = traced(backend, exporter)
    for i in range(6):
        jobs.create(f"j{i}")
    exporter.clear()
    raw = backend.raw(jobs)

    async def all_at_once() -> list[Any]:
        return list(await asyncio.gather(*(raw.transition(f"j{i}", "READY")
                                           for i in range(6))))

    assert all(r.applied for r in backend.wait(all_at_once()))
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["rowstate.transition"] * 6
    assert all(s.parent is None for s in spans)
    assert len({s.context.trace_id for s in spans}) == 6
