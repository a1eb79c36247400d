"""The two drivers of core operations: the only code the sync and async twins do not share.

An operation yields a :class:`~rowstate.compiler.Batch` (run it on the store, send the rows
back) or a :class:`~rowstate.core.Call` (run the caller's function, send its result back).
Any exception, from the store or the caller's function, is thrown back into the operation so
that it can clean up (release a lease) before it propagates.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol, TypeVar

from .compiler import Batch
from .core import Call, Core, Op
from .errors import InvariantViolation, UsageError
from .lanes import LaneCall
from .results import TransitionResult

R = TypeVar("R")


class SyncRunner(Protocol):
    def run(self, batch: Batch) -> list[list[tuple[Any, ...]]]: ...


class AsyncRunner(Protocol):
    async def run(self, batch: Batch) -> list[list[tuple[Any, ...]]]: ...


def drive(store: SyncRunner, op: Op[R]) -> R:
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


def drive_lane(store: SyncRunner, core: Core, call: LaneCall) -> TransitionResult:
    """A plain move's one statement (:mod:`rowstate.lanes`); a refusal is explained by
    the general path."""
    try:
        rows = store.run(call.batch)
    except InvariantViolation:
        return drive(store, core._lane_refused(call, invariant=True))
    result, rows = call.lane.finish(call, rows)
    if result is None:
        return drive(store, core._lane_refused(call, False, rows))
    return result


async def adrive_lane(store: AsyncRunner, core: Core, call: LaneCall) -> TransitionResult:
    try:
        rows = await store.run(call.batch)
    except InvariantViolation:
        return await adrive(store, core._lane_refused(call, invariant=True))
    result, rows = call.lane.finish(call, rows)
    if result is None:
        return await adrive(store, core._lane_refused(call, False, rows))
    return result


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()  # a coroutine never awaited would warn at garbage collection


async def adrive(store: AsyncRunner, op: Op[R]) -> R:
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
