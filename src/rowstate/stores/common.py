"""What every store shares: the statement counter, per-thread connections and the unit of
work's flow (BEGIN, COMMIT or ROLLBACK, the after-commit callbacks) that both twins of every
store run. No driver is imported here."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import Any, Generic, Protocol, TypeVar

from ..errors import UnitRefusedError
from ..protocol import Door
from ..units import AsyncUnit, Unit

Rows = list[list[tuple[Any, ...]]]


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class StatementCounter:
    """Counts statements sent to the database: the proof of "one round trip"."""

    def __init__(self) -> None:
        self.statements = 0


class ThreadConnections(Generic[C]):
    """One connection per calling thread, opened on first use (and again once ``usable``
    says it no longer is); ``close()`` closes every one it opened."""

    def __init__(self, open_: Callable[[], C],
                 usable: Callable[[C], bool] | None = None) -> None:
        self._open: Callable[[], C] = open_
        self._usable: Callable[[C], bool] | None = usable
        self._local = threading.local()
        self._opened: list[C] = []
        self._guard = threading.Lock()

    def get(self) -> C:
        conn: C | None = getattr(self._local, "conn", None)
        if conn is None or (self._usable is not None and not self._usable(conn)):
            conn = self._open()
            self._local.conn = conn
            with self._guard:
                if self._usable is not None:  # forget the ones that went bad
                    self._opened = [c for c in self._opened if self._usable(c)]
                self._opened.append(conn)
        return conn

    def opened(self) -> list[C]:
        with self._guard:
            return list(self._opened)

    def close(self) -> None:
        with self._guard:
            conns, self._opened = self._opened, []
        for conn in conns:
            conn.close()
        self._local = threading.local()


# -- units of work (rowstate.units): the flow both twins of every store share -------------

Raw = Callable[[str, Any], tuple[list[Any], Any]]


def _unit_var(store: object) -> ContextVar[Any]:
    return ContextVar(f"rowstate-unit-{id(store)}", default=None)


@contextlib.contextmanager
def _nested(unit: Unit, door: Door | None) -> Iterator[Unit]:
    """A unit opened while one is open on the same store: a savepoint of it."""
    previous = unit.door
    if door is not None:
        unit.door = door
    try:
        with unit.savepoint():
            yield unit
    finally:
        unit.door = previous


@contextlib.contextmanager
def _unit_scope(var: ContextVar[Any], unit: Unit, begin: str) -> Iterator[Unit]:
    """BEGIN, make the unit the store's current one, COMMIT (ROLLBACK on an exception or
    after a refused hold/fence), then the after-commit callbacks."""
    raw = unit._raw
    raw(begin, ())
    token = var.set(unit)
    committed = False
    try:
        yield unit
        if unit.refused is None:
            raw("COMMIT", ())
            committed = True
        else:
            raw("ROLLBACK", ())
    except BaseException:
        with contextlib.suppress(Exception):
            raw("ROLLBACK", ())
        raise
    finally:
        var.reset(token)
        unit.closed = True
    if committed:
        for callback in unit._after_commit:
            callback()


@contextlib.asynccontextmanager
async def _anested(unit: AsyncUnit, door: Door | None) -> AsyncIterator[AsyncUnit]:
    previous = unit.door
    if door is not None:
        unit.door = door
    try:
        async with unit.savepoint():
            yield unit
    finally:
        unit.door = previous


@contextlib.asynccontextmanager
async def _aunit_scope(var: ContextVar[Any], unit: AsyncUnit,
                       begin: str) -> AsyncIterator[AsyncUnit]:
    raw = unit._raw
    await raw(begin, ())
    token = var.set(unit)
    committed = False
    try:
        yield unit
        if unit.refused is None:
            await raw("COMMIT", ())
            committed = True
        else:
            await raw("ROLLBACK", ())
    except BaseException:
        with contextlib.suppress(Exception):
            await raw("ROLLBACK", ())
        raise
    finally:
        var.reset(token)
        unit.closed = True
    if committed:
        for callback in unit._after_commit:
            got = callback()
            if asyncio.iscoroutine(got):
                await got


def _no_script_in_unit(var: ContextVar[Any]) -> None:
    if var.get() is not None:
        raise UnitRefusedError("execute_script cannot run inside a unit of work (SQLite's "
                               "executescript commits first)", reason="SCRIPT_IN_UNIT")
