"""The front ends: ``DatasetLifecycle`` (sync) and ``AsyncDatasetLifecycle`` (asyncio), the
process-wide instances of the client twins (the seed's singleton; a service with two
dataset tables may build more instances of the classes), and the default persistence
adapter's factory.

The clients are written once: ``_async/client.py`` is the source, ``_sync/client.py`` is
generated from it by ``scripts/unasync.py`` (``make twins`` checks that it is current).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rowstate import AsyncStore, Store

from ._async.client import AsyncDatasetLifecycleClient
from ._async.store_adapter import AsyncStorePersistenceAdapter
from ._machine import STALE_CLAIM_MS
from ._rules import DEFAULT_SCHEMA, DEFAULT_TABLE, build_rules
from ._setup import ENV_DSN, given_store
from ._sync.client import DatasetLifecycleClient
from ._sync.store_adapter import StorePersistenceAdapter

DatasetLifecycle = DatasetLifecycleClient()
AsyncDatasetLifecycle = AsyncDatasetLifecycleClient()


def create_persistence_adapter(*, dsn: str | None = None, pool: Any = None,
                               store: Store | AsyncStore | None = None,
                               schema: str = DEFAULT_SCHEMA, table_name: str = DEFAULT_TABLE,
                               payload_columns: Iterable[str] = (),
                               reservation_field: str | None = None,
                               asynchronous: bool = False) -> Any:
    """The default :class:`PersistenceAdapter`: ``update_by_expression``/``get_by_keys``
    over a rowstate store (``store`` > ``pool`` > ``dsn`` > the environment, as ``init``).

    Useful to wrap (metrics, logging, retries) and pass back as ``persistence=``; it knows
    the lifecycle's columns plus ``payload_columns`` (and a non-``__DR`` reservation
    column). ``asynchronous=True`` gives coroutine methods over an asyncio store. Close it
    with ``close()`` (a coroutine when asynchronous); a store or pool given stays open.
    """
    rules = build_rules(schema=schema, table_name=table_name,
                        reservation_field=reservation_field, stale_claim_ms=STALE_CLAIM_MS,
                        load_guards=None, payload_columns=payload_columns)
    if store is not None:
        given = given_store(store, asynchronous=asynchronous)
        if asynchronous:
            return AsyncStorePersistenceAdapter(given, rules, owns_store=False)
        return StorePersistenceAdapter(given, rules, owns_store=False)
    owns = pool is None
    if asynchronous:
        return AsyncStorePersistenceAdapter(
            AsyncDatasetLifecycleClient()._open_store(pool, dsn), rules, owns_store=owns)
    return StorePersistenceAdapter(
        DatasetLifecycleClient()._open_store(pool, dsn), rules, owns_store=owns)


__all__ = [
    "ENV_DSN",
    "AsyncDatasetLifecycle",
    "AsyncDatasetLifecycleClient",
    "DatasetLifecycle",
    "DatasetLifecycleClient",
    "create_persistence_adapter",
]
