"""What callers pass in and get back: identifiers, results, the event, the protocols.

Results are plain dataclasses with the seed's fields in snake_case; a refusal is a result
with a reason, never an exception (lost races are normal with competing consumers). Each
result is truthy exactly when the thing it reports happened, so ``if not result:`` reads
as the seed's ``if (!result.applied)``.

The two API protocols at the end (``DatasetLifecycleApi`` and its ``Async`` twin) are kept
by hand: they are declarations without logic, fifteen lines each, and
``tests/dataset_lifecycle/test_dataset_mock.py`` checks that the two declare the same
methods with the same parameters, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from rowstate import RowstateError, UsageError, ValidationError

# -- errors --------------------------------------------------------------------------------


class LifecycleNotInitializedError(RowstateError):
    """A method was called before ``init()`` (or after ``reset()``)."""


# -- identifiers ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DatasetIdentifier:
    """Which dataset: the table's key ``("userId", "datasetId")``."""

    user_id: str
    dataset_id: str

    @classmethod
    def of(cls, identifier: DatasetIdentifier | Mapping[str, Any]) -> DatasetIdentifier:
        """Accepts an identifier or a mapping ``{"userId": ..., "datasetId": ...}``
        (``user_id``/``dataset_id`` also accepted); anything else is a ValidationError."""
        if isinstance(identifier, DatasetIdentifier):
            found = identifier
        elif isinstance(identifier, Mapping):
            user = identifier.get("userId", identifier.get("user_id"))
            dataset = identifier.get("datasetId", identifier.get("dataset_id"))
            found = cls(user, dataset)
        else:
            raise ValidationError(
                "identifier must be a DatasetIdentifier or a mapping with userId and datasetId,"
                f" got {identifier!r}"
            )
        for name, value in (("userId", found.user_id), ("datasetId", found.dataset_id)):
            if not isinstance(value, str) or not value:
                raise ValidationError(f"identifier {name} must be a non-empty string, "
                                      f"got {value!r}")
        return found

    @property
    def key(self) -> tuple[str, str]:
        return (self.user_id, self.dataset_id)

    def as_keys(self) -> dict[str, str]:
        """The table's key as the seed spells it: ``{"userId": ..., "datasetId": ...}``."""
        return {"userId": self.user_id, "datasetId": self.dataset_id}


Identifier = DatasetIdentifier | Mapping[str, Any]

#: What ``from_`` may be: one status, several, or None (read the current one first).
Statuses = str | Iterable[str] | None

# -- what a transition is asked to do ------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TransitionOptions:
    """The seed's ``TransitionOptions``: everything one ``transition`` call asks for.

    ``transition(identifier, TransitionOptions(to=..., ...))`` and
    ``transition(identifier, to=..., ...)`` are the same call (the keywords are these
    fields); a call gives one form or the other. Plain data: the call checks it (an unknown
    status, a payload field that is not a payload column, ...) before any I/O.

    * ``to``: the status to move to (aliases such as ``IDLE`` accepted);
    * ``from_``: the status(es) the move may leave; None reads the current status first;
    * ``owner_job_id``: on a move to LOADING, the job that becomes the row's ``jobId``
      (required); on any other move, the row's ``jobId`` must equal it;
    * ``payload``: extra columns written in the same write (``payload_columns`` only);
    * ``event_data``: carried by the ``DatasetStatusChanged`` event (JSON-serialisable);
    * ``guards``: extra CAS conditions, ``{field: accepted value(s)}``.
    """

    to: str
    from_: Statuses = None
    owner_job_id: str | None = None
    payload: Mapping[str, Any] | None = None
    event_data: Any = None
    guards: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, options: TransitionOptions | None, *, to: str | None, from_: Statuses,
           owner_job_id: str | None, payload: Mapping[str, Any] | None, event_data: Any,
           guards: Mapping[str, Any] | None) -> TransitionOptions:
        """The options of a ``transition`` call given either form; both, or neither ``to``
        nor options, is a :class:`rowstate.UsageError` (a TypeError, as a missing argument
        is)."""
        keywords = (to, from_, owner_job_id, payload, event_data, guards)
        if options is not None:
            if not isinstance(options, TransitionOptions):
                raise UsageError(f"transition options must be a TransitionOptions, got "
                                 f"{type(options).__name__}")
            if any(k is not None for k in keywords):
                raise UsageError("transition takes a TransitionOptions or keyword arguments "
                                 "(to=, from_=, ...), not both")
            return options
        if to is None:
            raise UsageError("transition needs to= (or a TransitionOptions)")
        return cls(to=to, from_=from_, owner_job_id=owner_job_id, payload=payload,
                   event_data=event_data, guards=guards)


