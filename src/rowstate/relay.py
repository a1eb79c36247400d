"""The outbox relay: delivers event rows at least once, in order per row, with a stable id.

Events are written by the transition itself (same atomic write), so nothing is lost between
the write and the publish. The relay reads undelivered rows in id order, hands each to every
publisher, and marks them delivered. A publisher that raises stops the pass at that event:
it and every later event stay undelivered and are retried on the next pass, so the order per
row holds (rows of one key get increasing ids, because their writes serialize on the row).
A crash between the publish and the mark redelivers: consumers dedupe on ``stable_id``
(NATS JetStream does it for us through the ``Nats-Msg-Id`` header).

Run one relay per events table. Two relays are safe (at least once still holds) but may
deliver an event twice and interleave.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from .compiler import Batch
from .core import Call
from .dialects import Dialect, Postgres, SQLite
from .drive import adrive, drive
from .results import Event

if TYPE_CHECKING:  # types only: importing the front ends loads no driver
    from .stores import AsyncStore, Store

Publisher = Callable[[Event], Any]


def _dialect(store: Store | AsyncStore) -> Dialect:
    return SQLite() if store.dialect == "sqlite" else Postgres()


def _deliver(d: Dialect, table: str, publishers: Sequence[Publisher],
             limit: int) -> Generator[Batch | Call, Any, int]:
    t = d.table(tuple(table.split(".")))
    p = d.placeholder
    rows = yield Batch(((
        "SELECT id, machine, row_key, edge, from_state, to_state, owner, data, version, "
        f"created_at FROM {t} WHERE delivered_at IS NULL ORDER BY id LIMIT {int(limit)}",
        [],
    ),))
    done: list[int] = []
    try:
        for r in rows[0]:
            data = d.load_json(r[7])
            event = Event(r[1], tuple(json.loads(r[2])), r[3], r[4], r[5], r[6], data, r[8],
                          d.parse_time(r[9]), r[0])
            for publish in publishers:
                yield Call(publish, event)
            done.append(r[0])
    finally:
        if done:
            if isinstance(d, Postgres):
                mark = f"UPDATE {t} SET delivered_at = now() WHERE id = ANY({p})"
                arg: Any = done
            else:
                mark = (f"UPDATE {t} SET delivered_at = {d.db_now()} "
                        f"WHERE id IN (SELECT value FROM json_each({p}))")
                arg = json.dumps(done)
            yield Batch(((mark, [arg]),))
    return len(done)


class Relay:
    def __init__(self, store: Store, publishers: Sequence[Publisher], *,
                 table: str = "rowstate_events", batch: int = 500) -> None:
        self.store, self.publishers, self.table, self.batch = store, publishers, table, batch
        self.d = _dialect(store)

    def deliver(self) -> int:
        """One pass; returns how many events were delivered."""
        return drive(self.store, _deliver(self.d, self.table, self.publishers, self.batch))

    def drain(self) -> int:
        total = 0
        while n := self.deliver():
            total += n
        return total


class AsyncRelay:
    def __init__(self, store: AsyncStore, publishers: Sequence[Publisher], *,
                 table: str = "rowstate_events", batch: int = 500) -> None:
        self.store, self.publishers, self.table, self.batch = store, publishers, table, batch
        self.d = _dialect(store)

    async def deliver(self) -> int:
        return await adrive(self.store, _deliver(self.d, self.table, self.publishers,
                                                 self.batch))

    async def drain(self) -> int:
        total = 0
        while n := await self.deliver():
            total += n
        return total


class NatsPublisher:
    """Publishes to NATS JetStream, subject ``<prefix>.<machine>``, deduplicated by the
    event's stable id (``Nats-Msg-Id``), waiting for the stream's acknowledgement."""

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

