"""The outbox relay (:mod:`rowstate.relay`), written once: ``_async/relay.py`` (asyncio)
is the source, and ``_sync/relay.py`` is generated from it by ``scripts/unasync.py``. The
pass both drive is :mod:`rowstate.relaypass`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..protocol import adrive
from ..relaypass import Publisher, RelayBase

if TYPE_CHECKING:  # types only: importing the front ends loads no driver
    from ..stores import AsyncStore


class AsyncRelay(RelayBase):
    """Delivers the events table's undelivered rows to ``publishers``, at least once, in
    order per row (see :mod:`rowstate.relay`)."""

    def __init__(self, store: AsyncStore, publishers: Sequence[Publisher], *,
                 table: str = "rowstate_events", batch: int = 500,
                 namespace: str | None = None) -> None:
        super().__init__(store, publishers, table=table, batch=batch, namespace=namespace)
        self.store = store

    async def deliver(self) -> int:
        """One pass; returns how many events were delivered."""
        return await adrive(self.store, self._pass())

    async def drain(self) -> int:
        """Passes until one delivers nothing; returns how many events were delivered."""
        total = 0
        while n := await self.deliver():
            total += n
        return total