# -- results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransitionResult:
    """``reason`` is the primary one (STATE_MISMATCH, NOT_OWNER, GUARD_FAILED,
    RECORD_NOT_FOUND); ``reasons`` lists every block reason found at once (e.g.
    ``["JOB_RUNNING", "LOAD_QUEUED"]``). ``previous_status`` is where an applied move came
    from; ``current_status`` is the status the row has now, as far as the call saw it."""

    applied: bool
    reason: str | None = None
    reasons: list[str] = field(default_factory=list)
    previous_status: str | None = None
    current_status: str | None = None

    def __bool__(self) -> bool:
        return self.applied


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """``current_holder``/``current_scope`` say who holds the claim: the caller when
    claimed, the other finalizer on HELD_BY_OTHER."""

    claimed: bool
    reason: str | None = None
    current_holder: str | None = None
    current_scope: str | None = None

    def __bool__(self) -> bool:
        return self.claimed


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    """``released`` is False (reason NOT_HELD) when this (job, scope) held nothing: the
    transition already cleared the claim, or another finalizer took it after the TTL."""

    released: bool
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.released


@dataclass(frozen=True, slots=True)
class LifecycleState:
    """A snapshot of everything the lifecycle reads on one row; ``record`` is the row."""

    user_id: str
    dataset_id: str
    status: str | None
    job_id: str | None
    finalizing_job_id: str | None
    finalizing_scope: str | None
    finalizing_claim_time: datetime | None
    is_job_running: bool
    is_jlo_running: bool
    queued_load_token: str | None
    record: Mapping[str, Any] = field(default_factory=dict)


#: The seed's ``BusyReason``: why a dataset is busy (a load must not start). Plain strings
#: (a ``Literal``, as the seed's string union), in the order ``check_busy`` reports them;
#: each is also a :class:`Reason` and a block reason of a refused move to LOADING.
BusyReason = Literal["DATALOADING_ACTIVE", "JOB_RUNNING", "JLO_RUNNING", "LOAD_QUEUED"]


@dataclass(frozen=True, slots=True)
class BusyCheckResult:
    """``reasons``: every :data:`BusyReason` the row carries (DATALOADING_ACTIVE,
    JOB_RUNNING, JLO_RUNNING, LOAD_QUEUED); ``current_status`` is None when the dataset does
    not exist (then it is not busy)."""

    busy: bool
    reasons: list[BusyReason] = field(default_factory=list)
    current_status: str | None = None

    def __bool__(self) -> bool:
        return self.busy


@dataclass(frozen=True, slots=True)
class TransitionCheckResult:
    """The dry run: would the move apply now, and every reason why not, at once."""

    allowed: bool
    reasons: list[str] = field(default_factory=list)
    current_status: str | None = None

    def __bool__(self) -> bool:
        return self.allowed


# -- the event -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DatasetStatusChanged:
    """Published after an applied transition committed (at most once: the table has no
    outbox, so a crash between the commit and the publish loses the event)."""

    type: ClassVar[str] = "DatasetStatusChanged"

    identifier: DatasetIdentifier
    from_: str | None
    to: str
    job_id: str | None
    event_data: Any
    time: datetime

    def to_dict(self) -> dict[str, Any]:
        """The wire shape, in the seed's camelCase."""
        return {
            "type": self.type,
            "userId": self.identifier.user_id,
            "datasetId": self.identifier.dataset_id,
            "from": self.from_,
            "to": self.to,
            "jobId": self.job_id,
            "eventData": self.event_data,
            "time": self.time.isoformat(),
        }


# -- protocols -----------------------------------------------------------------------------


