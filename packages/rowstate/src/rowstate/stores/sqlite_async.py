"""SQLite for asyncio: the sync store (:mod:`.sqlite`) on a small worker pool, so a busy wait
for the write lock never blocks the event loop.

A module of its own so that a program that never touches asyncio (``import rowstate``, a
sync SQLite store) does not import it: asyncio and its event loop machinery cost more to
import than the whole engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any

from ..protocol import Batch, Door
from ..units import AsyncUnit, anested, aunit_scope
from .common import Rows, _no_script_in_unit, _unit_var
from .sqlite import SQLiteStore, _sqlite_raw


class AsyncSQLiteStore:
    """SQLite for asyncio: the sync store on a small worker pool, so a busy wait for the
    write lock never blocks the event loop."""

    dialect = "sqlite"

    def __init__(self, path: str | None = None, *, workers: int = 4, **kw: Any) -> None:
        self.sync = SQLiteStore(path, **kw)
        self._pool = ThreadPoolExecutor(1 if self.sync.memory else workers,
                                        thread_name_prefix="rowstate-sqlite")
        self._unit: ContextVar[AsyncUnit | None] = _unit_var(self)

    @property
    def statements(self) -> int:
        return self.sync.statements

    async def run(self, batch: Batch) -> Rows:
        unit = self._unit.get()
        if unit is not None:
            return await unit.run(batch)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.sync.run, batch)

    @contextlib.asynccontextmanager
    async def atomic(self, *, door: Door | None = None,
                     read_only: bool = False) -> AsyncIterator[AsyncUnit]:
        """A unit of work on a thread of its own (it holds the write lock throughout, so
        it must not wait behind the store's workers), with a connection of its own;
        ``read_only`` as :meth:`SQLiteStore.atomic`'s (that connection is closed after)."""
        current = self._unit.get()
        if current is not None:
            async with anested(current, door) as unit:
                yield unit
            return
        loop = asyncio.get_running_loop()
        thread = ThreadPoolExecutor(1, thread_name_prefix="rowstate-sqlite-unit")
        opened = self.sync.unit_connection(dedicated=True)
        # a writing unit queues for the store's turn on its own thread (the sync store's
        # ``writing``), taken and given back there: the event loop never waits on it
        turn = contextlib.nullcontext() if read_only else self.sync.writing()
        entered = False
        try:
            await loop.run_in_executor(thread, turn.__enter__)
            entered = True
            conn = await loop.run_in_executor(thread, opened.__enter__)
            try:
                sync_raw = _sqlite_raw(conn, self.sync)

                async def raw(sql: str, params: Any) -> tuple[list[Any], Any]:
                    return await loop.run_in_executor(thread, sync_raw, sql, params)

                unit = AsyncUnit("sqlite", raw, door, json.dumps)
                if read_only:
                    await raw("PRAGMA query_only = ON", ())
                async with aunit_scope(self._unit, unit,
                                       "BEGIN" if read_only else "BEGIN IMMEDIATE"):
                    yield unit
            finally:
                await loop.run_in_executor(thread, opened.__exit__, None, None, None)
        finally:
            if entered:
                await loop.run_in_executor(thread, turn.__exit__, None, None, None)
            thread.shutdown(wait=False)

    async def execute_script(self, sql: str) -> None:
        _no_script_in_unit(self._unit)
        await asyncio.get_running_loop().run_in_executor(self._pool, self.sync.execute_script,
                                                         sql)

    async def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.sync.close()
