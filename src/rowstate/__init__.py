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
from .core import ActiveLease
from .errors import (
    ConnectionLostError,
    DefinitionError,
    InvalidTransitionError,
    InvariantViolation,
    RowstateError,
    StatementCancelled,
    StoreError,
    UsageError,
    ValidationError,
)
from .lifecycle import AsyncLifecycle, Lifecycle
from .machine import Edge, Machine
from .relay import AsyncRelay, NatsPublisher, Relay
from .results import (
    CheckResult,
    Event,
    FinalizationClaimResult,
    Fired,
    FireReport,
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

__all__ = [
    "NOW",
    "ActiveLease",
    "AsyncLifecycle",
    "AsyncPostgresStore",
    "AsyncRelay",
    "AsyncSQLiteStore",
    "Binding",
    "CheckResult",
    "ConnectionLostError",
    "DefinitionError",
    "Derived",
    "Edge",
    "Event",
    "FinalizationClaim",
    "FinalizationClaimResult",
    "FireReport",
    "Fired",
    "Guard",
    "InvalidTransitionError",
    "InvariantViolation",
    "Lease",
    "LeaseClaim",
    "Lifecycle",
    "Machine",
    "NatsPublisher",
    "Notice",
    "PostgresStore",
    "Reason",
    "Relay",
    "ReleaseResult",
    "RowstateError",
    "RunResult",
    "SQLiteStore",
    "StatementCancelled",
    "StoreError",
    "TimedEdge",
    "TransitionResult",
    "Unique",
    "UsageError",
    "ValidationError",
    "connect",
    "connect_async",
]
