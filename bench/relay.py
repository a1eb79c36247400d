"""Case 8: the outbox relay's delivery rate to NATS JetStream (PostgreSQL, asyncio).

Each phase fills an events table with ``n`` undelivered events (untimed, one INSERT), then
times draining it: ``rowstate.AsyncRelay`` with ``rowstate.contrib.nats.NatsPublisher``
(one publish per event awaiting the stream's ack, deduplicated by ``Nats-Msg-Id``; rows
marked delivered per batch of 500) against the same loop written by hand on the same
driver and the same NATS connection. The two sides have their own events tables and
subjects; the stream is created for the run and deleted after it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

from rowstate import AsyncRelay
from rowstate.contrib.nats import NatsPublisher
from rowstate.dialects import Postgres
from rowstate.schema import events_sql
from rowstate.stores import AsyncPostgresStore

from .env import Env
from .harness import Result, Settings, compare_async

BATCH = 500


class _Filler:
    def __init__(self, conn: psycopg.AsyncConnection[Any], table: str, machine: str) -> None:
        self.conn, self.table, self.machine = conn, table, machine

    async def fill(self, n: int) -> None:
        await self.conn.execute(
            f"INSERT INTO {self.table} (machine, row_key, edge, from_state, to_state, owner, "
            "data, version, created_at) SELECT %s, '[' || x || ']', 'go', 'A', 'B', NULL, "
            "'{\"n\": 1}'::jsonb, 1, now() FROM generate_series(1, %s) AS g(x)",
            (self.machine, n))


class LibRelay:
    """``prepare(n)`` fills the outbox; one ``op()`` drains it (n events)."""

    def __init__(self, relay: AsyncRelay, filler: _Filler) -> None:
        self.relay, self.filler = relay, filler
        self.delivered = 0

    async def prepare(self, n: int) -> None:
        await self.filler.fill(n)

    async def op(self) -> None:
        self.delivered += await self.relay.drain()


class HandRelay(LibRelay):
    def __init__(self, conn: psycopg.AsyncConnection[Any], js: Any, table: str,
                 subject: str, filler: _Filler) -> None:
        self.conn, self.js, self.table, self.subject = conn, js, table, subject
        self.filler = filler
        self.delivered = 0

    async def op(self) -> None:
        while True:
            cur = await self.conn.execute(
                "SELECT id, machine, row_key, edge, from_state, to_state, owner, data, "
                f"version, created_at FROM {self.table} WHERE delivered_at IS NULL "
                f"ORDER BY id LIMIT {BATCH}")
            rows = await cur.fetchall()
            if not rows:
                return
            done = []
            for r in rows:
                msg_id = f"{r[1]}:{r[0]}"
                body = json.dumps({
                    "id": msg_id, "machine": r[1], "key": json.loads(r[2]), "edge": r[3],
                    "from": r[4], "to": r[5], "owner": r[6], "data": r[7], "version": r[8],
                    "at": r[9].isoformat() if r[9] else None,
                }).encode()
                await self.js.publish(self.subject, body, headers={"Nats-Msg-Id": msg_id})
                done.append(r[0])
            await self.conn.execute(
                f"UPDATE {self.table} SET delivered_at = now() WHERE id = ANY(%s)", (done,))
            self.delivered += len(done)


class _Drain:
    """Adapts one drain into the harness: a phase of ``n`` 'ops' is one drain of n events."""

    def __init__(self, inner: LibRelay) -> None:
        self.inner = inner
        self.pending = 0

    async def prepare(self, n: int) -> None:
        await self.inner.prepare(n)
        self.pending = n

    async def op(self) -> None:
        if self.pending:
            await self.inner.op()
            self.pending = 0


async def _run(env: Env, url: str, settings: Settings) -> tuple[float, float, dict[str, Any]]:
    import nats

    assert env.pg_dsn
    tag = uuid.uuid4().hex[:8]
    stream, prefix = f"ROWSTATE_BENCH_{tag}", f"rsbench{tag}"
    nc = await nats.connect(url, name="rowstate-bench")
    js = nc.jetstream()
    await js.add_stream(name=stream, subjects=[f"{prefix}.>", f"{prefix}hand.>"])
    admin = await psycopg.AsyncConnection.connect(env.pg_dsn, autocommit=True)
    hand_conn = await psycopg.AsyncConnection.connect(env.pg_dsn, autocommit=True)
    store = AsyncPostgresStore(env.pg_dsn, min_size=1, max_size=1)
    try:
        for table in ("bench_relay_lib", "bench_relay_hand"):
            for stmt in events_sql(table, Postgres()):
                await admin.execute(stmt)
        relay = AsyncRelay(store, [NatsPublisher(js, prefix=prefix)], table="bench_relay_lib",
                           batch=BATCH)
        lib = _Drain(LibRelay(relay, _Filler(admin, "bench_relay_lib", "bench_relay")))
        hand = _Drain(HandRelay(hand_conn, js, "bench_relay_hand",
                                f"{prefix}hand.bench_relay",
                                _Filler(admin, "bench_relay_hand", "bench_relay")))
        # a phase of n 'ops' is one drain of n events (the other n - 1 ops are no-ops)
        lib_s, hand_s, detail = await compare_async(settings, [lib], [hand])
        info = await js.stream_info(stream)
        detail["stream_messages"] = info.state.messages
        detail["delivered"] = {"library": lib.inner.delivered, "baseline": hand.inner.delivered}
        detail["note"] = "events/s delivered with ack; no target"
        return lib_s, hand_s, detail
    finally:
        await store.close()
        await hand_conn.close()
        await admin.close()
        try:
            await js.delete_stream(stream)
        finally:
            await nc.close()


def run(env: Env, settings: Settings, report: Callable[[Result], None]) -> None:
    url = env.start_nats()
    if url is None:
        return
    lib_s, hand_s, detail = asyncio.run(_run(env, url, settings))
    report(Result("relay_nats", "postgresql", "async", 1, lib_s, hand_s, None, None,
                  detail=detail))
