"""rowstate: durable state machines for database rows.

One source of truth (a row's state column) and one door (:meth:`Lifecycle.transition`, a
single conditional write). Lost races come back as results with reasons; programming errors
raise. See the README for the tour.
"""

from .binding import (
    NOW,
    Binding,
    Derived,
    FinalizationClaim,
    Guard,
    Lease,
    Notice,
    TimedEdge,
    Unique,
)
from .core import ActiveLease, Call, Op
from .drive import adrive, drive
from .errors import (
    ConnectionLostError,
    DefinitionError,
    InvalidTransitionError,
    InvariantViolation,
    RowstateError,
    StoreError,
    UnitRefusedError,
    ValidationError,
)
from .lifecycle import AsyncLifecycle, Lifecycle
from .machine import Edge, Machine
from .relay import AsyncRelay, NatsPublisher, Relay
from .results import (
    ActFailed,
    BulkResult,
    CheckResult,
    EdgeCheck,
    Event,
    FinalizationClaimResult,
    Fired,
    FireReport,
    HoldResult,
    LeaseClaim,
    Reason,
    ReleaseResult,
    RunResult,
    TransitionResult,
)
from .stores import (
    AsyncPostgresStore,
    AsyncSQLiteStore,
    PostgresStore,
    SQLiteStore,
    connect,
    connect_async,
)
from .units import AsyncUnit, Unit

__all__ = [
    "NOW",
    "ActFailed",
    "ActiveLease",
    "AsyncLifecycle",
    "AsyncPostgresStore",
    "AsyncRelay",
    "AsyncSQLiteStore",
    "AsyncUnit",
    "Binding",
    "BulkResult",
    "Call",
    "CheckResult",
    "ConnectionLostError",
    "DefinitionError",
    "Derived",
    "Edge",
    "EdgeCheck",
    "Event",
    "FinalizationClaim",
    "FinalizationClaimResult",
    "FireReport",
    "Fired",
    "Guard",
    "HoldResult",
    "InvalidTransitionError",
    "InvariantViolation",
    "Lease",
    "LeaseClaim",
    "Lifecycle",
    "Machine",
    "NatsPublisher",
    "Notice",
    "Op",
    "PostgresStore",
    "Reason",
    "Relay",
    "ReleaseResult",
    "RowstateError",
    "RunResult",
    "SQLiteStore",
    "StoreError",
    "TimedEdge",
    "TransitionResult",
    "Unique",
    "Unit",
    "UnitRefusedError",
    "ValidationError",
    "adrive",
    "connect",
    "connect_async",
    "drive",
]
