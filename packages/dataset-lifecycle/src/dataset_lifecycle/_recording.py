"""What both mocks record, and how a test seeds a row: :mod:`dataset_lifecycle.testing`'s
plain parts (the mocks are ``_async/mock.py``, the source, and ``_sync/mock.py``,
generated from it by ``scripts/unasync.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rowstate import Binding, ValidationError
from rowstate.ext import Batch, Dialect

from ._machine import NOT_AVAILABLE, normalize_status
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


def recorded_identifier(identifier: Identifier) -> DatasetIdentifier:
    """The identifier as recorded; a malformed one is kept as given (the call raised)."""
    try:
        return DatasetIdentifier.of(identifier)
    except ValidationError:
        return identifier  # type: ignore[return-value]


class Recorder:
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