@runtime_checkable
class EventPublisher(Protocol):
    """Receives every :class:`DatasetStatusChanged`; ``publish`` may be a coroutine."""

    def publish(self, event: DatasetStatusChanged) -> Awaitable[None] | None: ...


@runtime_checkable
class PersistenceAdapter(Protocol):
    """The escape hatch: two calls on plain ``{field: value}`` shapes are enough for every
    operation, claims and their TTL included.

    * ``condition``: every field must match; a list means "one of", ``None`` (alone or in
      a list) means IS NULL (a missing JSON key counts); ``"__DR.isJobRunning"`` is a path
      inside a JSON column. It always holds the full key.
    * ``update``: the values to write; a dotted field sets that path inside the JSON column
      and keeps its other keys; times are timezone-aware ``datetime`` objects.
    * ``update_by_expression`` must be one atomic conditional write (compare-and-set) and
      return True if it changed the row, False if the condition did not hold.
    * ``get_by_keys`` returns the whole record for ``{"userId", "datasetId"}`` or None.

    Methods may be coroutines; then use the adapter with ``AsyncDatasetLifecycle``.
    """

    def update_by_expression(self, table: str, update: Mapping[str, Any],
                             condition: Mapping[str, Any]) -> bool | Awaitable[bool]: ...

    def get_by_keys(self, table: str, keys: Mapping[str, Any],
                    ) -> Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None: ...


class Logger(Protocol):
    """What the lifecycle logs through: a :class:`logging.Logger` fits."""

    def info(self, msg: str, *args: Any) -> Any: ...
    def warning(self, msg: str, *args: Any) -> Any: ...
    def error(self, msg: str, *args: Any) -> Any: ...


class DatasetLifecycleApi(Protocol):
    """The runtime contract shared by ``DatasetLifecycle`` and ``MockDatasetLifecycle``:
    type a dependency-injection slot with it."""

    def transition(self, identifier: Identifier, options: TransitionOptions | None = None,
                   /, *, to: str | None = None, from_: Statuses = None,
                   owner_job_id: str | None = None, payload: Mapping[str, Any] | None = None,
                   event_data: Any = None, guards: Mapping[str, Any] | None = None,
                   ) -> TransitionResult: ...

    def claim_finalization(self, identifier: Identifier, job_id: str, *,
                           scope: str | None = None) -> ClaimResult: ...

    def release_claim(self, identifier: Identifier, job_id: str, *,
                      scope: str | None = None) -> ReleaseResult: ...

    def get_lifecycle_state(self, identifier: Identifier) -> LifecycleState | None: ...

    def check_busy(self, identifier: Identifier) -> BusyCheckResult: ...

    def is_busy(self, identifier: Identifier) -> bool: ...

    def can_transition_to(self, identifier: Identifier, to: str, *,
                          owner_job_id: str | None = None) -> TransitionCheckResult: ...

    def get_status(self, identifier: Identifier) -> str | None: ...

    def is_loading(self, identifier: Identifier) -> bool: ...


class AsyncDatasetLifecycleApi(Protocol):
    """:class:`DatasetLifecycleApi` for asyncio: the same methods, as coroutines."""

    async def transition(self, identifier: Identifier,
                         options: TransitionOptions | None = None, /, *, to: str | None = None,
                         from_: Statuses = None, owner_job_id: str | None = None,
                         payload: Mapping[str, Any] | None = None, event_data: Any = None,
                         guards: Mapping[str, Any] | None = None) -> TransitionResult: ...

    async def claim_finalization(self, identifier: Identifier, job_id: str, *,
                                 scope: str | None = None) -> ClaimResult: ...

    async def release_claim(self, identifier: Identifier, job_id: str, *,
                            scope: str | None = None) -> ReleaseResult: ...

    async def get_lifecycle_state(self, identifier: Identifier) -> LifecycleState | None: ...

    async def check_busy(self, identifier: Identifier) -> BusyCheckResult: ...

    async def is_busy(self, identifier: Identifier) -> bool: ...

    async def can_transition_to(self, identifier: Identifier, to: str, *,
                                owner_job_id: str | None = None) -> TransitionCheckResult: ...

    async def get_status(self, identifier: Identifier) -> str | None: ...

    async def is_loading(self, identifier: Identifier) -> bool: ...
