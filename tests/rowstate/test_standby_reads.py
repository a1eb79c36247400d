"""Reads on a standby (issue 30): a store's ``read_url``, and the rules that keep a caller's
own writes in its reads (:mod:`rowstate.stores.pgreads`).

A real streaming standby of a throwaway primary (:func:`support.pg_standby.replicated`).
Which node answered a unit is read from it (``inet_server_port()``); a standby that is
behind is made so for real, by pausing its replay (``pg_wal_replay_pause()``), so that a
read there would miss a write the primary acknowledged.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import io
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import rowstate
from rowstate import AsyncLifecycle, Binding, ConnectError, Lifecycle, ValidationError
from rowstate.cli import main
from rowstate.stores import AsyncPostgresStore, PostgresStore
from support.engine import SLOT
from support.pg_server import PostgresServer
from support.pg_standby import caught_up, replicated
from support.services import LOCALHOST, ServiceUnavailable, free_port
from support.stuck_rows import app_module, seed

pytestmark = pytest.mark.postgres

TWINS = ["sync", "async"]
ROWS = Binding(SLOT, table="standby_slots", key=("id",), version="version")


async def call(got: Any) -> Any:
    return await got if inspect.isawaitable(got) else got


def _slots(dsn: str) -> None:
    store = PostgresStore(dsn)
    try:
        lc = Lifecycle(store, ROWS)
        lc.create_schema()
    finally:
        store.close()


class Pair:
    """The primary and its standby, with this module's database on both."""

    def __init__(self, primary: PostgresServer, standby: PostgresServer, name: str) -> None:
        assert primary.port is not None and standby.port is not None
        self.primary, self.standby, self.name = primary, standby, name

    def url(self, *servers: PostgresServer, attrs: str = "read-write") -> str:
        hosts = ",".join(f"{LOCALHOST}:{s.port}" for s in servers)
        return f"postgresql://postgres@{hosts}/{self.name}?target_session_attrs={attrs}"

    def store(self, twin: str, read_url: str | None = None, **options: Any) -> Any:
        """A store whose writes go to the primary and whose reads go to ``read_url``
        (default: both nodes, the standby preferred)."""
        if read_url is None:
            read_url = self.url(self.standby, self.primary, attrs="prefer-standby")
        cls = PostgresStore if twin == "sync" else AsyncPostgresStore
        return cls(self.url(self.primary), read_url=read_url, **options)

    def replay(self, on: bool) -> None:
        """Pause or resume the standby's replay (it still receives the log)."""
        with psycopg.connect(self.standby.admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_resume()" if on else
                         "SELECT pg_wal_replay_pause()")

    def caught_up(self) -> None:
        caught_up(self.primary.admin_dsn, self.standby.admin_dsn)

    def rows(self, n: int) -> list[str]:
        """``n`` new rows in IDLE, made through a store of their own and replayed on the
        standby before the test reads."""
        keys = [f"r{uuid.uuid4().hex[:10]}" for _ in range(n)]
        store = PostgresStore(self.url(self.primary))
        try:
            lc = Lifecycle(store, ROWS)
            for key in keys:
                lc.create(key)
        finally:
            store.close()
        self.caught_up()
        return keys


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    try:
        with replicated(_slots) as (primary, standby, name):
            yield Pair(primary, standby, name)
    except ServiceUnavailable as exc:
        pytest.skip(f"no throwaway primary and standby: {exc}")


def lifecycle(store: Any) -> Any:
    return Lifecycle(store, ROWS) if isinstance(store, PostgresStore) else AsyncLifecycle(
        store, ROWS)


