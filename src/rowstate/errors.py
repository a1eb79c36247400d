"""The exception family of rowstate.

Programming errors raise; lost races do not. A refused transition (the row moved, another
worker holds the lease, a guard failed) is normal in a concurrent system and comes back as a
result with a reason. What raises is what a caller must fix in code: a machine that cannot
be built, an edge the machine lacks, a field the binding does not know, a value of the wrong
type. Driver errors are translated at the store boundary and keep the driver's error as
``__cause__``.
"""

from __future__ import annotations


class RowstateError(Exception):
    """Root of every error rowstate raises."""


# -- definitions -------------------------------------------------------------------------


class DefinitionError(RowstateError):
    """A machine or binding is malformed; raised when it is built, at import time."""


# -- bad input ---------------------------------------------------------------------------


class ValidationError(RowstateError, ValueError):
    """A call carries input the binding refuses (unknown field, wrong type, bad key)."""


class InvalidTransitionError(ValidationError):
    """The machine has no such edge; raised before any I/O."""

    def __init__(self, message: str, *, from_state: object = None, to_state: object = None):
        super().__init__(message)
        self.from_state = from_state
        self.to_state = to_state


# -- stores ------------------------------------------------------------------------------


class StoreError(RowstateError):
    """The database failed in a way the engine does not turn into a result."""


class ConnectionLostError(StoreError):
    """The connection died mid-call. The write either committed whole or not at all;
    retrying the same call is safe because every write is a compare-and-set."""


class InvariantViolation(StoreError):
    """A write broke a UNIQUE invariant index; the engine turns it into reason INVARIANT."""

    def __init__(self, message: str, *, index: str | None):
        super().__init__(message)
        self.index = index


# -- units of work -----------------------------------------------------------------------


class UnitRefusedError(RowstateError):
    """A statement was attempted in a unit of work that can no longer commit: a hold or
    fence in it was refused (``reason``), so nothing it writes may land; or the unit ended."""

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.reason = reason


class SchemaMismatch(DefinitionError):
    """A table lacks what its binding needs (``check_schema``); ``problems`` lists all."""

    def __init__(self, message: str, *, problems: tuple[str, ...]):
        super().__init__(message)
        self.problems = problems
