"""The front ends: ``DatasetLifecycle`` (sync) and ``AsyncDatasetLifecycle`` (asyncio).

Both are process-wide default instances of the classes below (the seed's singleton); a
service with two dataset tables may build more instances. ``init()`` is a plain call on
both: it checks the configuration and picks the persistence source, with precedence
``persistence`` > ``pool`` > ``dsn`` > ``$MULTIPLATFORM_PG_CONNECTION_STRING``:

* ``persistence``: a custom :class:`PersistenceAdapter`, run on the adapter path
  (:mod:`._adapter`): the engine's checks evaluated in Python, written as plain-shape CAS;
* ``pool``/``dsn``/the environment: a rowstate store, run on the engine path: every
  primitive is one compiled conditional write (two round trips only when ``from_`` is
  omitted: the read, then the CAS from exactly what was read).

The twins only drive the shared operations (:mod:`._ops`) and publish the event after the
write committed; a publisher that fails is logged, never raised (the write stands).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from rowstate import (
    AsyncLifecycle,
    AsyncPostgresStore,
    AsyncStore,
    Batch,
    Core,
    Lifecycle,
    PostgresStore,
    SQLite,
    Store,
    StoreError,
    UsageError,
    ValidationError,
    adrive,
    connect,
    connect_async,
    drive,
    postgres_url,
)

from ._adapter import AdapterBackend
from ._machine import LOADING, STALE_CLAIM_MS
from ._ops import EngineBackend, Operations
from ._rules import DEFAULT_SCHEMA, DEFAULT_TABLE, Rules, build_rules
from ._schema import schema_sql
from ._types import (
    BusyCheckResult,
    ClaimResult,
    DatasetIdentifier,
    DatasetStatusChanged,
    Identifier,
    LifecycleNotInitializedError,
    LifecycleState,
    ReleaseResult,
    TransitionCheckResult,
    TransitionResult,
)

ENV_DSN = "MULTIPLATFORM_PG_CONNECTION_STRING"
_log = logging.getLogger("dataset_lifecycle")
Statuses = str | Iterable[str] | None


class _NoSQL:
    """The runner of the adapter path: its operations never yield SQL."""

    def run(self, batch: Batch) -> Any:  # pragma: no cover - a bug if reached
        raise AssertionError("the adapter path runs no SQL")


class _NoSQLAsync:
    async def run(self, batch: Batch) -> Any:  # pragma: no cover - a bug if reached
        raise AssertionError("the adapter path runs no SQL")


def _column_check(rules: Rules, dialect: str) -> Generator[Batch, Any, None]:
    """Every column the binding reads or writes must be in the table: one catalog read, and
    one clear error naming what is missing and what configured it (a typo in
    ``payload_columns`` would otherwise fail every call, reads included, with the
    database's "column does not exist"). A table that does not exist yet is left alone:
    ``create_schema()`` may be the next call (and checks again after it)."""
    b = rules.binding
    if dialect == "sqlite":
        sql, params = "SELECT name FROM pragma_table_info(?)", [b.table_parts[-1]]
    else:
        qualified = ".".join('"' + p + '"' for p in b.table_parts)
        sql = ("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
               "AND attnum > 0 AND NOT attisdropped")
        params = [qualified]
    rows = yield Batch(((sql, params),))
    present = {r[0] for r in rows[0]}
    missing = sorted(b.known - present) if present else []
    if missing:
        reservation = (rules.reservation_field or "").split(".", 1)[0]
        guards = {f.split(".", 1)[0] for f in b.enter_guards.get(LOADING, {})}

        def source(column: str) -> str:
            if column in rules.payload_columns:
                return "payload_columns"
            if column == reservation:
                return "reservation_field"
            return "load_guards" if column in guards else "the lifecycle: run the migration"

        raise ValidationError(
            f"dataset lifecycle: table {b.table} has no column "
            + ", ".join(f"{c!r} (from {source(c)})" for c in missing)
            + "; fix the configuration or add the column (create_schema(extra_columns=...) "
            "on a new install)")


class _CheckedFirst:
    """The async store, checking the table's columns before its first statement: the async
    ``init`` is a plain call and does no I/O, so the check runs on first use."""

    def __init__(self, store: Any, rules: Rules) -> None:
        self.store = store
        self.rules = rules
        self.checked = False

    async def run(self, batch: Batch) -> Any:
        if not self.checked:
            await adrive(self.store, _column_check(self.rules, self.store.dialect))
            self.checked = True
        return await self.store.run(batch)


@dataclass(frozen=True)
class _Setup:
    rules: Rules
    ops: Operations
    runner: Any
    store: Any  # the store init opened (closed by reset); None on the adapter path
    publisher: Any
    logger: Any
    schema: str
    table_name: str


def _logger_call(logger: Any, level: str, msg: str, *args: Any) -> None:
    fn = getattr(logger, level, None) or getattr(logger, "warn", None)
    if callable(fn):
        fn(msg, *args)


def _publish_call(publisher: Any, event: DatasetStatusChanged) -> Any:
    publish = getattr(publisher, "publish", None)
    if callable(publish):
        return publish(event)
    if callable(publisher):
        return publisher(event)
    raise UsageError(f"event_publisher {publisher!r} has no publish() method")


def _check_connects(conninfo: str) -> None:
    """Connect once, at init, so that a database that does not exist, a refused login or a
    server that is not there fails here, at once, with the server's own words, instead of
    as the pool's timeout on the first call. Both twins: ``init`` is a plain call on the
    asyncio one too, and this is one connection at startup (``connect_timeout`` 10 s unless
    the conninfo sets one)."""
    if "connect_timeout" not in conninfo_to_dict(conninfo):
        conninfo = make_conninfo(conninfo, connect_timeout=10)
    try:
        psycopg.connect(conninfo, autocommit=True).close()
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to the dataset database: {exc}") from exc


class _Base:
    _asynchronous = False

    def __init__(self) -> None:
        self._setup: _Setup | None = None
        self._lock = threading.Lock()

    @property
    def initialized(self) -> bool:
        return self._setup is not None

    def _ready(self) -> _Setup:
        setup = self._setup
        if setup is None:
            raise LifecycleNotInitializedError(
                f"{type(self).__name__}: call init() before any other method")
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
            store: Any = None
            if persistence is not None:
                core = Core(rules.binding, SQLite(injected_clock=clock is not None), clock)
                backend: Any = AdapterBackend(rules, persistence, core, clock,
                                              asynchronous=self._asynchronous)
                runner: Any = _NoSQLAsync() if self._asynchronous else _NoSQL()
            else:
                store = self._open_store(pool, dsn)
                lifecycle: Lifecycle | AsyncLifecycle = (
                    AsyncLifecycle(store, rules.binding, clock=clock) if self._asynchronous
                    else Lifecycle(store, rules.binding, clock=clock))
                backend = EngineBackend(lifecycle.core)
                if self._asynchronous:
                    runner = _CheckedFirst(store, rules)
                else:
                    runner = store
                    try:
                        drive(store, _column_check(rules, store.dialect))
                    except Exception:
                        store.close()  # not set up: nothing else would close it
                        raise
            self._setup = _Setup(rules, Operations(rules, backend), runner, store,
                                 event_publisher, logger or _log, schema, table_name)

    def _open_store(self, pool: Any, dsn: str | None) -> Any:
        if pool is not None:
            if self._asynchronous:
                if not isinstance(pool, AsyncConnectionPool):
                    raise ValidationError("pool must be a psycopg_pool.AsyncConnectionPool")
                return AsyncPostgresStore(pool=pool)
            if not isinstance(pool, ConnectionPool):
                raise ValidationError("pool must be a psycopg_pool.ConnectionPool")
            return PostgresStore(pool=pool)
        url = dsn if dsn is not None else os.environ.get(ENV_DSN)
        if not url:
            raise ValidationError(f"no persistence configured: pass persistence=, pool= or "
                                  f"dsn=, or set {ENV_DSN}")
        if not url.startswith("sqlite:"):
            # any libpq conninfo, URL or key=value, as the environment variable may hold
            # (and SQLAlchemy's postgresql+psycopg://); checked here, and connected to once,
            # or a typo or a missing database would only surface as a pool timeout (30 s,
            # "couldn't get a connection") on first use, the cause left in the logs
            url = postgres_url(url) or url
            try:
                conninfo_to_dict(url)
            except psycopg.Error as exc:
                raise ValidationError(f"not a PostgreSQL conninfo or sqlite URL: {exc}",
                                      ) from None
            _check_connects(url)
            return AsyncPostgresStore(url) if self._asynchronous else PostgresStore(url)
        try:
            return connect_async(url) if self._asynchronous else connect(url)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def _schema_script(self, setup: _Setup, extra_columns: Mapping[str, str] | None) -> str:
        if setup.store is None:
            raise ValidationError("create_schema needs a database (not a persistence adapter)")
        return schema_sql(setup.store.dialect, schema=setup.schema,
                          table_name=setup.table_name, extra_columns=extra_columns)

    def _logged(self, setup: _Setup, identifier: Identifier, to: object,
                result: TransitionResult) -> None:
        ident = DatasetIdentifier.of(identifier)
        if result.applied:
            _logger_call(setup.logger, "info", "dataset %s/%s: %s -> %s", ident.user_id,
                         ident.dataset_id, result.previous_status, to)
        else:
            _logger_call(setup.logger, "info", "dataset %s/%s: move to %s refused: %s %s",
                         ident.user_id, ident.dataset_id, to, result.reason, result.reasons)

    def _publish_failed(self, setup: _Setup, event: DatasetStatusChanged,
                        exc: BaseException) -> None:
        _logger_call(setup.logger, "error", "dataset %s/%s: publishing %s -> %s failed: %r",
                     event.identifier.user_id, event.identifier.dataset_id, event.from_,
                     event.to, exc)


class DatasetLifecycleClient(_Base):
    """The seed's ``DatasetLifecycle`` API, synchronous; ``DatasetLifecycle`` is the
    process-wide instance. Methods are thread-safe (each call is its own operation)."""

    def __init__(self) -> None:
        super().__init__()
        self._tasks: set[asyncio.Task[Any]] = set()

    def reset(self) -> None:
        """Back to the uninitialized state; closes the store ``init`` opened (a pool the
        caller passed stays open: it is the caller's)."""
        with self._lock:
            setup, self._setup = self._setup, None
        if setup is not None and setup.store is not None:
            setup.store.close()

    def create_schema(self, *, extra_columns: Mapping[str, str] | None = None) -> None:
        """Run :func:`schema_sql` on the configured database (new installs, tests)."""
        setup = self._ready()
        script = self._schema_script(setup, extra_columns)
        setup.store.execute_script(script)
        drive(setup.store, _column_check(setup.rules, setup.store.dialect))

    def _publish(self, setup: _Setup, event: DatasetStatusChanged) -> None:
        if setup.publisher is None:
            return
        try:
            got = _publish_call(setup.publisher, event)
            if inspect.isawaitable(got):
                self._settle(setup, event, got)
        except Exception as exc:  # the write committed; a publisher cannot undo it
            self._publish_failed(setup, event, exc)

    def _settle(self, setup: _Setup, event: DatasetStatusChanged,
                awaitable: Awaitable[Any]) -> None:
        """An async publisher under the sync API: run it to completion here, or, when this
        thread already runs an event loop, as a task on it (errors are logged)."""

        async def wait() -> Any:
            return await awaitable

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(wait())
            return
        task = loop.create_task(wait())
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                self._publish_failed(setup, event, t.exception())  # type: ignore[arg-type]

        task.add_done_callback(done)

    # -- the API -------------------------------------------------------------------------

    def transition(self, identifier: Identifier, *, to: str, from_: Statuses = None,
                   owner_job_id: str | None = None, payload: Mapping[str, Any] | None = None,
                   event_data: Any = None, guards: Mapping[str, Any] | None = None,
                   ) -> TransitionResult:
        """Move the dataset to ``to`` in one conditional write; see docs/dataset_lifecycle.md.

        ``from_`` omitted: read the current status, then move from exactly that status.
        A move to LOADING starts a load: ``owner_job_id`` is required and becomes the row's
        ``jobId``; any other move with ``owner_job_id`` requires the row's ``jobId`` to equal
        it. An edge the table lacks raises InvalidTransitionError before any I/O; a lost
        race or a failed guard returns ``applied=False`` with the reasons.
        """
        setup = self._ready()
        result, event = drive(setup.runner, setup.ops.transition(
            identifier, to=to, from_=from_, owner_job_id=owner_job_id, payload=payload,
            event_data=event_data, guards=guards))
        self._logged(setup, identifier, to, result)
        if event is not None:
            self._publish(setup, event)
        return result

    def claim_finalization(self, identifier: Identifier, job_id: str, *,
                           scope: str | None = None) -> ClaimResult:
        """Claim the right to finalize, keyed by (job_id, scope): free, a redelivery of the
        same finalizer, or stale (older than ``stale_claim_ms``) -> claimed."""
        setup = self._ready()
        return drive(setup.runner, setup.ops.claim_finalization(identifier, job_id,
                                                                scope=scope))

    def release_claim(self, identifier: Identifier, job_id: str, *,
                      scope: str | None = None) -> ReleaseResult:
        """Owner-checked on (job_id, scope) and idempotent: safe in a ``finally``."""
        setup = self._ready()
        return drive(setup.runner, setup.ops.release_claim(identifier, job_id, scope=scope))

    def get_lifecycle_state(self, identifier: Identifier) -> LifecycleState | None:
        setup = self._ready()
        return drive(setup.runner, setup.ops.get_lifecycle_state(identifier))

    def check_busy(self, identifier: Identifier) -> BusyCheckResult:
        setup = self._ready()
        return drive(setup.runner, setup.ops.check_busy(identifier))

    def is_busy(self, identifier: Identifier) -> bool:
        return self.check_busy(identifier).busy

    def can_transition_to(self, identifier: Identifier, to: str, *,
                          owner_job_id: str | None = None) -> TransitionCheckResult:
        """The dry run of exactly the rules ``transition`` writes under, every reason at
        once. A yes is advice, not a reservation: the write re-checks atomically."""
        setup = self._ready()
        return drive(setup.runner, setup.ops.can_transition_to(identifier, to,
                                                               owner_job_id=owner_job_id))

    def get_status(self, identifier: Identifier) -> str | None:
        setup = self._ready()
        return drive(setup.runner, setup.ops.get_status(identifier))

    def is_loading(self, identifier: Identifier) -> bool:
        return self.get_status(identifier) == LOADING


class AsyncDatasetLifecycleClient(_Base):
    """:class:`DatasetLifecycleClient` for asyncio: the same methods as coroutines;
    ``init`` stays a plain call (it connects once, to check; the store's pool connects on
    first use)."""

    _asynchronous = True

    async def reset(self) -> None:
        with self._lock:
            setup, self._setup = self._setup, None
        if setup is not None and setup.store is not None:
            await setup.store.close()

    async def create_schema(self, *, extra_columns: Mapping[str, str] | None = None) -> None:
        setup = self._ready()
        script = self._schema_script(setup, extra_columns)
        await setup.store.execute_script(script)
        await adrive(setup.store, _column_check(setup.rules, setup.store.dialect))

    async def _publish(self, setup: _Setup, event: DatasetStatusChanged) -> None:
        if setup.publisher is None:
            return
        try:
            got = _publish_call(setup.publisher, event)
            if inspect.isawaitable(got):
                await got
        except Exception as exc:
            self._publish_failed(setup, event, exc)

    async def transition(self, identifier: Identifier, *, to: str, from_: Statuses = None,
                         owner_job_id: str | None = None,
                         payload: Mapping[str, Any] | None = None, event_data: Any = None,
                         guards: Mapping[str, Any] | None = None) -> TransitionResult:
        setup = self._ready()
        result, event = await adrive(setup.runner, setup.ops.transition(
            identifier, to=to, from_=from_, owner_job_id=owner_job_id, payload=payload,
            event_data=event_data, guards=guards))
        self._logged(setup, identifier, to, result)
        if event is not None:
            await self._publish(setup, event)
        return result

    async def claim_finalization(self, identifier: Identifier, job_id: str, *,
                                 scope: str | None = None) -> ClaimResult:
        setup = self._ready()
        return await adrive(setup.runner, setup.ops.claim_finalization(identifier, job_id,
                                                                       scope=scope))

    async def release_claim(self, identifier: Identifier, job_id: str, *,
                            scope: str | None = None) -> ReleaseResult:
        setup = self._ready()
        return await adrive(setup.runner, setup.ops.release_claim(identifier, job_id,
                                                                  scope=scope))

    async def get_lifecycle_state(self, identifier: Identifier) -> LifecycleState | None:
        setup = self._ready()
        return await adrive(setup.runner, setup.ops.get_lifecycle_state(identifier))

    async def check_busy(self, identifier: Identifier) -> BusyCheckResult:
        setup = self._ready()
        return await adrive(setup.runner, setup.ops.check_busy(identifier))

    async def is_busy(self, identifier: Identifier) -> bool:
        return (await self.check_busy(identifier)).busy

    async def can_transition_to(self, identifier: Identifier, to: str, *,
                                owner_job_id: str | None = None) -> TransitionCheckResult:
        setup = self._ready()
        return await adrive(setup.runner, setup.ops.can_transition_to(
            identifier, to, owner_job_id=owner_job_id))

    async def get_status(self, identifier: Identifier) -> str | None:
        setup = self._ready()
        return await adrive(setup.runner, setup.ops.get_status(identifier))

    async def is_loading(self, identifier: Identifier) -> bool:
        return (await self.get_status(identifier)) == LOADING


DatasetLifecycle = DatasetLifecycleClient()
AsyncDatasetLifecycle = AsyncDatasetLifecycleClient()


def create_persistence_adapter(*, dsn: str | None = None, pool: Any = None,
                               schema: str = DEFAULT_SCHEMA, table_name: str = DEFAULT_TABLE,
                               payload_columns: Iterable[str] = (),
                               reservation_field: str | None = None,
                               asynchronous: bool = False) -> Any:
    """The default :class:`PersistenceAdapter`: ``update_by_expression``/``get_by_keys``
    over a rowstate store (``pool`` > ``dsn`` > the environment, as ``init``).

    Useful to wrap (metrics, logging, retries) and pass back as ``persistence=``; it knows
    the lifecycle's columns plus ``payload_columns`` (and a non-``__DR`` reservation
    column). ``asynchronous=True`` gives coroutine methods over an asyncio store. Close it
    with ``close()`` (a coroutine when asynchronous).
    """
    from ._adapter import AsyncStorePersistenceAdapter, StorePersistenceAdapter

    rules = build_rules(schema=schema, table_name=table_name,
                        reservation_field=reservation_field, stale_claim_ms=STALE_CLAIM_MS,
                        load_guards=None, payload_columns=payload_columns)
    opener = AsyncDatasetLifecycleClient() if asynchronous else DatasetLifecycleClient()
    store: Store | AsyncStore = opener._open_store(pool, dsn)
    owns = pool is None
    if asynchronous:
        return AsyncStorePersistenceAdapter(store, rules, owns_store=owns)
    return StorePersistenceAdapter(store, rules, owns_store=owns)