async def answered(store: Any, *, read_only: bool, key: str = "") -> tuple[int, str | None]:
    """(the port of the node a unit ran on, the state of ``key`` it read)."""
    sql = ("SELECT inet_server_port() AS port, "
           f"(SELECT state FROM {ROWS.table} WHERE id = %s) AS state")
    if isinstance(store, PostgresStore):
        with store.atomic(read_only=read_only) as tx:
            row = tx.execute(sql, [key])[0]
    else:
        async with store.atomic(read_only=read_only) as tx:
            row = (await tx.execute(sql, [key]))[0]
    return int(row["port"]), row["state"]


async def elsewhere(coro_fn: Any) -> Any:
    """Run ``coro_fn()`` in a fresh context, as another request or task would be: the
    context vars this one set (its writes) are not there."""
    return await asyncio.create_task(coro_fn(), context=contextvars.Context())


@pytest.mark.parametrize("twin", TWINS)
async def test_read_only_units_go_to_the_standby_until_this_context_writes(
        pair: Pair, twin: str) -> None:
    (key,) = pair.rows(1)
    store = pair.store(twin)
    try:
        lc = lifecycle(store)
        assert (await answered(store, read_only=True))[0] == pair.standby.port
        assert (await answered(store, read_only=False))[0] == pair.primary.port
        # a read outside a unit (a get) goes to the primary and is no write: the next
        # read-only unit still reads the standby
        assert (await call(lc.get(key)))["state"] == "IDLE"

        async def fresh() -> int:
            return (await answered(store, read_only=True))[0]

        assert await elsewhere(fresh) == pair.standby.port
        # a move: this context's read-only units now read the primary, and see it
        assert (await call(lc.transition(key, "LIVE", from_="IDLE"))).applied
        assert await answered(store, read_only=True, key=key) == (pair.primary.port, "LIVE")
        # another context did not write: the standby for it
        assert await elsewhere(fresh) == pair.standby.port
    finally:
        await call(store.close())


@pytest.mark.parametrize("twin", TWINS)
async def test_a_reader_after_a_position_never_reads_a_standby_behind_it(
        pair: Pair, twin: str) -> None:
    """The standby's replay paused: a write on the primary is not there. A reader in
    another context, reading after the writer's position, is sent to the primary and sees
    it; a reader without the position reads the standby and does not (the rule is what
    makes the difference). Replay resumed: the same reader reads the standby, which has
    it."""
    (key,) = pair.rows(1)
    store = pair.store(twin)
    try:
        lc = lifecycle(store)
        pair.replay(False)
        try:
            assert (await call(lc.transition(key, "LIVE", from_="IDLE"))).applied
            position = await call(store.position())
            assert isinstance(position, str) and "/" in position

            async def after() -> tuple[int, str]:
                with store.reading_after(position):
                    return await answered(store, read_only=True, key=key)

            async def without() -> tuple[int, str]:
                return await answered(store, read_only=True, key=key)

            assert await elsewhere(after) == (pair.primary.port, "LIVE")
            assert store.reads.behind == 1
            assert await elsewhere(without) == (pair.standby.port, "IDLE")  # stale
        finally:
            pair.replay(True)
        pair.caught_up()
        assert await elsewhere(after) == (pair.standby.port, "LIVE")
        assert store.reads.behind == 1
    finally:
        await call(store.close())


@pytest.mark.parametrize("twin", TWINS)
async def test_a_read_url_that_finds_only_the_primary_reads_there_caught_up(
        pair: Pair, twin: str) -> None:
    """``prefer-standby`` with no standby listed (or none up) connects to the primary,
    which has nothing to replay: a position is always reached there."""
    store = pair.store(twin, read_url=pair.url(pair.primary, attrs="prefer-standby"))
    try:
        position = await call(store.position())

        async def after() -> int:
            with store.reading_after(position):
                return (await answered(store, read_only=True))[0]

        assert await elsewhere(after) == pair.primary.port
        assert store.reads.behind == 0
    finally:
        await call(store.close())


