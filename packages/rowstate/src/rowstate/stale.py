"""Rows whose state the machine no longer has: how many, per state.

A release that renames or drops a state leaves rows holding its old name until
:func:`rowstate.migrations.rename_state` (or ``retire_state``) moves them. Such a row is
invisible to every move of the new machine (no edge leaves a state it does not know), so
the count is what a deployment checks before it drops an alias or declares a migration
done: :func:`rowstate.migrations.check_rows` returns it, and ``check_schema`` reports it
(as its result, and a warning in the log) once the table's DDL is right.

It lives at the declarative layer, beside :mod:`rowstate.schemacheck`, because it reads
only the binding and the dialect: one ``GROUP BY`` over the state as stored (not through
the machine's aliases: a row still holding an aliased old name IS stale, it counts, and
the result says which state the alias now reads it as), and while the state column is
NULL the state derived from the binding's ``derived`` column; a row with neither counts
under ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .conditions import Const, Ref, SqlOut
from .dialects import Dialect
from .machine import Machine
from .protocol import Batch, Op


class Stateful(Protocol):
    """What the count reads of a binding (:class:`rowstate.Binding` is one)."""

    @property
    def table_parts(self) -> tuple[str, ...]: ...
    @property
    def state_ref(self) -> Ref: ...
    @property
    def machine(self) -> Machine: ...


@dataclass(frozen=True)
class StaleStates:
    """Rows per stored state the machine does not have (``None``: no state at all), and
    for those of them it keeps as aliases, the state the alias reads them as."""

    counts: Mapping[str | None, int] = field(default_factory=dict)
    aliased: Mapping[str, str] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        """No row is in a state the machine no longer has."""
        return not self.counts

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def describe(self) -> str:
        """One line per stale state, for a log or an operator."""
        lines = []
        for state, n in self.counts.items():
            name = "(no state)" if state is None else repr(state)
            alias = self.aliased.get(state) if state is not None else None
            more = f" (an alias: read as {alias!r}; rename_state moves them)" if alias else ""
            lines.append(f"{n} row(s) in {name}{more}")
        return "; ".join(lines)


def stale_statement(b: Stateful, d: Dialect) -> tuple[str, list[Any]]:
    """The count's statement: the stored (or derived) state of every row, grouped, where it
    is not one of the machine's states. A subquery, so that the grouped expression is one
    column (PostgreSQL would not match two renderings of it with different parameters)."""
    out = SqlOut()
    stored = Ref(b.state_ref.column, (), b.state_ref.derived)  # not through the aliases
    state = d.ref(stored, None, out)
    names = ", ".join(d.value(Const(s), out) for s in b.machine.states)
    sql = (f"SELECT s, COUNT(*) FROM (SELECT {state} AS s FROM {d.table(b.table_parts)}) "
           f"AS q WHERE s IS NULL OR s NOT IN ({names}) GROUP BY s")
    return sql, [d.adapt(p, {}) for p in out.params]


def count_stale(b: Stateful, d: Dialect) -> Op[StaleStates]:
    """Count the rows in states the machine no longer has (one statement, a full scan)."""
    rows = yield Batch((stale_statement(b, d),))
    found = sorted(((r[0], int(r[1])) for r in rows[0]),
                   key=lambda item: (item[0] is None, item[0] or ""))
    aliases = b.machine.aliases
    return StaleStates(dict(found), {s: aliases[s] for s, _ in found
                                     if s is not None and s in aliases})
