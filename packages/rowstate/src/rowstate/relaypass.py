"""One pass of the outbox relay, written once as a core operation (:mod:`rowstate.relay`
says what the relay promises); the relays that drive it are ``_async/relay.py`` (the
source) and ``_sync/relay.py`` (generated from it by ``scripts/unasync.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from .dialects import Dialect, Postgres, SQLite, check_ident
from .errors import DefinitionError, StoreError
from .outbox import EVENT_READ_COLUMNS
from .protocol import Batch, Call
from .results import Event

if TYPE_CHECKING:  # types only: importing the front ends loads no driver
    from .stores import AsyncStore, Store

Publisher = Callable[[Event], Any]


def _dialect(store: Store | AsyncStore) -> Dialect:
    return SQLite() if store.dialect == "sqlite" else Postgres()


def _table_parts(table: str) -> tuple[str, ...]:
    """The relay's table name, checked as ``Binding(events=...)`` checks it: the name is
    pasted into SQL text (it cannot be a bound parameter), so only plain identifiers pass."""
    if not isinstance(table, str):
        raise DefinitionError(f"relay table {table!r}: write 'table' or 'schema.table'")
    parts = tuple(table.split("."))
    if not 1 <= len(parts) <= 2:
        raise DefinitionError(f"relay table {table!r}: write 'table' or 'schema.table'")
    for part in parts:
        check_ident(part, "relay table name part")
    return parts


def _derive_namespace(d: Dialect, parts: tuple[str, ...]
                      ) -> Generator[Batch | Call, Any, str | None]:
    """The events table's identity (see the module docstring), hashed; None while it
    cannot be told yet (a PostgreSQL table that does not exist: the pass's own read then
    fails with the database's error; an SQLite table with no event yet)."""
    import hashlib  # once per relay: not a cost of `import rowstate`
    import uuid

    rows = yield Batch((d.identity_query(parts),))
    if rows[0] and rows[0][0][0] == "":  # in memory: nothing outlives this process
        return uuid.uuid4().hex[:16]
    identity = rows[0][0] if rows[0] else (None,)
    if any(v is None for v in identity):
        return None
    text = ":".join([d.name, *(str(v) for v in identity), *parts])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class RelayBase:
    """What both twins share: the checked table name and the namespace of stable ids."""

    def __init__(self, store: Store | AsyncStore, publishers: Sequence[Publisher], *,
                 table: str, batch: int, namespace: str | None) -> None:
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise DefinitionError(f"relay namespace {namespace!r}: a non-empty string")
        self.parts = _table_parts(table)
        self.publishers, self.table, self.batch = publishers, table, batch
        self.dialect = _dialect(store)
        #: the first part of every delivered event's ``stable_id``; unless given, derived
        #: on the first pass that has an event to deliver
        self.namespace: str | None = namespace

    def _pass(self) -> Generator[Batch | Call, Any, int]:
        """One pass. The namespace is derived (and kept) before the first event is
        published, once there is one, so a redelivery carries the same stable id."""
        d, parts, limit = self.dialect, self.parts, self.batch
        t = d.table(parts)
        p = d.placeholder
        rows = yield Batch(((
            f"SELECT {EVENT_READ_COLUMNS} FROM {t} WHERE delivered_at IS NULL ORDER BY id "
            f"LIMIT {int(limit)}",
            [],
        ),))
        if not rows[0]:
            return 0
        if self.namespace is None:
            self.namespace = yield from _derive_namespace(d, parts)
            if self.namespace is None:
                raise StoreError(f"cannot derive a namespace for relay table {self.table!r}"
                                 " (see rowstate.relay): pass namespace=")
        namespace = self.namespace
        done: list[int] = []
        try:
            for r in rows[0]:
                data = d.load_json(r[7])
                event = Event(r[1], tuple(json.loads(r[2])), r[3], r[4], r[5], r[6], data, r[8],
                              d.parse_time(r[9]), r[0], namespace, r[10], r[11])
                for publish in self.publishers:
                    yield Call(publish, event)
                done.append(r[0])
        finally:
            if done:
                mark = f"UPDATE {t} SET delivered_at = {d.db_now()} WHERE {d.in_list('id', p)}"
                yield Batch(((mark, [d.list_param(done)]),))
        return len(done)
