# Generated from dataset_lifecycle/_async/store_adapter.py by scripts/unasync.py: do not edit.
# Edit the source, then run `make unasync` (`make twins` checks).
"""The default :class:`PersistenceAdapter` (``create_persistence_adapter``), written once.

``_async/store_adapter.py`` (asyncio) is the source; ``_sync/store_adapter.py`` is generated
from it by ``scripts/unasync.py``. The SQL is in :mod:`dataset_lifecycle._statements`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rowstate import Store
from rowstate.ext import Batch

from .._statements import StoreAdapterBase


class StorePersistenceAdapter(StoreAdapterBase):
    """The two calls of a :class:`PersistenceAdapter` over a rowstate store."""

    store: Store

    def update_by_expression(self, table: str, update: Mapping[str, Any],
                             condition: Mapping[str, Any]) -> bool:
        self._table(table)
        rows = self.store.run(Batch((self.sql.update(update, condition),)))
        return bool(rows[0])

    def get_by_keys(self, table: str, keys: Mapping[str, Any],
                    ) -> dict[str, Any] | None:
        self._table(table)
        rows = self.store.run(Batch((self.sql.read(keys),)))
        return self.sql.record(rows[0])

    def close(self) -> None:
        if self.owns_store:
            self.store.close()
