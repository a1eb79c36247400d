"""What the two client twins share: the configuration they hold, the checks ``init`` runs,
the publishing and logging calls.

The clients themselves (:mod:`._async.client`, the source, and :mod:`._sync.client`,
generated from it by ``scripts/unasync.py``) differ only where sync and asyncio differ.
Two of those differences are not a matter of spelling, so each is a pair of small functions
here, named in the generator's table:

* :func:`checked_now` / :func:`checked_at_first_use`: ``init`` is a plain call on both
  clients; the sync one checks the table's columns at once, the async one cannot do I/O
  there, so its store checks before its first statement;
* :func:`settle` / :func:`asettle`: an awaitable publisher is awaited by the async client;
  the sync one runs it to completion, or as a task when its thread already runs a loop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rowstate import AsyncStore, Store, StoreError, UsageError, ValidationError
from rowstate.ext import Batch, adrive, drive
from rowstate.stores import postgres_url

from ._machine import LOADING
from ._ops import Operations
from ._rules import Rules
from ._schema import schema_sql
from ._types import (
    DatasetIdentifier,
    DatasetStatusChanged,
    Identifier,
    LifecycleNotInitializedError,
    TransitionResult,
)

ENV_DSN = "MULTIPLATFORM_PG_CONNECTION_STRING"
DEFAULT_LOGGER = logging.getLogger("dataset_lifecycle")


@dataclass(frozen=True)
class Setup:
    """What ``init`` configured: read by every call, replaced whole by ``reset``."""

    rules: Rules
    ops: Operations
    runner: Any
    store: Any  # the store the engine path runs on; None on the adapter path
    owns_store: bool  # init opened it, so reset closes it (a given store or pool: never)
    publisher: Any
    logger: Any
    schema: str
    table_name: str


def not_initialized(client: object) -> LifecycleNotInitializedError:
    return LifecycleNotInitializedError(
        f"{type(client).__name__}: call init() before any other method")


# -- the table's columns --------------------------------------------------------------------


def column_check(rules: Rules, dialect: str) -> Generator[Batch, Any, None]:
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


def checked_now(store: Store, rules: Rules, owned: bool) -> Store:
    """The sync client's runner: the store, its columns checked now (if they are wrong, a
    store ``init`` opened is closed: nothing else would close it)."""
    try:
        drive(store, column_check(rules, store.dialect))
    except Exception:
        if owned:
            store.close()
        raise
    return store


class CheckedFirst:
    """The async store, checking the table's columns before its first statement: the async
    ``init`` is a plain call and does no I/O, so the check runs on first use."""

    def __init__(self, store: AsyncStore, rules: Rules) -> None:
        self.store = store
        self.rules = rules
        self.checked = False

    async def run(self, batch: Batch) -> Any:
        if not self.checked:
            await adrive(self.store, column_check(self.rules, self.store.dialect))
            self.checked = True
        return await self.store.run(batch)


def checked_at_first_use(store: AsyncStore, rules: Rules, owned: bool) -> CheckedFirst:
    """The async client's runner: see :class:`CheckedFirst` (a store that fails the check
    stays open until ``reset``, which closes it if ``init`` opened it: ``owned``)."""
    return CheckedFirst(store, rules)


def schema_script(setup: Setup, extra_columns: Any) -> str:
    if setup.store is None:
        raise ValidationError("create_schema needs a database (not a persistence adapter)")
    return schema_sql(setup.store.dialect, schema=setup.schema, table_name=setup.table_name,
                      extra_columns=extra_columns)


# -- where the database is ------------------------------------------------------------------

#: The dialects a store may speak: the ones :func:`schema_sql` and the engine write for.
DIALECTS = ("sqlite", "postgresql", "postgres")


def given_store(store: Any, *, asynchronous: bool) -> Any:
    """A caller's rowstate store (``init(store=...)``), checked at ``init``: it has a
    store's calls, speaks a dialect the engine writes, and is of the client's flavour
    (an ``AsyncStore`` for the async client, a ``Store`` for the sync one)."""
    missing = [name for name in ("run", "atomic", "execute_script", "close")
               if not callable(getattr(store, name, None))]
    if missing:
        raise ValidationError(f"store must be a rowstate store (rowstate.connect(...)); "
                              f"{type(store).__name__} has no {', '.join(missing)}")
    dialect = getattr(store, "dialect", None)
    if dialect not in DIALECTS:
        raise ValidationError(f"store speaks {dialect!r}: the lifecycle runs on SQLite and "
                              "PostgreSQL")
    if inspect.iscoroutinefunction(store.run) != asynchronous:
        if asynchronous:
            raise UsageError("store is a blocking rowstate Store: AsyncDatasetLifecycle "
                             "needs an AsyncStore (rowstate.connect_async)")
        raise UsageError("store is a rowstate AsyncStore: use it with AsyncDatasetLifecycle "
                         "(DatasetLifecycle needs a Store: rowstate.connect)")
    return store


def store_url(dsn: str | None) -> str:
    """The URL ``init`` opens (``dsn`` > ``$MULTIPLATFORM_PG_CONNECTION_STRING``): a
    ``sqlite:`` URL as given; anything else a PostgreSQL conninfo, checked and connected to
    once (see :func:`check_connects`)."""
    url = dsn if dsn is not None else os.environ.get(ENV_DSN)
    if not url:
        raise ValidationError(f"no persistence configured: pass persistence=, store=, "
                              f"pool= or dsn=, or set {ENV_DSN}")
    if url.startswith("sqlite:"):
        return url
    # any libpq conninfo, URL or key=value, as the environment variable may hold (and
    # SQLAlchemy's postgresql+psycopg://); checked here, and connected to once, or a typo or
    # a missing database would only surface as a pool timeout (30 s, "couldn't get a
    # connection") on first use, the cause left in the logs
    url = postgres_url(url) or url
    try:
        conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise ValidationError(f"not a PostgreSQL conninfo or sqlite URL: {exc}") from None
    check_connects(url)
    return url


def check_connects(conninfo: str) -> None:
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


# -- logging and publishing -----------------------------------------------------------------


def logger_call(logger: Any, level: str, msg: str, *args: Any) -> None:
    fn = getattr(logger, level, None) or getattr(logger, "warn", None)
    if callable(fn):
        fn(msg, *args)


def log_transition(setup: Setup, identifier: Identifier, to: object,
                   result: TransitionResult) -> None:
    ident = DatasetIdentifier.of(identifier)
    if result.applied:
        logger_call(setup.logger, "info", "dataset %s/%s: %s -> %s", ident.user_id,
                    ident.dataset_id, result.previous_status, to)
    else:
        logger_call(setup.logger, "info", "dataset %s/%s: move to %s refused: %s %s",
                    ident.user_id, ident.dataset_id, to, result.reason, result.reasons)


def log_publish_failed(setup: Setup, event: DatasetStatusChanged,
                       exc: BaseException) -> None:
    logger_call(setup.logger, "error", "dataset %s/%s: publishing %s -> %s failed: %r",
                event.identifier.user_id, event.identifier.dataset_id, event.from_,
                event.to, exc)


def publish_call(publisher: Any, event: DatasetStatusChanged) -> Any:
    publish = getattr(publisher, "publish", None)
    if callable(publish):
        return publish(event)
    if callable(publisher):
        return publisher(event)
    raise UsageError(f"event_publisher {publisher!r} has no publish() method")


OnError = Callable[[BaseException], None]


def settle(awaitable: Awaitable[Any], tasks: set[asyncio.Task[Any]],
           on_error: OnError) -> None:
    """An async publisher under the sync API: run it to completion here (an error raises
    to the caller), or, when this thread already runs an event loop, as a task on it (kept
    in ``tasks`` until done; an error goes to ``on_error``)."""

    async def wait() -> Any:
        return await awaitable

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(wait())
        return
    task = loop.create_task(wait())
    tasks.add(task)

    def done(t: asyncio.Task[Any]) -> None:
        tasks.discard(t)
        if not t.cancelled() and t.exception() is not None:
            on_error(t.exception())  # type: ignore[arg-type]

    task.add_done_callback(done)


async def asettle(awaitable: Awaitable[Any], tasks: set[asyncio.Task[Any]],
                  on_error: OnError) -> None:
    """An async publisher under the async API: awaited here (an error raises to the
    caller, as :func:`settle`'s does when it runs the publisher to completion)."""
    await awaitable
