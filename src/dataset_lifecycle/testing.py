"""Test doubles: the real engine on an in-memory SQLite database.

``MockDatasetLifecycle`` is not a copy of the rules: it *is* ``DatasetLifecycle``, on a
private ``sqlite://`` database, so an illegal transition, a lost claim or a failed load guard
behaves in a unit test exactly as in production. On top it records every call
(``transition_calls``, ``claim_calls``, ``release_calls``) and every published event
(``events``), and lets a test put a row in any state (``set_initial_state``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rowstate import Batch, Binding, Dialect, SQLite, ValidationError

from ._client import AsyncDatasetLifecycleClient, DatasetLifecycleClient, _Base, _Setup
from ._machine import NOT_AVAILABLE, STALE_CLAIM_MS, normalize_status
from ._rules import STATUS
from ._types import (
    ClaimResult,
    DatasetIdentifier,
    DatasetStatusChanged,
    Identifier,
    ReleaseResult,
    TransitionResult,
)


@dataclass(frozen=True, slots=True)
class TransitionCall:
    identifier: DatasetIdentifier
    to: str
    from_: Any
    owner_job_id: str | None
    payload: Mapping[str, Any] | None
    event_data: Any
    guards: Mapping[str, Any] | None
    result: TransitionResult | None  # None: the call raised


@dataclass(frozen=True, slots=True)
class ClaimCall:
    identifier: DatasetIdentifier
    job_id: str
    scope: str | None
    result: ClaimResult | None


@dataclass(frozen=True, slots=True)
class ReleaseCall:
    identifier: DatasetIdentifier
    job_id: str
    scope: str | None
    result: ReleaseResult | None


def upsert_row(binding: Binding, dialect: Dialect, identifier: Identifier,
               state: Mapping[str, Any]) -> Batch:
    """Statements replacing the dataset's row by ``state`` (columns the binding knows;
    status defaults to NOT_AVAILABLE, aliases accepted): a test fixture, not an API door."""
    ident = DatasetIdentifier.of(identifier)
    if not isinstance(state, Mapping):
        raise ValidationError(f"state must be a mapping of column -> value, got {state!r}")
    row: dict[str, Any] = {STATUS: NOT_AVAILABLE, **state}
    row[STATUS] = normalize_status(row[STATUS])
    row.update(zip(binding.key, ident.key, strict=True))
    for column in row:
        if column not in binding.known:
            raise ValidationError(f"set_initial_state: unknown column {column!r}")
    table = dialect.table(binding.table_parts)
    p = dialect.placeholder
    where = " AND ".join(f"{dialect.quote(k)} = {p}" for k in binding.key)
    columns = ", ".join(dialect.quote(c) for c in row)
    values = [_db_value(dialect, v) for v in row.values()]
    return Batch((
        (f"DELETE FROM {table} WHERE {where}", list(ident.key)),
        (f"INSERT INTO {table} ({columns}) VALUES ({', '.join([p] * len(row))})", values),
    ), transaction=True)


def _db_value(dialect: Dialect, value: Any) -> Any:
    return dialect.payload_value(value)


def _ident(identifier: Identifier) -> DatasetIdentifier:
    """The identifier as recorded; a malformed one is kept as given (the call raised)."""
    try:
        return DatasetIdentifier.of(identifier)
    except ValidationError:
        return identifier  # type: ignore[return-value]


class _Recorder:
    """The mock's event publisher: keeps every event, then forwards to the caller's."""

    def __init__(self, events: list[DatasetStatusChanged], forward: Any) -> None:
        self.events = events
        self.forward = forward

    def publish(self, event: DatasetStatusChanged) -> Any:
        self.events.append(event)
        if self.forward is None:
            return None
        publish = getattr(self.forward, "publish", self.forward)
        return publish(event)


class _MockMixin:
    """What both mocks share: the configuration, the recordings, the seeding."""

    transition_calls: list[TransitionCall]
    claim_calls: list[ClaimCall]
    release_calls: list[ReleaseCall]
    events: list[DatasetStatusChanged]

    def __init__(self, *, reservation_field: str | None = None,
                 load_guards: Mapping[str, Any] | None = None,
                 stale_claim_ms: float = STALE_CLAIM_MS, payload_columns: Iterable[str] = (),
                 event_publisher: Any = None, logger: Any = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        super().__init__()  # the client's (the mixin comes first in both mocks' bases)
        self.transition_calls, self.claim_calls, self.release_calls = [], [], []
        self.events = []
        self._options: dict[str, Any] = dict(
            reservation_field=reservation_field, load_guards=load_guards,
            stale_claim_ms=stale_claim_ms, payload_columns=tuple(payload_columns),
            logger=logger, clock=clock)
        self._forward = event_publisher
        self._start()

    def _start(self) -> None:
        assert isinstance(self, _Base)
        self.transition_calls.clear()
        self.claim_calls.clear()
        self.release_calls.clear()
        self.events.clear()
        self.init(dsn="sqlite://", event_publisher=_Recorder(self.events, self._forward),
                  **self._options)
        setup = self._ready()
        sync_store = getattr(setup.store, "sync", setup.store)
        extra = {c: "BLOB" for c in self._options["payload_columns"]}  # BLOB: stored as given
        sync_store.execute_script(self._schema_script(setup, extra))

    def _mock_setup(self) -> _Setup:
        assert isinstance(self, _Base)
        return self._ready()

    def set_initial_state(self, identifier: Identifier, state: Mapping[str, Any]) -> None:
        """Put the dataset's row in ``state`` (replacing it): camelCase columns as in the
        table, e.g. ``{"dataloadingStatus": "LOADING", "jobId": "job-1"}``; ``"__DR"`` takes
        a dict; payload columns given to the mock are accepted too."""
        setup = self._mock_setup()
        sync_store = getattr(setup.store, "sync", setup.store)
        sync_store.run(upsert_row(setup.rules.binding, SQLite(), identifier, state))


class MockDatasetLifecycle(_MockMixin, DatasetLifecycleClient):
    """``DatasetLifecycle`` on a private in-memory database, recording its calls.

    Implements :class:`DatasetLifecycleApi`; takes the same rule options as ``init``.
    ``reset()`` starts over on an empty database with empty recordings.
    """

    def reset(self) -> None:
        super().reset()
        self._start()

    def close(self) -> None:
        """Release the in-memory database; the mock is unusable afterwards."""
        DatasetLifecycleClient.reset(self)

    def transition(self, identifier: Identifier, *, to: str, from_: Any = None,
                   owner_job_id: str | None = None, payload: Mapping[str, Any] | None = None,
                   event_data: Any = None, guards: Mapping[str, Any] | None = None,
                   ) -> TransitionResult:
        result = None
        try:
            result = super().transition(identifier, to=to, from_=from_,
                                        owner_job_id=owner_job_id, payload=payload,
                                        event_data=event_data, guards=guards)
            return result
        finally:
            self.transition_calls.append(TransitionCall(
                _ident(identifier), to, from_, owner_job_id, payload, event_data, guards,
                result))

    def claim_finalization(self, identifier: Identifier, job_id: str, *,
                           scope: str | None = None) -> ClaimResult:
        result = None
        try:
            result = super().claim_finalization(identifier, job_id, scope=scope)
            return result
        finally:
            self.claim_calls.append(ClaimCall(_ident(identifier), job_id, scope, result))

    def release_claim(self, identifier: Identifier, job_id: str, *,
                      scope: str | None = None) -> ReleaseResult:
        result = None
        try:
            result = super().release_claim(identifier, job_id, scope=scope)
            return result
        finally:
            self.release_calls.append(ReleaseCall(_ident(identifier), job_id, scope, result))


class AsyncMockDatasetLifecycle(_MockMixin, AsyncDatasetLifecycleClient):
    """``AsyncDatasetLifecycle`` on a private in-memory database, recording its calls.
    ``set_initial_state`` stays a plain call; ``reset()`` and ``close()`` are coroutines."""

    async def reset(self) -> None:
        await super().reset()
        self._start()

    async def close(self) -> None:
        await AsyncDatasetLifecycleClient.reset(self)

    async def transition(self, identifier: Identifier, *, to: str, from_: Any = None,
                         owner_job_id: str | None = None,
                         payload: Mapping[str, Any] | None = None, event_data: Any = None,
                         guards: Mapping[str, Any] | None = None) -> TransitionResult:
        result = None
        try:
            result = await super().transition(identifier, to=to, from_=from_,
                                              owner_job_id=owner_job_id, payload=payload,
                                              event_data=event_data, guards=guards)
            return result
        finally:
            self.transition_calls.append(TransitionCall(
                _ident(identifier), to, from_, owner_job_id, payload, event_data, guards,
                result))

    async def claim_finalization(self, identifier: Identifier, job_id: str, *,
                                 scope: str | None = None) -> ClaimResult:
        result = None
        try:
            result = await super().claim_finalization(identifier, job_id, scope=scope)
            return result
        finally:
            self.claim_calls.append(ClaimCall(_ident(identifier), job_id, scope, result))

    async def release_claim(self, identifier: Identifier, job_id: str, *,
                            scope: str | None = None) -> ReleaseResult:
        result = None
        try:
            result = await super().release_claim(identifier, job_id, scope=scope)
            return result
        finally:
            self.release_calls.append(ReleaseCall(_ident(identifier), job_id, scope, result))


__all__ = [
    "AsyncMockDatasetLifecycle",
    "ClaimCall",
    "MockDatasetLifecycle",
    "ReleaseCall",
    "TransitionCall",
    "upsert_row",
]
