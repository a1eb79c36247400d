# Generated from rowstate/_async/relay.py by scripts/unasync.py: do not edit.
# Edit the source, then run `make unasync` (`make twins` checks).
"""The outbox relay (:mod:`rowstate.relay`), written once: ``_async/relay.py`` (asyncio)
is the source, and ``_sync/relay.py`` is generated from it by ``scripts/unasync.py``. The
pass both drive is :mod:`rowstate.relaypass`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..protocol import drive
from ..relaypass import Publisher, RelayBase

if TYPE_CHECKING:  # types only: importing the front ends loads no driver
    from ..stores import Store


class Relay(RelayBase):
    """Delivers the events table's undelivered rows to ``publishers``, at least once, in
    order per row (see :mod:`rowstate.relay`)."""

    def __init__(self, store: Store, publishers: Sequence[Publisher], *,
                 table: str = "rowstate_events", batch: int = 500,
                 namespace: str | None = None) -> None:
        super().__init__(store, publishers, table=table, batch=batch, namespace=namespace)
        self.store = store

    def deliver(self) -> int:
        """One pass; returns how many events were delivered."""
        return drive(self.store, self._pass())

    def drain(self) -> int:
        """Passes until one delivers nothing; returns how many events were delivered."""
        total = 0
        while n := self.deliver():
            total += n
        return total
