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


class UsageError(ValidationError, TypeError):
    """A call of the wrong kind for its front end (an async act or adapter under the sync
    one); also a TypeError, which is what it was before it had a class of its own."""


class InvalidTransitionError(ValidationError):
    """The machine has no such edge; raised before any I/O."""

    def __init__(self, message: str, *, from_state: object = None, to_state: object = None):
        super().__init__(message)
        self.from_state = from_state
        self.to_state = to_state


# -- stores ------------------------------------------------------------------------------


class StoreError(RowstateError):
    """The database failed in a way the engine does not turn into a result."""


class ConnectError(StoreError):
    """No connection could be opened (the server refused, the database does not exist, the
    password is wrong, the connect timeout passed): nothing was sent, so nothing landed.
    Raised within the store's connect timeout, with the server's own message; retrying is
    the caller's choice, as the fault is usually the configuration's.

    A store raises it when it opens (the PostgreSQL stores open and close one connection
    first, the async one on its first call; SQLite opens its file), not after a pool's
    30 s of silent retries, and logs nothing: the error is the report. Once a store has
    connected, a server that goes away is :class:`ConnectionLostError`'s, as before.

    ``target`` says where (PostgreSQL: database, host, port and user, never the password;
    SQLite: the path); ``detail`` is the driver's own words, the server's message in them
    (``FATAL: database "nope" does not exist``); ``timed_out`` is True when nobody answered
    within the connect timeout (a host that is down or black-holed, a server that hangs),
    False when something answered no (refused, no such database or role, bad password).
    """

    def __init__(self, message: str, *, target: str | None = None, detail: str = "",
                 timed_out: bool = False) -> None:
        super().__init__(message)
        self.target = target
        self.detail = detail
        self.timed_out = timed_out


class ConnectionLostError(StoreError):
    """The connection died mid-call. From rowstate's PostgreSQL stores a plain
    ConnectionLostError means the loss came before anything was committed (a checkout, a
    read, a statement inside a transaction before its COMMIT): nothing landed. When the
    commit itself was in flight the error is its subclass :class:`OutcomeUnknown`: the
    write *may have landed*. Other stores (contrib) may not tell the two apart and raise
    this for both, so treat it as "may have landed" unless the store is rowstate's.
    Retrying the same call is safe because every write is a compare-and-set. run() keeps
    its lease (fenced) until the TTL, as it cannot know whether its finalize committed."""


class OutcomeUnknown(ConnectionLostError):
    """The connection died while the statement that commits was in flight (a COMMIT, or
    the one autocommitted statement that was the whole call): the database may have
    committed it or not, and no answer came to say which.

    Never a refusal and never retried by the engine: the write is either whole or absent,
    so the caller finds out which by reading, with ``lifecycle.resolve(key, to, from_=...)``
    (the row and its last event: docs/engine.md "When a COMMIT gets no answer"), or retries
    the call when it is idempotent by its ``from_`` (after the move applied, the retry is a
    refusal whose ``state`` is the row's current one). A :class:`ConnectionLostError`, so
    what catches that (``run()`` keeping its lease fenced until the TTL) catches this; a
    plain ConnectionLostError from the PostgreSQL stores means nothing committed.
    """


class StatementCancelled(StoreError):
    """The database cancelled the statement and rolled it back: it *did not land*.

    PostgreSQL's ``statement_timeout`` or a cancel request (QueryCanceled), a
    ``lock_timeout`` (LockNotAvailable), a deadlock or a serialization failure (not
    40003, "statement completion unknown", which may have landed). psycopg files these
    under OperationalError, beside a dead connection, but the server answered: nothing
    committed, so run() releases its lease at once and a retry is safe.
    """


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
