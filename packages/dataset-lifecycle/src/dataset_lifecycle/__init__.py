"""dataset_lifecycle: the authoritative dataset state machine (seeds/dataset-lifecycle.md),
in Python, on the rowstate engine.

The single owner of a dataset's ``dataloadingStatus``: atomic guarded transitions owned by a
job, finalization claims scoped by (job, scope) with a TTL self-heal, the reservation field
cleared in the same write as a terminal status, load guards injected into the CAS, busy
checks, a dry run that evaluates exactly the rules the write enforces, and a
``DatasetStatusChanged`` event after every applied transition.

    from dataset_lifecycle import DatasetLifecycle, LifecycleConfig, STATUSES

    DatasetLifecycle.init(LifecycleConfig(reservation_field="__DR.isJobRunning"))
    result = DatasetLifecycle.transition(identifier, to=STATUSES.SUCCEEDED,
                                         owner_job_id="job-abc")
"""

from rowstate import InvalidTransitionError, ValidationError

from ._async.store_adapter import AsyncStorePersistenceAdapter
from ._client import (
    ENV_DSN,
    AsyncDatasetLifecycle,
    AsyncDatasetLifecycleClient,
    DatasetLifecycle,
    DatasetLifecycleClient,
    create_persistence_adapter,
)
from ._config import LifecycleConfig, PersistenceSource
from ._machine import (
    MACHINE,
    STALE_CLAIM_MS,
    STATUSES,
    TRANSITION_TABLE,
    DatasetStatus,
    Reason,
    evaluate_transition,
    is_valid_transition,
)
from ._rules import BUSY_SIGNALS, DEFAULT_LOAD_GUARDS, DEFAULT_SCHEMA, DEFAULT_TABLE
from ._schema import MIGRATION_SQL, migration_sql, schema_sql
from ._sync.store_adapter import StorePersistenceAdapter
from ._types import (
    AsyncDatasetLifecycleApi,
    BusyCheckResult,
    BusyReason,
    ClaimResult,
    DatasetIdentifier,
    DatasetLifecycleApi,
    DatasetStatusChanged,
    EventPublisher,
    LifecycleNotInitializedError,
    LifecycleState,
    Logger,
    PersistenceAdapter,
    ReleaseResult,
    TransitionCheckResult,
    TransitionOptions,
    TransitionResult,
)

BlockReason = Reason

__all__ = [
    "BUSY_SIGNALS",
    "DEFAULT_LOAD_GUARDS",
    "DEFAULT_SCHEMA",
    "DEFAULT_TABLE",
    "ENV_DSN",
    "MACHINE",
    "MIGRATION_SQL",
    "STALE_CLAIM_MS",
    "STATUSES",
    "TRANSITION_TABLE",
    "AsyncDatasetLifecycle",
    "AsyncDatasetLifecycleApi",
    "AsyncDatasetLifecycleClient",
    "AsyncStorePersistenceAdapter",
    "BlockReason",
    "BusyCheckResult",
    "BusyReason",
    "ClaimResult",
    "DatasetIdentifier",
    "DatasetLifecycle",
    "DatasetLifecycleApi",
    "DatasetLifecycleClient",
    "DatasetStatus",
    "DatasetStatusChanged",
    "EventPublisher",
    "InvalidTransitionError",
    "LifecycleConfig",
    "LifecycleNotInitializedError",
    "LifecycleState",
    "Logger",
    "PersistenceAdapter",
    "PersistenceSource",
    "Reason",
    "ReleaseResult",
    "StorePersistenceAdapter",
    "TransitionCheckResult",
    "TransitionOptions",
    "TransitionResult",
    "ValidationError",
    "create_persistence_adapter",
    "evaluate_transition",
    "is_valid_transition",
    "migration_sql",
    "schema_sql",
]
