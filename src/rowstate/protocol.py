"""The protocol between the core and its drivers: the bottom of the engine's imports.

An operation of the core is a generator (:data:`Op`). It yields a :class:`Batch` (run these
statements, send back their rows) or a :class:`Call` (run the caller's function, send back
its result) and returns its verdict. :func:`drive` and :func:`adrive` are the two drivers,
the only code the sync and the async twins do not share: any exception, from the store or
the caller's function, is thrown back into the operation so that it can clean up (release a
lease) before it propagates.

The other direction: what the core hands out and needs from the front end that drives it.
An act receives an :class:`ActiveLease`; ``lease.atomic()`` and a unit of work's
``hold``/``fence`` reach the front end through :class:`Door`, a typed protocol (the front
end is :class:`rowstate.Lifecycle` or its async twin, which live above everything here).

This module imports nothing of the engine but its errors, results and machine, so every
layer (schemas, compiler, core, units, stores, apps composing their own operations) can
speak it; the extension seam (``rowstate.drive``, ``Batch``, ``Call``) is this module.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from .errors import UsageError, ValidationError
from .machine import Edge
from .results import HoldResult

R = TypeVar("R")


class Batch(NamedTuple):
    """Statements a store runs in order; ``transaction`` makes them one atomic unit
    (``BEGIN IMMEDIATE`` on SQLite). The store returns the rows of each statement.
    A named tuple: one is built per round trip."""

    statements: tuple[tuple[str, Sequence[Any]], ...]
    transaction: bool = False
    # run after the last statement when it returned no rows, on the same connection (a
    # lane's refused write and the read explaining it: one checkout, one store call);
    # its rows are appended to the batch's
    otherwise: tuple[str, Sequence[Any]] | None = None


class Call(NamedTuple):
    """Ask the driver to run a caller's function (an act, a notice) and send back its
    result; an exception it raises is thrown back into the operation. (A named tuple: one
    is built per act; a frozen dataclass costs three times as much.)"""

    fn: Callable[[Any], Any]
    arg: Any


Op = Generator[Batch | Call, Any, R]
Rows = list[list[tuple[Any, ...]]]


class RowChecks(Protocol):
    """The core operations a unit of work runs on the front end's row: a hold and a fence
    (:mod:`rowstate.core.holds`)."""

    def hold(self, key: object, states: str | Iterable[str]) -> Op[HoldResult]: ...

    def fence(self, lease: object) -> Op[HoldResult]: ...


class Door(Protocol):
    """What the core and a unit of work need from the front end that drives them: its core's
    row checks (a unit's ``hold``/``fence`` name the lifecycle whose row they check) and a
    unit of work fenced by a lease (``ActiveLease.atomic``). ``atomic`` returns a context
    manager: a sync one from :class:`rowstate.Lifecycle`, an async one from its twin."""

    @property
    def core(self) -> RowChecks: ...

    def atomic(self, *, fence: Any = None) -> Any: ...


class ActiveLease(NamedTuple):
    """What an act receives: which row, which edge, and the fencing token it holds.

    ``atomic()`` opens a unit of work fenced by this lease (``with lease.atomic() as
    tx:``; ``async with`` on the async twin): the act's own writes in it commit only while
    the token is still the row's; a zombie whose lease was taken over gets a refused unit
    (``tx.refused == "LEASE_LOST"``) whose every statement raises."""

    key: tuple[Any, ...]
    edge: Edge
    token: int | None
    row: Mapping[str, Any]
    door: Door | None = None  # the front end that ran the act

    def atomic(self) -> Any:
        if self.door is None:
            raise ValidationError("this lease was not handed out by a lifecycle")
        return self.door.atomic(fence=self)


class SyncRunner(Protocol):
    def run(self, batch: Batch) -> Rows: ...


class AsyncRunner(Protocol):
    async def run(self, batch: Batch) -> Rows: ...


def drive(store: SyncRunner, op: Op[R]) -> R:
    """Run ``op`` to its verdict on a sync store (or a unit of work)."""
    try:
        step = next(op)
        while True:
            try:
                if isinstance(step, Call):
                    got = step.fn(step.arg)
                    if type(got) is not bool and inspect.isawaitable(got):
                        _discard(got)
                        raise UsageError(f"{step.fn!r} returned an awaitable: async acts and "
                                         "publishers need the async front end")
                else:
                    got = store.run(step)
            except BaseException as exc:
                step = op.throw(exc)
            else:
                step = op.send(got)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(store: AsyncRunner, op: Op[R]) -> R:
    """Run ``op`` to its verdict on an async store; a caller's function may be async."""
    try:
        step = next(op)
        while True:
            try:
                if isinstance(step, Call):
                    got = step.fn(step.arg)
                    if inspect.isawaitable(got):
                        got = await got
                else:
                    got = await store.run(step)
            except BaseException as exc:
                step = op.throw(exc)
            else:
                step = op.send(got)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()  # a coroutine never awaited would warn at garbage collection