async def test_one_thread_per_request_keeps_its_own_rule(pair: Pair) -> None:
    """Threads (a sync web server's): one that wrote reads the primary, the others the
    standby, at the same time."""
    keys = pair.rows(4)
    store = pair.store("sync", max_size=4)
    try:
        lc = Lifecycle(store, ROWS)

        def request(n: int) -> int:
            if n % 2 == 0:
                assert lc.transition(keys[n // 2], "LIVE", from_="IDLE").applied
            with store.atomic(read_only=True) as tx:
                return int(tx.execute("SELECT inet_server_port() AS p")[0]["p"])

        got = await asyncio.gather(*(asyncio.to_thread(
            contextvars.Context().run, request, n) for n in range(8)))
        assert got == [pair.primary.port, pair.standby.port] * 4
    finally:
        store.close()


# -- bad read URLs -------------------------------------------------------------------------


def test_a_read_url_that_is_not_postgresql_is_refused(pair: Pair) -> None:
    with pytest.raises(ValidationError, match="read_url"):
        PostgresStore(pair.url(pair.primary), read_url="sqlite:///x.db")
    with pytest.raises(ValidationError, match="read_url"):
        AsyncPostgresStore(pair.url(pair.primary), read_url="mysql://h/db")
    with pytest.raises(ValidationError, match="read_url"):
        rowstate.connect("sqlite://", read_url=pair.url(pair.standby))


@pytest.mark.parametrize("twin", TWINS)
async def test_a_read_url_nobody_answers_fails_fast_naming_it(pair: Pair, twin: str) -> None:
    """A refused read URL: ConnectError naming its host, when the sync store is built or
    at the async store's first read-only unit (the async store's writes still work)."""
    dead = free_port()
    read_url = f"postgresql://postgres@{LOCALHOST}:{dead}/{pair.name}"
    started = time.monotonic()
    if twin == "sync":
        before = {t.ident for t in threading.enumerate()}
        with pytest.raises(ConnectError, match=str(dead)):
            pair.store(twin, read_url=read_url)
        # the primary's pool it had opened is closed again: no thread of it is left
        deadline = time.monotonic() + 5
        while left := [t.name for t in threading.enumerate() if t.ident not in before]:
            assert time.monotonic() < deadline, left
            time.sleep(0.05)
    else:
        store = pair.store(twin, read_url=read_url)
        try:
            assert (await answered(store, read_only=False))[0] == pair.primary.port
            with pytest.raises(ConnectError, match=str(dead)):
                await elsewhere(lambda: answered(store, read_only=True))
        finally:
            await store.close()
    assert time.monotonic() - started < 10


# -- the command line ----------------------------------------------------------------------


def test_inspect_and_stuck_read_a_standby_the_url_names(pair: Pair, tmp_path: Path) -> None:
    """The commands only read (a read-only unit): given a standby's URL (or every node's
    with ``prefer-standby``) they read there and leave the primary alone. The standby's
    replay paused, they show the row as it was before the primary moved it."""
    app = app_module(tmp_path)
    seed(pair.url(pair.primary), app)
    pair.caught_up()
    reads = pair.url(pair.standby, pair.primary, attrs="prefer-standby")

    def state() -> str:
        out, err = io.StringIO(), io.StringIO()
        assert main(["inspect", reads, "cliapp:JOBS", "5", "--json"], stdout=out,
                    stderr=err) == 0, err.getvalue()
        return str(json.loads(out.getvalue())["state"])

    pair.replay(False)
    try:
        store = PostgresStore(pair.url(pair.primary))
        try:
            assert Lifecycle(store, app.JOBS).transition(5, "READY").applied
        finally:
            store.close()
        assert state() == "NEW"  # the standby's, behind the primary
        out, err = io.StringIO(), io.StringIO()
        assert main(["stuck", reads, "cliapp:JOBS", "--json"], stdout=out,
                    stderr=err) == 3, err.getvalue()
        assert json.loads(out.getvalue())["total"] > 0
    finally:
        pair.replay(True)
    pair.caught_up()
    assert state() == "READY"
