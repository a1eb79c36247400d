"""OpenTelemetry traces: a span per operation (``pip install rowstate[otel]``).

``Lifecycle(store, binding, observer=OpenTelemetryObserver())``: each operation is a span
named ``rowstate.<operation>`` (``rowstate.transition``, ``rowstate.claim``...), with the
attributes ``rowstate.machine``, ``rowstate.operation``, ``rowstate.outcome``,
``rowstate.round_trips`` and, when the observation has them, ``rowstate.edge``,
``rowstate.to``, ``rowstate.reason`` and ``rowstate.takeover``; an operation that raised
ends with status ERROR (a refusal is a result, not an error: its span is OK, its reason
an attribute).

Why the span is started before the operation (the observer protocol's ``start``) rather
than made afterwards with explicit start and end times: started first, it is the current
span while the operation runs, so what runs inside it is its child (an act's own spans
under ``rowstate.run``; a database driver's spans when the driver is instrumented), and
its times are the tracer's own. The key of the row is never an attribute: a trace backend
indexes attributes, and a key is as unbounded as the table.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import Status, StatusCode

from ..observe import ERROR, Finish, Observation


class OpenTelemetryObserver:
    """Spans for every operation of the lifecycles it is given to; ``tracer``: the tracer
    to use (default: the global provider's tracer named ``rowstate``)."""

    def __init__(self, tracer: trace.Tracer | None = None) -> None:
        self.tracer = tracer if tracer is not None else trace.get_tracer("rowstate")

    def start(self, operation: str, machine: str) -> Finish:
        span = self.tracer.start_span(f"rowstate.{operation}", kind=trace.SpanKind.INTERNAL,
                                      attributes={"rowstate.machine": machine,
                                                  "rowstate.operation": operation})
        token = context.attach(trace.set_span_in_context(span))

        def finish(observation: Observation) -> None:
            try:
                context.detach(token)
                span.set_attributes(_attributes(observation))
                if observation.outcome == ERROR:
                    span.set_status(Status(StatusCode.ERROR, observation.reason))
            finally:
                span.end()

        return finish


def _attributes(o: Observation) -> dict[str, Any]:
    got: dict[str, Any] = {"rowstate.outcome": o.outcome, "rowstate.round_trips": o.round_trips}
    if o.edge is not None:
        got["rowstate.edge"] = o.edge
    if o.to is not None:
        got["rowstate.to"] = o.to
    if o.reason is not None:
        got["rowstate.reason"] = o.reason
    if o.takeover:
        got["rowstate.takeover"] = True
    return got
