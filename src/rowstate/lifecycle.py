"""The front ends: :class:`Lifecycle` (sync) and :class:`AsyncLifecycle` (asyncio).

Both are thin: each method builds the core operation and drives it on the store. The only
thing they add is publishing events after commit when the binding has no events table (with
an events table, the :mod:`relay <rowstate.relay>` delivers them from the outbox).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from inspect import CO_COROUTINE
from types import FunctionType
from typing import TYPE_CHECKING, Any, TypeVar

from .binding import Binding
from .core import Core
from .core.lane import adrive_lane, drive_lane
from .dialects import Dialect, Postgres, SQLite
from .errors import UsageError
from .protocol import ActiveLease, Door, Op, adrive, drive
from .results import (
    BulkResult,
    CheckResult,
    EdgeCheck,
    Event,
    FinalizationClaimResult,
    FireReport,
    LeaseClaim,
    ReleaseResult,
    RunResult,
    TransitionResult,
)
from .schemacheck import check_schema
from .specs import GuardSpec
from .units import AsyncUnit, Unit

if TYPE_CHECKING:  # types only: importing the front ends loads no driver
    from .stores import AsyncStore, Store

log = logging.getLogger("rowstate")
Publisher = Callable[[Event], Any]
R = TypeVar("R")


def _async_function(fn: object) -> bool:
    """``inspect.iscoroutinefunction``, with a plain function's flag read directly (the
    inspect call unwraps partials and methods first: a microsecond per run())."""
    if type(fn) is FunctionType:
        return bool(fn.__code__.co_flags & CO_COROUTINE)
    return inspect.iscoroutinefunction(fn)


def _dialect(name: str, clock: Callable[[], datetime] | None) -> Dialect:
    cls = SQLite if name == "sqlite" else Postgres
    return cls(injected_clock=clock is not None)


class _Base:
    def __init__(self, store: Store | AsyncStore, binding: Binding, *,
                 clock: Callable[[], datetime] | None = None,
                 publishers: Sequence[Publisher] = (), door: Door) -> None:
        self.store = store
        self.binding = binding
        self.machine = binding.machine
        # acts receive leases whose atomic() opens a unit of work fenced by them
        self.core = Core(binding, _dialect(store.dialect, clock), clock, door=door)
        self.publishers = list(publishers)

    def _in_unit(self) -> Unit | AsyncUnit | None:
        unit: Unit | AsyncUnit | None = self.store._unit.get()
        return unit

    def schema_sql(self) -> str:
        return self.binding.schema_sql(self.core.dialect)


class Lifecycle(_Base):
    """Durable state machine over one table, sync."""

    store: Store

    def __init__(self, store: Store, binding: Binding, *,
                 clock: Callable[[], datetime] | None = None,
                 publishers: Sequence[Publisher] = ()) -> None:
        super().__init__(store, binding, clock=clock, publishers=publishers, door=self)

    def create_schema(self) -> None:
        self.store.execute_script(self.schema_sql())

    def check_schema(self) -> None:
        """Raise :class:`~rowstate.errors.SchemaMismatch` if the table lacks anything."""
        drive(self.store, check_schema(self.binding, self.core.dialect))

    def _published(self, event: Event | None) -> None:
        if event is None or self.binding.events:  # callers skip the call without publishers
            return
        unit = self._in_unit()
        if unit is not None:  # published once the unit commits, never if it rolls back
            unit.after_commit(lambda: self._publish_now(event))
            return
        self._publish_now(event)

    def _publish_now(self, event: Event) -> None:
        for publish in self.publishers:
            try:
                publish(event)
            except Exception:  # the write committed; a publisher cannot undo it
                log.exception("rowstate: publisher failed for %s", event)

    def transition(self, key: object, to: str, *, from_: Iterable[str] | str | None = None,
                   owner: object = None, payload: Mapping[str, Any] | None = None,
                   guards: GuardSpec | None = None, data: Any = None,
                   returning: Iterable[str] | None = None) -> TransitionResult:
        call = (self.core.transition_lane(key, to, from_, owner, returning)
                if payload is None and guards is None and data is None else None)
        if call is not None:
            result = drive_lane(self.store, call)
        else:
            result = drive(self.store, self.core.transition(
                key, to, from_=from_, owner=owner, payload=payload, guards=guards, data=data,
                returning=returning))
        if self.publishers:  # no coroutine or call per write without one
            self._published(result.event)
        return result

    def can_transition(self, key: object, to: str, *,
                       from_: Iterable[str] | str | None = None, owner: object = None,
                       guards: GuardSpec | None = None) -> CheckResult:
        return drive(self.store, self.core.can_transition(
            key, to, from_=from_, owner=owner, guards=guards))

    def claim(self, key: object, edge: str, *, holder: str | None = None,
              owner: object = None, guards: GuardSpec | None = None,
              returning: Iterable[str] | None = None) -> LeaseClaim:
        return drive(self.store, self.core.claim(key, edge, holder=holder, owner=owner,
                                                 guards=guards, returning=returning))

    def finalize(self, key: object, claim: LeaseClaim, *,
                 payload: Mapping[str, Any] | None = None, owner: object = None,
                 data: Any = None) -> TransitionResult:
        result = drive(self.store, self.core.finalize(key, claim, payload=payload,
                                                      owner=owner, data=data))
        if self.publishers:  # no coroutine or call per write without one
            self._published(result.event)
        return result

    def release(self, key: object, claim: LeaseClaim, *, error: str | None = None,
                ) -> ReleaseResult:
        return drive(self.store, self.core.release(key, claim, error=error))

    def run(self, key: object, edge: str, act: Callable[[ActiveLease], Any], *,
            holder: str | None = None, owner: object = None,
            payload: Mapping[str, Any] | None = None, guards: GuardSpec | None = None,
            data: Any = None, returning: Iterable[str] | None = None) -> RunResult:
        if _async_function(act):
            raise UsageError("an async act needs AsyncLifecycle.run")
        result = drive(self.store, self.core.run(key, edge, act, holder=holder, owner=owner,
                                                 payload=payload, guards=guards, data=data,
                                                 returning=returning))
        if self.publishers:  # no coroutine or call per write without one
            self._published(result.event)
        return result

    def claim_finalization(self, key: object, holder: str, scope: str | None = None, *,
                           returning: Iterable[str] | None = None,
                           ) -> FinalizationClaimResult:
        return drive(self.store, self.core.claim_finalization(key, holder, scope,
                                                              returning=returning))

    def release_finalization(self, key: object, holder: str, scope: str | None = None,
                             ) -> ReleaseResult:
        return drive(self.store, self.core.release_finalization(key, holder, scope))

    def get(self, key: object) -> dict[str, Any] | None:
        return drive(self.store, self.core.get(key))

    def state(self, key: object) -> str | None:
        row = self.get(key)
        return None if row is None else self.core.state_of(row)

    def history(self, key: object) -> list[Event]:
        return drive(self.store, self.core.history(key))

    # -- the application door -----------------------------------------------------------

    def do(self, op: Op[R]) -> R:
        """Run a core operation (``self.core.<op>(...)``) on this store: the seam an app
        that composes its own operations builds on."""
        return drive(self.store, op)

    @contextlib.contextmanager
    def atomic(self, *, fence: Any = None) -> Iterator[Unit]:
        """A unit of work on this lifecycle's store (:mod:`rowstate.units`); with
        ``fence=lease``, fenced by that lease at once."""
        with self.store.atomic(door=self) as tx:
            if fence is not None:
                tx.fence(fence)
            yield tx

    def create(self, key: object, *, state: str | None = None,
               **columns: Any) -> TransitionResult:
        result = drive(self.store, self.core.create(key, state=state, columns=columns))
        if self.publishers:
            self._published(result.event)
        return result

    def ensure(self, key: object, *, state: str | None = None,
               **columns: Any) -> dict[str, Any]:
        return drive(self.store, self.core.ensure(key, state=state, columns=columns))

    def enabled_edges(self, key: object, *, owner: object = None) -> tuple[EdgeCheck, ...]:
        return drive(self.store, self.core.enabled_edges(key, owner=owner))

    def transition_many(self, to: str, *, keys: Iterable[object] | None = None,
                        where: GuardSpec | None = None,
                        from_: Iterable[str] | str | None = None, owner: object = None,
                        guards: GuardSpec | None = None, data: Any = None,
                        limit: int = 10_000) -> BulkResult:
        result = drive(self.store, self.core.transition_many(
            to, keys=keys, where=where, from_=from_, owner=owner, guards=guards, data=data,
            limit=limit))
        if self.publishers:
            for event in result.events:
                self._published(event)
        return result

    def find(self, *, state: str | Sequence[str] | None = None,
             where: GuardSpec | None = None, order_by: str | Sequence[str] | None = None,
             limit: int = 100) -> list[dict[str, Any]]:
        return drive(self.store, self.core.find(state=state, where=where, order_by=order_by,
                                                limit=limit))

    def count(self, *, state: str | Sequence[str] | None = None,
              where: GuardSpec | None = None) -> int:
        return drive(self.store, self.core.count(state=state, where=where))

    def fire_due(self, *, acts: Mapping[str, Callable[[ActiveLease], Any]] | None = None,
                 notify: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
                 limit: int = 100, holder: str | None = None,
                 now: datetime | None = None) -> FireReport:
        return drive(self.store, self.core.fire_due(acts=acts, notify=notify, limit=limit,
                                                    holder=holder, now=now))


class AsyncLifecycle(_Base):
    """Durable state machine over one table, asyncio. Same methods, as coroutines."""

    store: AsyncStore

    def __init__(self, store: AsyncStore, binding: Binding, *,
                 clock: Callable[[], datetime] | None = None,
                 publishers: Sequence[Publisher] = ()) -> None:
        super().__init__(store, binding, clock=clock, publishers=publishers, door=self)

    async def create_schema(self) -> None:
        await self.store.execute_script(self.schema_sql())

    async def check_schema(self) -> None:
        await adrive(self.store, check_schema(self.binding, self.core.dialect))

    async def _published(self, event: Event | None) -> None:
        if event is None or self.binding.events:  # callers skip the call without publishers
            return
        unit = self._in_unit()
        if unit is not None:  # published once the unit commits, never if it rolls back
            unit.after_commit(lambda: self._publish_now(event))
            return
        await self._publish_now(event)

    async def _publish_now(self, event: Event) -> None:
        for publish in self.publishers:
            try:
                got = publish(event)
                if inspect.isawaitable(got):
                    await got
            except Exception:
                log.exception("rowstate: publisher failed for %s", event)

    async def transition(self, key: object, to: str, *,
                         from_: Iterable[str] | str | None = None, owner: object = None,
                         payload: Mapping[str, Any] | None = None,
                         guards: GuardSpec | None = None, data: Any = None,
                         returning: Iterable[str] | None = None) -> TransitionResult:
        call = (self.core.transition_lane(key, to, from_, owner, returning)
                if payload is None and guards is None and data is None else None)
        if call is not None:
            result = await adrive_lane(self.store, call)
        else:
            result = await adrive(self.store, self.core.transition(
                key, to, from_=from_, owner=owner, payload=payload, guards=guards, data=data,
                returning=returning))
        if self.publishers:  # no coroutine or call per write without one
            await self._published(result.event)
        return result

    async def can_transition(self, key: object, to: str, *,
                             from_: Iterable[str] | str | None = None, owner: object = None,
                             guards: GuardSpec | None = None) -> CheckResult:
        return await adrive(self.store, self.core.can_transition(
            key, to, from_=from_, owner=owner, guards=guards))

    async def claim(self, key: object, edge: str, *, holder: str | None = None,
                    owner: object = None, guards: GuardSpec | None = None,
                    returning: Iterable[str] | None = None) -> LeaseClaim:
        return await adrive(self.store, self.core.claim(key, edge, holder=holder,
                                                        owner=owner, guards=guards,
                                                        returning=returning))

    async def finalize(self, key: object, claim: LeaseClaim, *,
                       payload: Mapping[str, Any] | None = None, owner: object = None,
                       data: Any = None) -> TransitionResult:
        result = await adrive(self.store, self.core.finalize(key, claim, payload=payload,
                                                             owner=owner, data=data))
        if self.publishers:  # no coroutine or call per write without one
            await self._published(result.event)
        return result

    async def release(self, key: object, claim: LeaseClaim, *, error: str | None = None,
                      ) -> ReleaseResult:
        return await adrive(self.store, self.core.release(key, claim, error=error))

    async def run(self, key: object, edge: str, act: Callable[[ActiveLease], Any], *,
                  holder: str | None = None, owner: object = None,
                  payload: Mapping[str, Any] | None = None, guards: GuardSpec | None = None,
                  data: Any = None, returning: Iterable[str] | None = None) -> RunResult:
        result = await adrive(self.store, self.core.run(
            key, edge, act, holder=holder, owner=owner, payload=payload, guards=guards,
            data=data, returning=returning))
        if self.publishers:  # no coroutine or call per write without one
            await self._published(result.event)
        return result

    async def claim_finalization(self, key: object, holder: str, scope: str | None = None,
                                 *, returning: Iterable[str] | None = None,
                                 ) -> FinalizationClaimResult:
        return await adrive(self.store, self.core.claim_finalization(
            key, holder, scope, returning=returning))

    async def release_finalization(self, key: object, holder: str,
                                   scope: str | None = None) -> ReleaseResult:
        return await adrive(self.store, self.core.release_finalization(key, holder, scope))

    async def get(self, key: object) -> dict[str, Any] | None:
        return await adrive(self.store, self.core.get(key))

    async def state(self, key: object) -> str | None:
        row = await self.get(key)
        return None if row is None else self.core.state_of(row)

    async def history(self, key: object) -> list[Event]:
        return await adrive(self.store, self.core.history(key))

    # -- the application door -----------------------------------------------------------

    async def do(self, op: Op[R]) -> R:
        return await adrive(self.store, op)

    @contextlib.asynccontextmanager
    async def atomic(self, *, fence: Any = None) -> AsyncIterator[AsyncUnit]:
        async with self.store.atomic(door=self) as tx:
            if fence is not None:
                await tx.fence(fence)
            yield tx

    async def create(self, key: object, *, state: str | None = None,
                     **columns: Any) -> TransitionResult:
        result = await adrive(self.store, self.core.create(key, state=state, columns=columns))
        if self.publishers:
            await self._published(result.event)
        return result

    async def ensure(self, key: object, *, state: str | None = None,
                     **columns: Any) -> dict[str, Any]:
        return await adrive(self.store, self.core.ensure(key, state=state, columns=columns))

    async def enabled_edges(self, key: object, *,
                            owner: object = None) -> tuple[EdgeCheck, ...]:
        return await adrive(self.store, self.core.enabled_edges(key, owner=owner))

    async def transition_many(self, to: str, *, keys: Iterable[object] | None = None,
                              where: GuardSpec | None = None,
                              from_: Iterable[str] | str | None = None, owner: object = None,
                              guards: GuardSpec | None = None, data: Any = None,
                              limit: int = 10_000) -> BulkResult:
        result = await adrive(self.store, self.core.transition_many(
            to, keys=keys, where=where, from_=from_, owner=owner, guards=guards, data=data,
            limit=limit))
        if self.publishers:
            for event in result.events:
                await self._published(event)
        return result

    async def find(self, *, state: str | Sequence[str] | None = None,
                   where: GuardSpec | None = None,
                   order_by: str | Sequence[str] | None = None,
                   limit: int = 100) -> list[dict[str, Any]]:
        return await adrive(self.store, self.core.find(state=state, where=where,
                                                       order_by=order_by, limit=limit))

    async def count(self, *, state: str | Sequence[str] | None = None,
                    where: GuardSpec | None = None) -> int:
        return await adrive(self.store, self.core.count(state=state, where=where))

    async def fire_due(self, *, acts: Mapping[str, Callable[[ActiveLease], Any]] | None = None,
                       notify: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
                       limit: int = 100, holder: str | None = None,
                       now: datetime | None = None) -> FireReport:
        return await adrive(self.store, self.core.fire_due(acts=acts, notify=notify,
                                                           limit=limit, holder=holder, now=now))
