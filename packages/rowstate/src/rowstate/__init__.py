"""rowstate: durable state machines for database rows.

One source of truth (a row's state column) and one door (:meth:`Lifecycle.transition`, a
single conditional write). Lost races come back as results with reasons; programming errors
raise. See the README for the tour.

This module is what an application needs, and only that (``__all__``, pinned by
tests/rowstate/test_surface.py): defining a machine and its binding, connecting, moving
rows, reading the results, catching the errors. The rest is reached through a few public
modules, each with one job:

* :mod:`rowstate.ext`: the extension protocol (the core, ``drive``/``adrive``, operations,
  the compiler, dialects, the condition tree), for code that composes core operations;
* :mod:`rowstate.stores`: the concrete stores (``SQLiteStore``, ``PostgresStore`` and their
  async twins) for options beyond what :func:`connect` takes from a URL;
* :mod:`rowstate.results`: every result type, the rarely named ones too (``Fired``,
  ``EdgeCheck``, ``HoldResult``); :mod:`rowstate.observe` and :mod:`rowstate.gauges`:
  metrics and traces; :mod:`rowstate.migrations`: renaming states with rows in them;
* :mod:`rowstate.contrib`: one module per integration, each behind an extra (``nats``,
  ``otel``, ``prometheus``, ``sqlalchemy``, ``django``).

``import rowstate`` loads nothing outside the standard library; the PostgreSQL driver is
imported when a PostgreSQL store is first made.
"""

from .binding import Binding
from .errors import (
    ConnectError,
    ConnectionLostError,
    DefinitionError,
    InvalidTransitionError,
    InvariantViolation,
    OutcomeUnknown,
    RowstateError,
    SchemaMismatch,
    StatementCancelled,
    StoreError,
    UnitRefusedError,
    UsageError,
    ValidationError,
)
from .lifecycle import AsyncLifecycle, Lifecycle
from .machine import Edge, Machine
from .protocol import ActiveLease
from .relay import AsyncRelay, Relay
from .results import (
    ActFailed,
    BulkResult,
    CheckResult,
    Event,
    FinalizationClaimResult,
    FireReport,
    LeaseClaim,
    Reason,
    ReleaseResult,
    RunResult,
    TransitionResult,
)
from .specs import NOW, Derived, FinalizationClaim, Guard, Lease, Notice, TimedEdge, Unique
from .stores import AsyncStore, Store, connect, connect_async
from .units import AsyncUnit, Unit


def __getattr__(name: str) -> str:
    """``rowstate.__version__``, read from the installed distribution on first use (PEP
    562): importlib.metadata costs more to import than the whole engine."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("rowstate")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'rowstate' has no attribute {name!r}")


__all__ = [  # noqa: RUF022 (grouped by what an application does with them)
    # defining a machine and where it lives
    "Machine",
    "Edge",
    "Binding",
    "Guard",
    "Lease",
    "FinalizationClaim",
    "TimedEdge",
    "Notice",
    "Derived",
    "Unique",
    "NOW",
    # connecting and moving rows
    "connect",
    "connect_async",
    "Store",
    "AsyncStore",
    "Lifecycle",
    "AsyncLifecycle",
    "Unit",
    "AsyncUnit",
    "ActiveLease",
    # events and their delivery
    "Event",
    "Relay",
    "AsyncRelay",
    # results
    "TransitionResult",
    "Reason",
    "CheckResult",
    "LeaseClaim",
    "ActFailed",
    "RunResult",
    "ReleaseResult",
    "FinalizationClaimResult",
    "BulkResult",
    "FireReport",
    # errors
    "RowstateError",
    "DefinitionError",
    "SchemaMismatch",
    "ValidationError",
    "UsageError",
    "InvalidTransitionError",
    "StoreError",
    "ConnectError",
    "ConnectionLostError",
    "OutcomeUnknown",
    "StatementCancelled",
    "InvariantViolation",
    "UnitRefusedError",
]
