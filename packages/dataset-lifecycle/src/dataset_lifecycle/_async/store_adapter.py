"""The default :class:`PersistenceAdapter` (``create_persistence_adapter``), written once.

``_async/store_adapter.py`` (asyncio) is the source; ``_sync/store_adapter.py`` is generated
from it by ``scripts/unasync.py``. The SQL is in :mod:`dataset_lifecycle._statements`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rowstate import AsyncStore
from rowstate.ext import Batch

from .._statements import StoreAdapterBase


class AsyncStorePersistenceAdapter(StoreAdapterBase):
    """The two calls of a :class:`PersistenceAdapter` over a rowstate store."""

    store: AsyncStore

    async def update_by_expression(self, table: str, update: Mapping[str, Any],
                                   condition: Mapping[str, Any]) -> bool:
        self._table(table)
        rows = await self.store.run(Batch((self.sql.update(update, condition),)))
        return bool(rows[0])

    async def get_by_keys(self, table: str, keys: Mapping[str, Any],
                          ) -> dict[str, Any] | None:
        self._table(table)
        rows = await self.store.run(Batch((self.sql.read(keys),)))
        return self.sql.record(rows[0])

    async def close(self) -> None:
        if self.owns_store:
            await self.store.close()
