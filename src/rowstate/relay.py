"""The outbox relay: delivers event rows at least once, in order per row, with a stable id.

Events are written by the transition itself (same atomic write), so nothing is lost between
the write and the publish. The relay reads undelivered rows in id order, hands each to every
publisher, and marks them delivered. A publisher that raises stops the pass at that event:
it and every later event stay undelivered and are retried on the next pass, so the order per
row holds (rows of one key get increasing ids, because their writes serialize on the row).
A crash between the publish and the mark redelivers: consumers dedupe on ``stable_id``
(NATS JetStream does it for us through the ``Nats-Msg-Id`` header).

An event id is unique only within its events table, so a delivered event's ``stable_id``
is ``<namespace>:<machine>:<event id>``: two events tables (two tenants or regions, two
databases, or a table dropped and created again, whose ids start at 1 again) relaying into
one stream must not drop each other's events as duplicates. The namespace is ``namespace=``
when given (a name the operator keeps stable, e.g. ``"eu-1"``), else derived on the first
pass from the table's identity, hashed to 16 hex digits:

* PostgreSQL: the cluster's ``system_identifier`` (``pg_control_system()``), the database's
  oid and the events table's oid, so a restored copy on another cluster or a recreated
  table gets a new namespace while a restart of the server keeps it;
* SQLite: the database file's path and the time of the table's first event (a table
  created again starts with a new first event; a path alone would let two hosts with the
  same file path collide). Until the table holds an event there is nothing to derive it
  from, nor anything to deliver. An in-memory database gets a random namespace per relay,
  since it dies with the process.

The namespace is derived once per relay object. Deleting a table's first events (pruning)
changes what a new relay derives: events redelivered across that restart then come twice
(at least once still holds), never lost.

Pass ``namespace=`` when the derived one does not fit: the database is moved to another
path or cluster while events are in flight, or ``pg_control_system()`` is not granted.

Run one relay per events table. Two relays are safe (at least once still holds) but may
deliver an event twice and interleave.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from .dialects import Dialect, Postgres, SQLite, check_ident
from .errors import DefinitionError, StoreError
from .protocol import Batch, Call, adrive, drive
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
    rows = yield Batch((d.identity_query(parts),))
    if rows[0] and rows[0][0][0] == "":  # in memory: nothing outlives this process
        return uuid.uuid4().hex[:16]
    identity = rows[0][0] if rows[0] else (None,)
    if any(v is None for v in identity):
        return None
    text = ":".join([d.name, *(str(v) for v in identity), *parts])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class _RelayBase:
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
            "SELECT id, machine, row_key, edge, from_state, to_state, owner, data, version, "
            f"created_at FROM {t} WHERE delivered_at IS NULL ORDER BY id LIMIT {int(limit)}",
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
                              d.parse_time(r[9]), r[0], namespace)
                for publish in self.publishers:
                    yield Call(publish, event)
                done.append(r[0])
        finally:
            if done:
                mark = f"UPDATE {t} SET delivered_at = {d.db_now()} WHERE {d.in_list('id', p)}"
                yield Batch(((mark, [d.list_param(done)]),))
        return len(done)


class Relay(_RelayBase):
    def __init__(self, store: Store, publishers: Sequence[Publisher], *,
                 table: str = "rowstate_events", batch: int = 500,
                 namespace: str | None = None) -> None:
        super().__init__(store, publishers, table=table, batch=batch, namespace=namespace)
        self.store = store

    def deliver(self) -> int:
        """One pass; returns how many events were delivered."""
        return drive(self.store, self._pass())

    def drain(self) -> int:
        total = 0
        while n := self.deliver():
            total += n
        return total


class AsyncRelay(_RelayBase):
    def __init__(self, store: AsyncStore, publishers: Sequence[Publisher], *,
                 table: str = "rowstate_events", batch: int = 500,
                 namespace: str | None = None) -> None:
        super().__init__(store, publishers, table=table, batch=batch, namespace=namespace)
        self.store = store

    async def deliver(self) -> int:
        return await adrive(self.store, self._pass())

    async def drain(self) -> int:
        total = 0
        while n := await self.deliver():
            total += n
        return total


class NatsPublisher:
    """Publishes to NATS JetStream, subject ``<prefix>.<machine>``, deduplicated by the
    event's stable id (``Nats-Msg-Id``: ``<namespace>:<machine>:<event id>``, unique across
    events tables and databases), waiting for the stream's acknowledgement."""

    def __init__(self, js: Any, prefix: str = "rowstate") -> None:
        self.js = js
        self.prefix = prefix

    async def __call__(self, event: Event) -> None:
        body = json.dumps({
            "id": event.stable_id, "machine": event.machine, "key": list(event.key),
            "edge": event.edge, "from": event.from_state, "to": event.to_state,
            "owner": event.owner, "data": event.data, "version": event.version,
            "at": event.at.isoformat() if event.at else None,
        }).encode()
        await self.js.publish(f"{self.prefix}.{event.machine}", body,
                              headers={"Nats-Msg-Id": event.stable_id})

