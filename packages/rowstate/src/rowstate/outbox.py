"""The events table (audit history and transactional outbox): its layout, written once.

Every statement that writes or reads events (the compare-and-set's event row, a birth, a
set-based move, ``history``, the relay) and the DDL take the column list from here, so the
layout cannot drift between them. ``EVENTS_LAYOUT_VERSION`` names this layout for an
application that puts the table into its own versioned migrations
(:func:`rowstate.schema.migration_sql`).
"""

from __future__ import annotations

import json
from typing import Any

EVENTS_LAYOUT_VERSION = 2

# (column, SQL type or a dialect placeholder: {serial} {json} {time})
EVENT_LAYOUT: tuple[tuple[str, str], ...] = (
    ("id", "{serial}"),
    ("machine", "TEXT NOT NULL"),
    ("row_key", "TEXT NOT NULL"),
    ("edge", "TEXT"),
    ("from_state", "TEXT"),
    ("to_state", "TEXT NOT NULL"),
    ("owner", "TEXT"),
    ("data", "{json}"),
    ("version", "BIGINT"),
    ("created_at", "{time} NOT NULL"),
    ("delivered_at", "{time}"),
    ("actor", "TEXT"),  # layout 2: who moved the row (``by=``)
    ("note", "TEXT"),  # layout 2: why (``note=``)
)

# the columns each layout added after the first, for a table created at an earlier one
# (:func:`rowstate.schema.migration_sql` adds them; ``check_schema`` names them missing)
LAYOUT_ADDED: dict[int, tuple[str, ...]] = {2: ("actor", "note")}

# what a write fills, in order (id is the database's; delivered_at the relay's)
EVENT_WRITTEN = ("machine", "row_key", "edge", "from_state", "to_state", "owner", "data",
                 "version", "created_at", "actor", "note")
EVENT_COLUMNS = ", ".join(EVENT_WRITTEN)
# what a reader takes back, in order
EVENT_READ = ("id", *EVENT_WRITTEN)
EVENT_READ_COLUMNS = ", ".join(EVENT_READ)


def index_names(table: str) -> tuple[str, str]:
    """The two indexes of an events table: per row (history), and undelivered (relay)."""
    name = table.split(".")[-1]
    return f"{name}_row"[:63], f"{name}_undelivered"[:63]


def row_key(kv: tuple[Any, ...]) -> str:
    """The event row's ``row_key``: the key's JSON text (one int key without the encoder).
    Every writer and ``history`` use it, so one row has one identity in its events."""
    if len(kv) == 1 and type(kv[0]) is int:
        return f"[{kv[0]}]"
    return json.dumps(list(kv))
