"""DDL for what a binding needs: its columns, its indexes and the events table.

On PostgreSQL every column is added with ``ADD COLUMN IF NOT EXISTS`` after a
``CREATE TABLE IF NOT EXISTS`` of the key, so the same script migrates a table a service
already owns. SQLite cannot add a column conditionally, so there the script creates the
whole table at once (the embedded case: the engine owns the file).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .dialects import Dialect
from .outbox import EVENT_LAYOUT, LAYOUT_ADDED, index_names
from .specs import NOW, FinalizationClaim, Lease, Notice, TimedEdge, Unique


class Layout(Protocol):
    """What the DDL reads of a binding (:class:`rowstate.Binding` is one): its table, its
    columns and the parts they serve. A protocol, so that the binding can offer
    ``schema_sql`` and ``check_schema`` while this module stays below it."""

    @property
    def table(self) -> str: ...
    @property
    def table_parts(self) -> tuple[str, ...]: ...
    @property
    def key(self) -> tuple[str, ...]: ...
    @property
    def state(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def lease(self) -> Lease | None: ...
    @property
    def finalization(self) -> FinalizationClaim | None: ...
    @property
    def invariants(self) -> tuple[Unique, ...]: ...
    @property
    def events(self) -> str | None: ...
    @property
    def known(self) -> frozenset[str]: ...
    @property
    def json_columns(self) -> tuple[str, ...]: ...
    @property
    def payload(self) -> tuple[str, ...]: ...
    @property
    def columns(self) -> tuple[str, ...]: ...
    @property
    def column_types(self) -> Mapping[str, str]: ...
    @property
    def on_enter(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def timers(self) -> tuple[TimedEdge, ...]: ...
    @property
    def notices(self) -> tuple[Notice, ...]: ...

    def unique_index_name(self, inv: Unique) -> str: ...


def column_types(b: Layout, d: Dialect) -> dict[str, str]:
    types: dict[str, str] = {c: "TEXT" for c in b.known}
    for c in b.json_columns:
        types[c] = d.json_type
    if b.version:
        types[b.version] = "BIGINT NOT NULL DEFAULT 0"
    if b.lease:
        types[b.lease.at] = d.time_type
        if b.lease.failed_at:
            types[b.lease.failed_at] = d.time_type
        if b.lease.token:
            types[b.lease.token] = "BIGINT NOT NULL DEFAULT 0"
    if b.finalization:
        types[b.finalization.at] = d.time_type
        if b.finalization.token:
            types[b.finalization.token] = "BIGINT NOT NULL DEFAULT 0"
    for writes in b.on_enter.values():
        for target, value in writes.items():
            if value is NOW and "." not in target:
                types[target] = d.time_type
    for t in b.timers:
        types[t.due] = d.time_type
    for n in b.notices:
        types[n.due] = d.time_type
        types[n.claim] = d.time_type
    for column, declared in b.column_types.items():
        word, _, rest = declared.partition(" ")
        # TIMESTAMPTZ is the engine's own time type: SQLite's is the canonical text
        types[column] = (f"{d.time_type} {rest}".rstrip() if word.upper() == "TIMESTAMPTZ"
                         else declared)
    return types


def required_indexes(b: Layout) -> list[tuple[str, str]]:
    """(name, why) of the indexes the engine relies on: the UNIQUE invariants enforce
    rules; the others keep due queries and lease sweeps off full scans."""
    name = b.table_parts[-1]
    out = [(b.unique_index_name(inv), f"the UNIQUE invariant on {inv.state}")
           for inv in b.invariants]
    if b.finalization:
        out.append((f"idx_{name}_finalizing_claim"[:63], "finalization claims"))
    if b.lease:
        out.append((f"idx_{name}_lease"[:63], "live leases"))
    for due in dict.fromkeys([*(t.due for t in b.timers), *(n.due for n in b.notices)]):
        out.append((f"idx_{name}_{due}"[:63], f"the due query on {due}"))
    return out


def _indexes(b: Layout, d: Dialect) -> list[str]:
    table = d.table(b.table_parts)
    stmts: list[str] = []
    name = b.table_parts[-1]
    index_table = table
    for inv in b.invariants:
        cols = ", ".join(d.quote(c) for c in (*inv.per, b.state))
        state = inv.state.replace("'", "''")
        stmts.append(
            f"CREATE UNIQUE INDEX IF NOT EXISTS {d.quote(b.unique_index_name(inv))} "
            f"ON {index_table} ({cols}) WHERE {d.quote(b.state)} = '{state}'"
        )
    if b.finalization:
        f = b.finalization
        stmts.append(
            f"CREATE INDEX IF NOT EXISTS {d.quote(f'idx_{name}_finalizing_claim'[:63])} "
            f"ON {index_table} ({d.quote(f.holder)}, {d.quote(f.scope)}, {d.quote(f.at)}) "
            f"WHERE {d.quote(f.holder)} IS NOT NULL"
        )
    if b.lease:
        stmts.append(
            f"CREATE INDEX IF NOT EXISTS {d.quote(f'idx_{name}_lease'[:63])} "
            f"ON {index_table} ({d.quote(b.lease.at)}) WHERE {d.quote(b.lease.at)} IS NOT NULL"
        )
    dues = dict.fromkeys([*(t.due for t in b.timers), *(n.due for n in b.notices)])
    for due in dues:
        stmts.append(
            f"CREATE INDEX IF NOT EXISTS {d.quote(f'idx_{name}_{due}'[:63])} "
            f"ON {index_table} ({d.quote(b.state)}, {d.quote(due)}) "
            f"WHERE {d.quote(due)} IS NOT NULL"
        )
    return stmts


def migration_sql(b: Layout, d: Dialect, existing: tuple[str, ...] = ()) -> list[str]:
    """What the engine needs on a table the application already created, as statements
    for the application's own versioned migration: every engine column (``ADD COLUMN``,
    key columns excepted), its indexes, and the events table (layout
    :data:`~rowstate.outbox.EVENTS_LAYOUT_VERSION`). ``schema_sql`` stays for quick
    starts; this is for a schema the application owns. ``existing`` names the columns
    the table has; naming the events table there too says it exists already (made at an
    earlier layout), and its statements add what later layouts added."""
    table = d.table(b.table_parts)
    types = column_types(b, d)
    stmts = [f"ALTER TABLE {table} ADD COLUMN {d.quote(c)} {types[c]}"
             for c in sorted(types) if c not in b.key and c not in existing]
    stmts.extend(_indexes(b, d))
    if b.events:
        stmts.extend(events_sql(b.events, d, existing=b.events in existing))
    return stmts


def schema_sql(b: Layout, d: Dialect) -> str:
    table = d.table(b.table_parts)
    types = column_types(b, d)
    order = [*b.key, *sorted(c for c in types if c not in b.key)]
    stmts: list[str] = []
    if d.has_schemas and len(b.table_parts) == 2:
        stmts.append(f"CREATE SCHEMA IF NOT EXISTS {d.quote(b.table_parts[0])}")
    pk = ", ".join(d.quote(k) for k in b.key)
    if d.add_column_if_not_exists:
        keys = ", ".join(f"{d.quote(k)} {types[k]} NOT NULL" for k in b.key)
        stmts.append(f"CREATE TABLE IF NOT EXISTS {table} ({keys}, PRIMARY KEY ({pk}))")
        stmts.extend(
            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {d.quote(c)} {types[c]}"
            for c in order
            if c not in b.key
        )
    else:
        cols = ", ".join(
            f"{d.quote(c)} {types[c]}{' NOT NULL' if c in b.key else ''}" for c in order
        )
        stmts.append(f"CREATE TABLE IF NOT EXISTS {table} ({cols}, PRIMARY KEY ({pk}))")
    stmts.extend(_indexes(b, d))
    if b.events:
        stmts.extend(events_sql(b.events, d))
    return ";\n".join(stmts) + ";\n"


def events_sql(events: str, d: Dialect, *, existing: bool = False) -> list[str]:
    """The events table of :mod:`rowstate.outbox`'s layout, and its two indexes.

    A table made at an earlier layout lacks the columns later layouts added
    (:data:`~rowstate.outbox.LAYOUT_ADDED`): PostgreSQL adds them whenever they are missing
    (``ADD COLUMN IF NOT EXISTS``, so one script serves a new and an old table); SQLite
    cannot add a column conditionally, so there they are added only when the caller says
    the table exists (``existing``, from ``migration_sql(existing=(events_table, ...))``).
    """
    parts = tuple(events.split("."))
    table = d.table(parts)
    stmts = []
    if d.has_schemas and len(parts) == 2:
        stmts.append(f"CREATE SCHEMA IF NOT EXISTS {d.quote(parts[0])}")
    kinds = {name: kind.format(serial=d.serial_pk, json=d.json_type, time=d.time_type)
             for name, kind in EVENT_LAYOUT}
    added = [name for names in LAYOUT_ADDED.values() for name in names]
    if existing and not d.add_column_if_not_exists:
        stmts.extend(f"ALTER TABLE {table} ADD COLUMN {name} {kinds[name]}" for name in added)
    else:
        cols = ", ".join(f"{name} {kind}" for name, kind in kinds.items())
        stmts.append(f"CREATE TABLE IF NOT EXISTS {table} ({cols})")
        if d.add_column_if_not_exists:
            stmts.extend(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {kinds[name]}"
                         for name in added)
    by_row, undelivered = index_names(events)
    stmts.append(f"CREATE INDEX IF NOT EXISTS {d.quote(by_row)} "
                 f"ON {table} (machine, row_key, id)")
    stmts.append(f"CREATE INDEX IF NOT EXISTS {d.quote(undelivered)} "
                 f"ON {table} (id) WHERE delivered_at IS NULL")
    return stmts
