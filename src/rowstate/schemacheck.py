"""``check_schema``: what a migrated table lacks, in one clear error.

An application that owns its schema (versioned migrations) must give the engine every
column, type and index its binding names. The check reads the database's own catalogue
(``pragma_table_info`` / ``information_schema``), compares it with what the binding needs
(the same list :func:`rowstate.schema.schema_sql` creates) and reports every problem at
once, so a deployment fails at start-up with the whole list instead of one confusing
error per call.
"""

from __future__ import annotations

from .dialects import Dialect
from .errors import SchemaMismatch
from .outbox import EVENT_LAYOUT, index_names
from .protocol import Batch, Op
from .schema import Layout, column_types, required_indexes


def check_schema(b: Layout, d: Dialect) -> Op[None]:
    """Raise :class:`SchemaMismatch` naming every missing table, column, type or index."""
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
        present = {str(r[0]) for r in rows[1]}
        for name, why in indexes:
            if name not in present:
                problems.append(f"{label}: index {name} missing ({why})")
    if problems:
        raise SchemaMismatch(f"{b.table}: the schema lacks what the binding needs:\n  "
                             + "\n  ".join(problems), problems=tuple(problems))
