"""The seed's ``DatasetLifecycle`` API as a client class, written once.

``_async/client.py`` (asyncio) is the source; ``_sync/client.py`` is generated from it by
``scripts/unasync.py`` (``make twins`` checks that it is current). ``init`` is a plain call
on both: it takes a :class:`~dataset_lifecycle.LifecycleConfig` (or the same options as
keywords), checks it and picks the persistence source its ``source`` names, with the seed's
precedence ``persistence`` > ``store`` (the seed's crudService) > ``pool`` > ``dsn`` >
``$MULTIPLATFORM_PG_CONNECTION_STRING`` (the seed's environment):

* ``persistence``: a custom :class:`PersistenceAdapter`, run on the adapter path
  (:mod:`dataset_lifecycle._adapter`): the engine's checks evaluated in Python, written as
  plain-shape CAS;
* ``store``/``pool``/``dsn``/the environment: a rowstate store, run on the engine path:
  every primitive is one compiled conditional write (two round trips only when ``from_`` is
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
from .._config import LifecycleConfig, Publisher, configured
from .._machine import LOADING, STALE_CLAIM_MS
from .._ops import Backend, EngineBackend, Operations
from .._rules import DEFAULT_SCHEMA, DEFAULT_TABLE
from .._setup import (
    DEFAULT_LOGGER,
    Setup,
    asettle,
    checked_at_first_use,
    column_check,
    given_store,
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
    Logger,
    PersistenceAdapter,
    ReleaseResult,
    Statuses,
    TransitionCheckResult,
    TransitionOptions,
    TransitionResult,
)


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

    def init(self, config: LifecycleConfig | None = None, /, *,
             persistence: PersistenceAdapter | None = None, store: AsyncStore | None = None,
             pool: Any = None, dsn: str | None = None, payload_columns: Iterable[str] = (),
             event_publisher: Publisher | None = None, logger: Logger | None = None,
             schema: str = DEFAULT_SCHEMA, table_name: str = DEFAULT_TABLE,
             reservation_field: str | None = None, stale_claim_ms: float = STALE_CLAIM_MS,
             load_guards: Mapping[str, Any] | None = None,
             clock: Callable[[], datetime] | None = None) -> None:
        """Configure the instance; call once at startup (``reset()`` first to redo it).

        ``config`` is a :class:`LifecycleConfig`; the keywords are its fields, for a call
        that spells them out (one form or the other, not both). The persistence source is
        ``config.source``: the first given of ``persistence``, ``store``, ``pool``, ``dsn``,
        else the environment.

        ``clock`` (tests) replaces the time claims are stamped and aged with; by default it
        is the database's clock on the engine path and the process's on the adapter path.
        A configuration the binding refuses (an unknown guard field, a payload column the
        lifecycle manages) raises :class:`ValidationError` here, not on first use; so does a
        URL with another driver's suffix (``postgresql+asyncpg://``), while SQLAlchemy's
        ``postgresql+psycopg://`` is taken as ``postgresql://``. A PostgreSQL database it
        cannot connect to (it does not exist, the login is refused, no server answers)
        raises :class:`rowstate.StoreError` here too, with the server's message.
        """
        cfg = configured(config, LifecycleConfig(
            persistence=persistence, store=store, pool=pool, dsn=dsn,
            payload_columns=payload_columns, event_publisher=event_publisher, logger=logger,
            schema=schema, table_name=table_name, reservation_field=reservation_field,
            stale_claim_ms=stale_claim_ms, load_guards=load_guards, clock=clock))
        with self._lock:
            if self._setup is not None:
                raise ValidationError(f"{type(self).__name__} is already initialized; "
                                      "call reset() first")
            rules = cfg.rules()
            opened: AsyncStore | None = None
            owned = False
            backend: Backend
            runner: Any
            if cfg.source == "persistence":
                core = Core(rules.binding, SQLite(injected_clock=cfg.clock is not None),
                            cfg.clock)
                backend = AdapterBackend(rules, cfg.persistence, core, cfg.clock,
                                         asynchronous=True)
                runner = _NoSQL()
            else:
                opened, owned = self._store_for(cfg)
                backend = EngineBackend(
                    AsyncLifecycle(opened, rules.binding, clock=cfg.clock).core)
                runner = checked_at_first_use(opened, rules, owned)
            self._setup = Setup(rules, Operations(rules, backend), runner, opened, owned,
                                cfg.event_publisher, cfg.logger or DEFAULT_LOGGER, cfg.schema,
                                cfg.table_name)

    def _store_for(self, cfg: LifecycleConfig) -> tuple[AsyncStore, bool]:
        """The store of the configured source, and whether this instance opened it (and so
        closes it on ``reset``): a given store is the caller's."""
        if cfg.source == "store":
            return given_store(cfg.store, asynchronous=True), False
        if cfg.source == "pool":
            return self._open_store(cfg.pool, None), True
        return self._open_store(None, cfg.dsn), True  # dsn, else the environment

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
        """Back to the uninitialized state; closes the store ``init`` opened (a store or a
        pool the caller passed stays open: it is the caller's)."""
        with self._lock:
            setup, self._setup = self._setup, None
        if setup is not None and setup.store is not None and setup.owns_store:
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

    async def transition(self, identifier: Identifier,
                         options: TransitionOptions | None = None, /, *, to: str | None = None,
                         from_: Statuses = None, owner_job_id: str | None = None,
                         payload: Mapping[str, Any] | None = None, event_data: Any = None,
                         guards: Mapping[str, Any] | None = None) -> TransitionResult:
        """Move the dataset to ``to`` in one conditional write; see docs/dataset_lifecycle.md.

        The move is a :class:`TransitionOptions` (the seed's), or the same fields as
        keywords: one form or the other. ``from_`` omitted: read the current status, then
        move from exactly that status. A move to LOADING starts a load: ``owner_job_id`` is
        required and becomes the row's ``jobId``; any other move with ``owner_job_id``
        requires the row's ``jobId`` to equal it. An edge the table lacks raises
        InvalidTransitionError before any I/O; a lost race or a failed guard returns
        ``applied=False`` with the reasons.
        """
        move = TransitionOptions.of(options, to=to, from_=from_, owner_job_id=owner_job_id,
                                    payload=payload, event_data=event_data, guards=guards)
        setup = self._ready()
        result, event = await adrive(setup.runner, setup.ops.transition(identifier, move))
        log_transition(setup, identifier, move.to, result)
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
