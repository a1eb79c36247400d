"""The database's own figures, read on demand: rows per state, the outbox's lag, overdue
timers. ``lc.gauges()`` / ``await alc.gauges()``; a Prometheus scrape or an app's status
page calls it (``PrometheusObserver.set_gauges``), nothing reads it per operation.

:func:`read_gauges` is a core-style read (an :data:`~rowstate.protocol.Op` yielding one
:class:`~rowstate.protocol.Batch`: one round trip for every figure), so it runs under either
driver. Its conditions are the engine's own: the state is the binding's ``state_ref`` (a
derived legacy column is read as the core reads it), and "overdue" is the condition a timer
fires on (``due <= now``, :class:`~rowstate.conditions.Older` with no TTL, rendered by each
dialect: SQLite's canonical text, PostgreSQL's ``timestamptz``), judged at the front end's
clock when one is injected, else the database's.

The outbox's lag is the age of the machine's oldest undelivered event in id order (the
order the relay delivers in), found through the events table's partial index on
undelivered rows: reading it costs the same with a backlog of a million as with none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from .binding import Binding
from .compiler import Statement
from .conditions import Const, In, Older, Ref, SqlOut, render
from .dialects import STORE_NOW, Dialect
from .protocol import Batch, Op


class Gauges(NamedTuple):
    """What the database says now, for one machine.

    ``rows``: rows per state, every state of the machine (0 when none) and any other state
    name found in the table (a state the machine no longer has); rows whose state is NULL
    are not counted. ``outbox_lag``: seconds since the oldest undelivered event was written
    (0.0 when every event is delivered; None when the binding has no events table).
    ``overdue``: per timed edge, the rows in its from-state whose due column is past.
    ``at``: the instant they were judged at."""

    machine: str
    rows: Mapping[str, int]
    outbox_lag: float | None
    overdue: Mapping[str, int]
    at: datetime


def read_gauges(binding: Binding, dialect: Dialect,
                clock: Callable[[], datetime] | None) -> Op[Gauges]:
    machine = binding.machine
    table = dialect.table(binding.table_parts)
    values: dict[str, Any] = {}
    if clock is not None or dialect.now_is_param:
        values["now"] = dialect.db_time(clock()) if clock is not None else STORE_NOW
    statements: list[tuple[str, list[Any]]] = []

    out = SqlOut()
    state = dialect.ref(binding.state_ref, None, out)
    statements.append(Statement(f"SELECT {state}, COUNT(*) FROM {table} GROUP BY 1",
                                tuple(out.params)).bind(dialect, values))
    for timer in binding.timers:
        out = SqlOut()
        src = machine.edge(timer.edge).src
        where = " AND ".join((render(In(binding.state_ref, (Const(src),)), dialect, None, out),
                              render(Older(Ref(timer.due), Const(0.0), inclusive=True),
                                     dialect, None, out)))
        statements.append(Statement(f"SELECT COUNT(*) FROM {table} WHERE {where}",
                                    tuple(out.params)).bind(dialect, values))
    out = SqlOut()
    now = dialect.now(out)
    oldest = ""
    if binding.events:
        p = dialect.value(Const(machine.name), out)
        events = dialect.table(tuple(binding.events.split(".")))
        oldest = (f", (SELECT created_at FROM {events} WHERE delivered_at IS NULL "
                  f"AND machine = {p} ORDER BY id LIMIT 1)")
    statements.append(Statement(f"SELECT {now}{oldest}", tuple(out.params)).bind(dialect,
                                                                                   values))

    rows = yield Batch(tuple(statements))
    counts = dict.fromkeys(machine.states, 0)
    for name, n in rows[0]:
        if isinstance(name, str):
            counts[name] = int(n)
    overdue = {t.edge: int(rows[1 + i][0][0]) for i, t in enumerate(binding.timers)}
    last = rows[-1][0]
    at = clock() if clock is not None else dialect.parse_time(last[0])
    assert at is not None
    lag: float | None = None
    if binding.events:
        written = dialect.parse_time(last[1])
        lag = 0.0 if written is None else max(0.0, (at - written).total_seconds())
    return Gauges(machine.name, counts, lag, overdue, at)
