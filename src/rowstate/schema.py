"""DDL for what a binding needs: its columns, its indexes and the events table.

On PostgreSQL every column is added with ``ADD COLUMN IF NOT EXISTS`` after a
``CREATE TABLE IF NOT EXISTS`` of the key, so the same script migrates a table a service
already owns. SQLite cannot add a column conditionally, so there the script creates the
whole table at once (the embedded case: the engine owns the file).
"""

from __future__ import annotations

from .binding import NOW, Binding
from .dialects import Dialect, Postgres


def _column_types(b: Binding, d: Dialect) -> dict[str, str]:
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
    types.update(b.column_types)
    return types


def schema_sql(b: Binding, d: Dialect) -> str:
    table = d.table(b.table_parts)
    types = _column_types(b, d)
    order = [*b.key, *sorted(c for c in types if c not in b.key)]
    stmts: list[str] = []
    if isinstance(d, Postgres) and len(b.table_parts) == 2:
        stmts.append(f"CREATE SCHEMA IF NOT EXISTS {d.quote(b.table_parts[0])}")
    pk = ", ".join(d.quote(k) for k in b.key)
    if isinstance(d, Postgres):
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
    if b.events:
        stmts.extend(events_sql(b.events, d))
    return ";\n".join(stmts) + ";\n"


def events_sql(events: str, d: Dialect) -> list[str]:
    parts = tuple(events.split("."))
    table = d.table(parts)
    name = parts[-1]
    stmts = []
    if isinstance(d, Postgres) and len(parts) == 2:
        stmts.append(f"CREATE SCHEMA IF NOT EXISTS {d.quote(parts[0])}")
    stmts.append(
        f"CREATE TABLE IF NOT EXISTS {table} ("
        f"id {d.serial_pk}, machine TEXT NOT NULL, row_key TEXT NOT NULL, "
        f"edge TEXT, from_state TEXT, to_state TEXT NOT NULL, owner TEXT, "
        f"data {d.json_type}, version BIGINT, created_at {d.time_type} NOT NULL, "
        f"delivered_at {d.time_type})"
    )
    stmts.append(
        f"CREATE INDEX IF NOT EXISTS {d.quote(f'{name}_row'[:63])} "
        f"ON {table} (machine, row_key, id)"
    )
    stmts.append(
        f"CREATE INDEX IF NOT EXISTS {d.quote(f'{name}_undelivered'[:63])} "
        f"ON {table} (id) WHERE delivered_at IS NULL"
    )
    return stmts
