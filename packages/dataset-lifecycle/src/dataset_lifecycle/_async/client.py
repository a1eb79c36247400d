"""The seed's ``DatasetLifecycle`` API as a client class, written once.

``_async/client.py`` (asyncio) is the source; ``_sync/client.py`` is generated from it by
``scripts/unasync.py`` (``make twins`` checks that it is current). ``init`` is a plain call
on both: it checks the configuration and picks the persistence source, with precedence
``persistence`` > ``pool`` > ``dsn`` > ``$MULTIPLATFORM_PG_CONNECTION_STRING``:

* ``persistence``: a custom :class:`PersistenceAdapter`, run on the adapter path
  (:mod:`dataset_lifecycle._adapter`): the engine's checks evaluated in Python, written as
  plain-shape CAS;
* ``pool``/``dsn``/the environment: a rowstate store, run on the engine path: every
  primitive is one compiled conditional write (two round trips only when ``from_`` is
  omitted: the read, then the CAS from exactly what was read).

The client only drives the shared operations (:mod:`dataset_lifecycle._ops`, with
``rowstate.ext.adrive``: docs/extending.md) and publishes the event after the write committed;
a publisher that fails is logged, never raised (the write stands).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from rowstate import AsyncLifecycle, AsyncStore, ValidationError, connect_async
from rowstate.ext import Batch, Core, SQLite, adrive
from rowstate.stores import AsyncPostgresStore

from .._adapter import AdapterBackend
from .._machine import LOADING, STALE_CLAIM_MS
from .._ops import Backend, EngineBackend, Operations
from .._rules import DEFAULT_SCHEMA, DEFAULT_TABLE, build_rules
from .._setup import (
    DEFAULT_LOGGER,
    Setup,
    asettle,
    checked_at_first_use,
    column_check,
    log_publish_failed,
    log_transition,
    not_initialized,
    publish_call,
    schema_script,
    store_url,
)
from .._types import (
    BusyCheckResult,
    ClaimResult,
    DatasetStatusChanged,
    Identifier,
    LifecycleState,
    ReleaseResult,
    TransitionCheckResult,
    TransitionResult,
)

Statuses = str | Iterable[str] | None


class _NoSQL:
    """The runner of the adapter path: its operations never yield SQL."""

    async def run(self, batch: Batch) -> Any:  # pragma: no cover - a bug if reached
        raise AssertionError("the adapter path runs no SQL")


class AsyncDatasetLifecycleClient:
    """The seed's ``DatasetLifecycle`` API; ``AsyncDatasetLifecycle`` is the process-wide
    instance (the seed's singleton), and a service with two dataset tables may build more.
    Each call is its own operation: one instance serves many callers at once."""

    def __init__(self) -> None:
        self._setup: Setup | None = None
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()  # publishers still running

    @property
    def initialized(self) -> bool:
        return self._setup is not None

    def _ready(self) -> Setup:
        setup = self._setup
        if setup is None:
            raise not_initialized(self)
        return setup

    def init(self, *, dsn: str | None = None, pool: Any = None, persistence: Any = None,
             logger: Any = None, event_publisher: Any = None,
             reservation_field: str | None = None, stale_claim_ms: float = STALE_CLAIM_MS,
             load_guards: Mapping[str, Any] | None = None,
             payload_columns: Iterable[str] = (), schema: str = DEFAULT_SCHEMA,
             table_name: str = DEFAULT_TABLE,
             clock: Callable[[], datetime] | None = None) -> None:
        """Configure the instance; call once at startup (``reset()`` first to redo it).

        ``clock`` (tests) replaces the time claims are stamped and aged with; by default it
        is the database's clock on the engine path and the process's on the adapter path.
        A configuration the binding refuses (an unknown guard field, a payload column the
        lifecycle manages) raises :class:`ValidationError` here, not on first use; so does a
        URL with another driver's suffix (``postgresql+asyncpg://``), while SQLAlchemy's
        ``postgresql+psycopg://`` is taken as ``postgresql://``. A PostgreSQL database it
        cannot connect to (it does not exist, the login is refused, no server answers)
        raises :class:`rowstate.StoreError` here too, with the server's message.
        """
        with self._lock:
            if self._setup is not None:
                raise ValidationError(f"{type(self).__name__} is already initialized; "
                                      "call reset() first")
            rules = build_rules(schema=schema, table_name=table_name,
                                reservation_field=reservation_field,
                                stale_claim_ms=stale_claim_ms, load_guards=load_guards,
                                payload_columns=payload_columns)
            store: AsyncStore | None = None
            backend: Backend
            runner: Any
            if persistence is not None:
                core = Core(rules.binding, SQLite(injected_clock=clock is not None), clock)
                backend = AdapterBackend(rules, persistence, core, clock, asynchronous=True)
                runner = _NoSQL()
            else:
                store = self._open_store(pool, dsn)
                backend = EngineBackend(AsyncLifecycle(store, rules.binding, clock=clock).core)
                runner = checked_at_first_use(store, rules)
            self._setup = Setup(rules, Operations(rules, backend), runner, store,
                                event_publisher, logger or DEFAULT_LOGGER, schema,
                                table_name)

    def _open_store(self, pool: Any, dsn: str | None) -> AsyncStore:
        if pool is not None:
            if not isinstance(pool, AsyncConnectionPool):
                raise ValidationError("pool must be a psycopg_pool.AsyncConnectionPool")
            return AsyncPostgresStore(pool=pool)
        url = store_url(dsn)
        if not url.startswith("sqlite:"):
            return AsyncPostgresStore(url)
        try:
            return connect_async(url)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    async def reset(self) -> None:
        """Back to the uninitialized state; closes the store ``init`` opened (a pool the
        caller passed stays open: it is the caller's)."""
        with self._lock:
            setup, self._setup = self._setup, None
        if setup is not None and setup.store is not None:
            await setup.store.close()

    async def create_schema(self, *, extra_columns: Mapping[str, str] | None = None) -> None:
        """Run :func:`schema_sql` on the configured database (new installs, tests)."""
        setup = self._ready()
        script = schema_script(setup, extra_columns)
        await setup.store.execute_script(script)
        await adrive(setup.store, column_check(setup.rules, setup.store.dialect))

    async def _publish(self, setup: Setup, event: DatasetStatusChanged) -> None:
        if setup.publisher is None:
            return
        try:
            got = publish_call(setup.publisher, event)
            if inspect.isawaitable(got):
                await asettle(
                    got, self._tasks, functools.partial(log_publish_failed, setup, event))
        except Exception as exc:  # the write committed; a publisher cannot undo it
            log_publish_failed(setup, event, exc)

    # -- the API -------------------------------------------------------------------------

    async def transition(self, identifier: Identifier, *, to: str, from_: Statuses = None,
                         owner_job_id: str | None = None,
                         payload: Mapping[str, Any] | None = None, event_data: Any = None,
                         guards: Mapping[str, Any] | None = None) -> TransitionResult:
        """Move the dataset to ``to`` in one conditional write; see docs/dataset_lifecycle.md.

        ``from_`` omitted: read the current status, then move from exactly that status.
        A move to LOADING starts a load: ``owner_job_id`` is required and becomes the row's
        ``jobId``; any other move with ``owner_job_id`` requires the row's ``jobId`` to equal
        it. An edge the table lacks raises InvalidTransitionError before any I/O; a lost
        race or a failed guard returns ``applied=False`` with the reasons.
        """
        setup = self._ready()
        result, event = await adrive(setup.runner, setup.ops.transition(
            identifier, to=to, from_=from_, owner_job_id=owner_job_id, payload=payload,
            event_data=event_data, guards=guards))
        log_transition(setup, identifier, to, result)
        if event is not None:
            await self._publish(setup, event)
        return result

    async def claim_finalization(self, identifier: Identifier, job_id: str, *,
                                 scope: str | None = None) -> ClaimResult:
        """Claim the right to finalize, keyed by (job_id, scope): free, a redelivery of the
        same finalizer, or stale (older than ``stale_claim_ms``) -> claimed."""
        setup = self._ready()
        return await adrive(
            setup.runner, setup.ops.claim_finalization(identifier, job_id, scope=scope))

    async def release_claim(self, identifier: Identifier, job_id: str, *,
                            scope: str | None = None) -> ReleaseResult:
        """Owner-checked on (job_id, scope) and idempotent: safe in a ``finally``."""
        setup = self._ready()
        return await adrive(
            setup.runner, setup.ops.release_claim(identifier, job_id, scope=scope))

    async def get_lifecycle_state(self, identifier: Identifier) -> LifecycleState | None:
        setup = self._ready()
        return await adrive(setup.runner, setup.ops.get_lifecycle_state(identifier))

    async def check_busy(self, identifier: Identifier) -> BusyCheckResult:
        setup = self._ready()
        return await adrive(setup.runner, setup.ops.check_busy(identifier))

    async def is_busy(self, identifier: Identifier) -> bool:
        result = await self.check_busy(identifier)
        return result.busy

    async def can_transition_to(self, identifier: Identifier, to: str, *,
                                owner_job_id: str | None = None) -> TransitionCheckResult:
        """The dry run of exactly the rules ``transition`` writes under, every reason at
        once. A yes is advice, not a reservation: the write re-checks atomically."""
        setup = self._ready()
        return await adrive(
            setup.runner, setup.ops.can_transition_to(identifier, to, owner_job_id=owner_job_id))

    async def get_status(self, identifier: Identifier) -> str | None:
        setup = self._ready()
        return await adrive(setup.runner, setup.ops.get_status(identifier))

    async def is_loading(self, identifier: Identifier) -> bool:
        status = await self.get_status(identifier)
        return status == LOADING
