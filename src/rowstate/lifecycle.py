"""The front ends: :class:`Lifecycle` (sync) and :class:`AsyncLifecycle` (asyncio).

Both are thin: each method builds the core operation and drives it on the store. The only
thing they add is publishing events after commit when the binding has no events table (with
an events table, the :mod:`relay <rowstate.relay>` delivers them from the outbox).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .binding import Binding, GuardSpec
from .core import ActiveLease, Core
from .dialects import Dialect, Postgres, SQLite
from .drive import adrive, drive
from .errors import UsageError
from .results import (
    CheckResult,
    Event,
    FinalizationClaimResult,
    FireReport,
    LeaseClaim,
    ReleaseResult,
    RunResult,
    TransitionResult,
)
from .stores import AsyncStore, Store

log = logging.getLogger("rowstate")
Publisher = Callable[[Event], Any]


def _dialect(name: str, clock: Callable[[], datetime] | None) -> Dialect:
    cls = SQLite if name == "sqlite" else Postgres
    return cls(injected_clock=clock is not None)


class _Base:
    def __init__(self, store: Store | AsyncStore, binding: Binding, *,
                 clock: Callable[[], datetime] | None = None,
                 publishers: Sequence[Publisher] = ()) -> None:
        self.store = store
        self.binding = binding
        self.machine = binding.machine
        self.core = Core(binding, _dialect(store.dialect, clock), clock)
        self.publishers = list(publishers)

    def schema_sql(self) -> str:
        return self.binding.schema_sql(self.core.d)


class Lifecycle(_Base):
    """Durable state machine over one table, sync."""

    store: Store

    def __init__(self, store: Store, binding: Binding, *,
                 clock: Callable[[], datetime] | None = None,
                 publishers: Sequence[Publisher] = ()) -> None:
        super().__init__(store, binding, clock=clock, publishers=publishers)

    def create_schema(self) -> None:
        self.store.execute_script(self.schema_sql())

    def _published(self, event: Event | None) -> None:
        if event is None or self.binding.events:  # callers skip the call without publishers
            return
        for publish in self.publishers:
            try:
                publish(event)
            except Exception:  # the write committed; a publisher cannot undo it
                log.exception("rowstate: publisher failed for %s", event)

    def transition(self, key: object, to: str, *, from_: Iterable[str] | str | None = None,
                   owner: object = None, payload: Mapping[str, Any] | None = None,
                   guards: GuardSpec | None = None, data: Any = None) -> TransitionResult:
        result = drive(self.store, self.core.transition(
            key, to, from_=from_, owner=owner, payload=payload, guards=guards, data=data))
        if self.publishers:  # no coroutine or call per write without one
            self._published(result.event)
        return result

    def can_transition(self, key: object, to: str, *,
                       from_: Iterable[str] | str | None = None, owner: object = None,
                       guards: GuardSpec | None = None) -> CheckResult:
        return drive(self.store, self.core.can_transition(
            key, to, from_=from_, owner=owner, guards=guards))

    def claim(self, key: object, edge: str, *, holder: str | None = None,
              owner: object = None, guards: GuardSpec | None = None) -> LeaseClaim:
        return drive(self.store, self.core.claim(key, edge, holder=holder, owner=owner,
                                                 guards=guards))

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
            data: Any = None) -> RunResult:
        if inspect.iscoroutinefunction(act):
            raise UsageError("an async act needs AsyncLifecycle.run")
        result = drive(self.store, self.core.run(key, edge, act, holder=holder, owner=owner,
                                                 payload=payload, guards=guards, data=data))
        if self.publishers:  # no coroutine or call per write without one
            self._published(result.event)
        return result

    def claim_finalization(self, key: object, holder: str, scope: str | None = None,
                           ) -> FinalizationClaimResult:
        return drive(self.store, self.core.claim_finalization(key, holder, scope))

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

    def fire_due(self, *, acts: Mapping[str, Callable[[ActiveLease], Any]] | None = None,
                 notify: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
                 limit: int = 100, holder: str | None = None) -> FireReport:
        report = drive(self.store, self.core.fire_due(acts=acts, notify=notify, limit=limit,
                                                      holder=holder))
        return report


class AsyncLifecycle(_Base):
    """Durable state machine over one table, asyncio. Same methods, as coroutines."""

    store: AsyncStore

    def __init__(self, store: AsyncStore, binding: Binding, *,
                 clock: Callable[[], datetime] | None = None,
                 publishers: Sequence[Publisher] = ()) -> None:
        super().__init__(store, binding, clock=clock, publishers=publishers)

    async def create_schema(self) -> None:
        await self.store.execute_script(self.schema_sql())

    async def _published(self, event: Event | None) -> None:
        if event is None or self.binding.events:  # callers skip the call without publishers
            return
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
                         ) -> TransitionResult:
        result = await adrive(self.store, self.core.transition(
            key, to, from_=from_, owner=owner, payload=payload, guards=guards, data=data))
        if self.publishers:  # no coroutine or call per write without one
            await self._published(result.event)
        return result

    async def can_transition(self, key: object, to: str, *,
                             from_: Iterable[str] | str | None = None, owner: object = None,
                             guards: GuardSpec | None = None) -> CheckResult:
        return await adrive(self.store, self.core.can_transition(
            key, to, from_=from_, owner=owner, guards=guards))

    async def claim(self, key: object, edge: str, *, holder: str | None = None,
                    owner: object = None, guards: GuardSpec | None = None) -> LeaseClaim:
        return await adrive(self.store, self.core.claim(key, edge, holder=holder,
                                                        owner=owner, guards=guards))

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
                  data: Any = None) -> RunResult:
        result = await adrive(self.store, self.core.run(
            key, edge, act, holder=holder, owner=owner, payload=payload, guards=guards,
            data=data))
        if self.publishers:  # no coroutine or call per write without one
            await self._published(result.event)
        return result

    async def claim_finalization(self, key: object, holder: str, scope: str | None = None,
                                 ) -> FinalizationClaimResult:
        return await adrive(self.store, self.core.claim_finalization(key, holder, scope))

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

    async def fire_due(self, *, acts: Mapping[str, Callable[[ActiveLease], Any]] | None = None,
                       notify: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
                       limit: int = 100, holder: str | None = None) -> FireReport:
        return await adrive(self.store, self.core.fire_due(acts=acts, notify=notify,
                                                           limit=limit, holder=holder))
