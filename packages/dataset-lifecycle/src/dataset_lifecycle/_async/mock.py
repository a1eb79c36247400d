"""The test double of the client, written once: the real client on a private in-memory
database, recording its calls (see :mod:`dataset_lifecycle.testing`).

``_async/mock.py`` (asyncio) is the source; ``_sync/mock.py`` is generated from it by
``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from rowstate.ext import SQLite

from .._config import LifecycleConfig, Publisher, configured
from .._machine import STALE_CLAIM_MS
from .._recording import (
    ClaimCall,
    Recorder,
    ReleaseCall,
    TransitionCall,
    recorded_identifier,
    upsert_row,
)
from .._setup import schema_script
from .._types import (
    ClaimResult,
    DatasetStatusChanged,
    Identifier,
    Logger,
    ReleaseResult,
    Statuses,
    TransitionOptions,
    TransitionResult,
)
from .client import AsyncDatasetLifecycleClient


class AsyncMockDatasetLifecycle(AsyncDatasetLifecycleClient):
    """``AsyncDatasetLifecycle`` on a private in-memory database, recording its calls.

    Implements :class:`AsyncDatasetLifecycleApi`; takes the rule options of ``init``, as a
    :class:`LifecycleConfig` (a service's own, say) or as keywords. Its persistence source
    is always its own database: a source the config names is not used. ``set_initial_state``
    is a plain call; ``reset()`` starts over on an empty database with empty recordings;
    ``close()`` releases the database (the mock is unusable then).
    """

    def __init__(self, config: LifecycleConfig | None = None, /, *,
                 reservation_field: str | None = None,
                 load_guards: Mapping[str, Any] | None = None,
                 stale_claim_ms: float = STALE_CLAIM_MS, payload_columns: Iterable[str] = (),
                 event_publisher: Publisher | None = None, logger: Logger | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        super().__init__()
        self.transition_calls: list[TransitionCall] = []
        self.claim_calls: list[ClaimCall] = []
        self.release_calls: list[ReleaseCall] = []
        self.events: list[DatasetStatusChanged] = []
        cfg = configured(config, LifecycleConfig(
            reservation_field=reservation_field, load_guards=load_guards,
            stale_claim_ms=stale_claim_ms, payload_columns=payload_columns,
            event_publisher=event_publisher, logger=logger, clock=clock))
        self._forward = cfg.event_publisher
        self._config = replace(cfg, persistence=None, store=None, pool=None, dsn="sqlite://",
                               event_publisher=Recorder(self.events, self._forward))
        self._start()

    def _start(self) -> None:
        self.transition_calls.clear()
        self.claim_calls.clear()
        self.release_calls.clear()
        self.events.clear()
        self.init(self._config)
        setup = self._ready()
        sync_store = getattr(setup.store, "sync", setup.store)
        # BLOB: stored as given
        extra = {c: "BLOB" for c in self._config.payload_columns}
        sync_store.execute_script(schema_script(setup, extra))

    def set_initial_state(self, identifier: Identifier, state: Mapping[str, Any]) -> None:
        """Put the dataset's row in ``state`` (replacing it): camelCase columns as in the
        table, e.g. ``{"dataloadingStatus": "LOADING", "jobId": "job-1"}``; ``"__DR"`` takes
        a dict; payload columns given to the mock are accepted too."""
        setup = self._ready()
        sync_store = getattr(setup.store, "sync", setup.store)
        sync_store.run(upsert_row(setup.rules.binding, SQLite(), identifier, state))

    async def reset(self) -> None:
        await super().reset()
        self._start()

    async def close(self) -> None:
        """Release the in-memory database; the mock is unusable afterwards."""
        await AsyncDatasetLifecycleClient.reset(self)

    async def transition(self, identifier: Identifier,
                         options: TransitionOptions | None = None, /, *, to: str | None = None,
                         from_: Statuses = None, owner_job_id: str | None = None,
                         payload: Mapping[str, Any] | None = None, event_data: Any = None,
                         guards: Mapping[str, Any] | None = None) -> TransitionResult:
        move = TransitionOptions.of(options, to=to, from_=from_, owner_job_id=owner_job_id,
                                    payload=payload, event_data=event_data, guards=guards)
        result = None
        try:
            result = await super().transition(identifier, move)
            return result
        finally:
            self.transition_calls.append(TransitionCall(
                recorded_identifier(identifier), move.to, move.from_, move.owner_job_id,
                move.payload, move.event_data, move.guards, result))

    async def claim_finalization(self, identifier: Identifier, job_id: str, *,
                                 scope: str | None = None) -> ClaimResult:
        result = None
        try:
            result = await super().claim_finalization(identifier, job_id, scope=scope)
            return result
        finally:
            self.claim_calls.append(
                ClaimCall(recorded_identifier(identifier), job_id, scope, result))

    async def release_claim(self, identifier: Identifier, job_id: str, *,
                            scope: str | None = None) -> ReleaseResult:
        result = None
        try:
            result = await super().release_claim(identifier, job_id, scope=scope)
            return result
        finally:
            self.release_calls.append(
                ReleaseCall(recorded_identifier(identifier), job_id, scope, result))
