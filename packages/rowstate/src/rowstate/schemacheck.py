"""``check_schema``: what a migrated table lacks, in one clear error.

An application that owns its schema (versioned migrations) must give the engine every
column, type and index its binding names. The check reads the database's own catalogue
(``pragma_table_info`` / ``information_schema``), compares it with what the binding needs
(the same list :func:`rowstate.schema.schema_sql` creates) and reports every problem at
once, so a deployment fails at start-up with the whole list instead of one confusing
error per call.

Once the DDL is right it also counts the rows whose state the machine no longer has
(:mod:`rowstate.stale`: a release renamed or dropped a state and the rows were not moved
yet). Those are not a mismatch of the schema, and a deployment mid-rename must still start,
so they are not raised: ``check_schema`` returns the count (:class:`StaleStates`) and logs a
warning naming them.
"""

from __future__ import annotations

import logging
from typing import Protocol

from .dialects import Dialect
from .errors import SchemaMismatch
from .outbox import EVENT_LAYOUT, index_names
from .protocol import Batch, Op
from .schema import Layout, column_types, required_indexes
from .stale import StaleStates, Stateful, count_stale

log = logging.getLogger("rowstate")


class Checked(Layout, Stateful, Protocol):
    """What the check reads of a binding: its layout and its machine's states."""


def check_schema(b: Checked, d: Dialect) -> Op[StaleStates]:
    """Raise :class:`SchemaMismatch` naming every missing table, column, type or index;
    else the rows in states the machine no longer has (logged as a warning if any)."""
    problems: list[str] = []
    tables = [(b.table_parts, column_types(b, d), required_indexes(b))]
    if b.events:
        parts = tuple(b.events.split("."))
        kinds = {name: kind.format(serial="BIGINT", json=d.json_type, time=d.time_type)
                 for name, kind in EVENT_LAYOUT}
        tables.append((parts, kinds, [(n, "the events table") for n in index_names(b.events)]))
    for parts, wanted, indexes in tables:
        label = ".".join(parts)
        rows = yield Batch((d.columns_query(parts), d.indexes_query(parts)))
        have = {str(r[0]): str(r[1] or "") for r in rows[0]}
        if not have:
            problems.append(f"table {label} does not exist")
            continue
        for column, kind in sorted(wanted.items()):
            if column not in have:
                problems.append(f"{label}.{column}: missing (wanted {kind})")
            elif not d.type_fits(kind, have[column]):
                problems.append(f"{label}.{column}: is {have[column]}, wanted {kind}")
        if parts == b.table_parts:
            problems.extend(f"{label}.{column}: NOT NULL without a default, and create "
                            f"{why}" for column, why in _unfilled(b, rows[0]))
        present = {str(r[0]) for r in rows[1]}
        for name, why in indexes:
            if name not in present:
                problems.append(f"{label}: index {name} missing ({why})")
    if problems:
        raise SchemaMismatch(f"{b.table}: the schema lacks what the binding needs:\n  "
                             + "\n  ".join(problems), problems=tuple(problems))
    stale = yield from count_stale(b, d)
    if not stale.clean:
        log.warning("rowstate: %s: rows in states the machine %s no longer has: %s",
                    b.table, b.machine.name, stale.describe())
    return stale


def _unfilled(b: Checked, columns: list[tuple[object, ...]]) -> list[tuple[str, str]]:
    """(column, why) of the required columns (NOT NULL, nothing filled in by the database:
    a default only the application's model knows) that ``create`` leaves out: one the
    binding does not know, or one the engine owns and sets only later (a lease, a claim).
    The binding's data columns are not named: ``create(columns=...)`` fills them."""
    engine_filled = {*b.key, b.state}
    owned = set(b.known) - set(b.payload) - set(b.columns) - set(b.json_columns)
    out = []
    for name, _, required in columns:
        column = str(name)
        if not required or column in engine_filled:
            continue
        if column not in b.known:
            out.append((column, "cannot fill it (the binding does not name it): give it a "
                                "server default or let it be NULL"))
        elif column in owned:
            out.append((column, "leaves it out (the engine writes it later): give it a "
                                "server default or let it be NULL"))
    return out
