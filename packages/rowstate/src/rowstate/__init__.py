"""rowstate: durable state machines for database rows.

One source of truth (a row's state column) and one door (:meth:`Lifecycle.transition`, a
single conditional write). Lost races come back as results with reasons; programming errors
raise. See the README for the tour.
"""

from typing import TYPE_CHECKING, Any

# -- the extension seam: what an application that composes its own operations builds on
# (dataset_lifecycle's persistence adapter evaluates the engine's own checks on another
# executor). Public and stable like the rest; the modules they live in stay private.
from .binding import Binding
from .compiler import Compiler, Set, Statement
from .conditions import (
    And,
    Check,
    Const,
    In,
    IsNull,
    Node,
    Not,
    Older,
    Or,
    Ref,
    RowView,
    Same,
    Slot,
    SqlOut,
    Value,
    evaluate,
    failing,
    lookup,
    set_path,
)
from .core import Core
from .dialects import Dialect, Postgres, SQLite, canonical_time, check_ident
from .errors import (
    ConnectionLostError,
    DefinitionError,
    InvalidTransitionError,
    InvariantViolation,
    RowstateError,
    SchemaMismatch,
    StatementCancelled,
    StoreError,
    UnitRefusedError,
    UsageError,
    ValidationError,
)
from .gauges import Gauges
from .lifecycle import AsyncLifecycle, Lifecycle
from .machine import Edge, Machine
from .observe import Observation, Observer
from .protocol import ActiveLease, Batch, Call, Op, adrive, drive
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
from .specs import (
    NOW,
    Derived,
    FinalizationClaim,
    Guard,
    Lease,
    Notice,
    TimedEdge,
    Unique,
)
from .units import AsyncUnit, Unit
from .values import check_scalar

if TYPE_CHECKING:
    from .stores import (
        AsyncPostgresStore,
        AsyncSQLiteStore,
        AsyncStore,
        PostgresStore,
        SQLiteStore,
        Store,
        connect,
        connect_async,
        postgres_url,
    )

# The stores are the only modules that import a driver (psycopg): loaded on first use, so
# that ``import rowstate`` (and the core: machine, conditions, compiler, the decisions)
# loads no driver. PEP 562.
_STORES = frozenset({"AsyncPostgresStore", "AsyncSQLiteStore", "PostgresStore", "SQLiteStore",
                     "AsyncStore", "Store", "connect", "connect_async", "postgres_url"})


def __getattr__(name: str) -> Any:
    if name in _STORES:
        from . import stores

        return getattr(stores, name)
    raise AttributeError(f"module 'rowstate' has no attribute {name!r}")

__all__ = [  # noqa: RUF022 (grouped: the door, then the extension seam)
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
    "Gauges",
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
    "Observation",
    "Observer",
    "Op",
    "PostgresStore",
    "Reason",
    "Relay",
    "ReleaseResult",
    "RowstateError",
    "RunResult",
    "SQLiteStore",
    "SchemaMismatch",
    "StatementCancelled",
    "StoreError",
    "TimedEdge",
    "TransitionResult",
    "Unique",
    "Unit",
    "UnitRefusedError",
    "UsageError",
    "ValidationError",
    "adrive",
    "connect",
    "connect_async",
    "drive",
    # the extension seam
    "And",
    "AsyncStore",
    "Batch",
    "Check",
    "Compiler",
    "Const",
    "Core",
    "Dialect",
    "In",
    "IsNull",
    "Node",
    "Not",
    "Older",
    "Or",
    "Postgres",
    "Ref",
    "RowView",
    "SQLite",
    "Same",
    "Set",
    "Slot",
    "SqlOut",
    "Statement",
    "Store",
    "Value",
    "canonical_time",
    "check_ident",
    "check_scalar",
    "postgres_url",
    "set_path",
    "evaluate",
    "failing",
    "lookup",
]
