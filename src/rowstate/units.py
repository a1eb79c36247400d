"""Units of work: the application's own SQL and the engine's moves in one transaction.

An application keeps its own tables around the machine's row (a week's submissions, its
assignments, per-recipient deliveries). ``with lifecycle.atomic() as tx:`` (``async with``
on the async twin, or ``store.atomic()`` so that several bindings on one store share it)
opens ONE database transaction (``BEGIN IMMEDIATE`` on SQLite); every transition, claim,
finalize and create called on that store while it is open joins it, and so does the
caller's own SQL (:meth:`Unit.execute`). Everything commits together or not at all:

* an exception rolls everything back and propagates;
* a refused move is a result, as outside a unit, and does not abort the unit (each engine
  write runs in a savepoint, so a refused UNIQUE invariant does not poison the
  transaction on PostgreSQL);
* ``tx.hold(key, states)`` and ``tx.fence(lease)`` make the caller's later writes
  conditional on the row: refused, they return a result with the reason and the unit can
  no longer commit: every later statement raises :class:`UnitRefusedError` and the unit
  rolls back when it ends, so forgetting to check the result cannot write past the rule;
* nesting (a unit opened while one is open on the same store, or ``tx.savepoint()``) is a
  savepoint: an exception inside rolls back only the inner part.

**Placeholders.** Application SQL uses ONE style on both databases, psycopg's: ``%s`` for
a positional value, ``%(name)s`` for a named one, ``%%`` for a literal percent sign. On
SQLite the text is rewritten to ``?`` / ``:name``, exactly where psycopg would bind (it
reads placeholders anywhere, inside quotes too), so no caller ever rewrites placeholders.
Values are always bound, never pasted.

**Values and rows.** Aware ``datetime`` values are bound in the database's canonical time
form (UTC text ``YYYY-MM-DDTHH:MM:SS.sssZ`` on SQLite, ``timestamptz`` on PostgreSQL); a
naive one is refused. ``dict`` and ``list`` values are bound as JSON. Rows come back as
dicts keyed by column name; times come back as aware UTC datetimes on both databases (on
SQLite, a text value in exactly the canonical form is read as a time).

The unit is found through a context variable of its store: code running in the same thread
(or asyncio task) joins it; a new thread does not (it would block on the writer lock).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from .dialects import canonical_time
from .errors import UnitRefusedError, ValidationError
from .protocol import Batch, Door, adrive, drive
from .results import HoldResult

Rows = list[list[tuple[Any, ...]]]
Params = Sequence[Any] | Mapping[str, Any] | None

# -- placeholders --------------------------------------------------------------------------

# psycopg reads placeholders anywhere in the text (quotes included: a literal percent sign
# is ``%%`` everywhere), so the rewrite does too, and both databases see the same SQL
_TOKENS = re.compile(r"%\((?P<name>[A-Za-z_][A-Za-z0-9_]*)\)s|%(?P<other>.)", re.DOTALL)


def sqlite_sql(sql: str, *, rewrite: bool = True) -> str:
    """psycopg's placeholders (``%s``, ``%(name)s``, ``%%``) in SQLite's spelling; with
    ``rewrite=False`` only checked (PostgreSQL reads them itself), by the same rule."""
    if "%" not in sql:
        return sql

    def swap(m: re.Match[str]) -> str:
        if m.group("name"):
            return ":" + m.group("name")
        other = m.group("other")
        if other == "s":
            return "?"
        if other == "%":
            return "%"
        raise ValidationError(f"unsupported placeholder %{other} in application SQL "
                              "(use %s, %(name)s or %%)")

    swapped = _TOKENS.sub(swap, sql)
    return swapped if rewrite else sql


_CANONICAL = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def bound_value(value: Any, dialect: str, to_json: Callable[[Any], Any]) -> Any:
    """One application value as it is bound (see the module docstring)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValidationError(f"times must be timezone-aware, got {value!r}")
        return canonical_time(value) if dialect == "sqlite" else value.astimezone(UTC)
    if isinstance(value, dict | list):
        return to_json(value)
    return value


def bound_params(params: Params, dialect: str,
                 to_json: Callable[[Any], Any]) -> Sequence[Any] | Mapping[str, Any]:
    if params is None:
        return ()
    if isinstance(params, Mapping):
        return {k: bound_value(v, dialect, to_json) for k, v in params.items()}
    if isinstance(params, str | bytes):
        raise ValidationError("parameters are a sequence or a mapping, not a string")
    return [bound_value(v, dialect, to_json) for v in params]


def read_value(value: Any) -> Any:
    """A value as an application reads it: times as aware UTC datetimes on both."""
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo is not None else value
    if isinstance(value, str) and len(value) == 24 and _CANONICAL.match(value):
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return value


def as_dicts(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    return [{c: read_value(v) for c, v in zip(columns, row, strict=True)} for row in rows]


# -- the unit ------------------------------------------------------------------------------


class UnitBase:
    """What the sync and async units share: the refusal, savepoint names, the callbacks
    to run after the commit, and the lifecycle that ``hold``/``fence`` default to."""

    def __init__(self, dialect: str, door: Door | None = None,
                 to_json: Callable[[Any], Any] = json.dumps) -> None:
        self.dialect = dialect
        self.door = door
        self.to_json = to_json  # how a dict or list is bound: JSON text, or psycopg's Jsonb
        self.refused: str | None = None
        self.closed = False
        self._savepoints = 0
        self._after_commit: list[Callable[[], Any]] = []

    def _usable(self) -> None:
        if self.closed:
            raise UnitRefusedError("this unit of work has ended", reason="UNIT_CLOSED")
        if self.refused is not None:
            raise UnitRefusedError(
                f"this unit of work can no longer commit: a hold or fence was refused "
                f"({self.refused}); its writes are rolled back", reason=self.refused)

    def _refuse(self, reason: str | None) -> None:
        if self.refused is None:
            self.refused = reason or "REFUSED"

    def _next_savepoint(self) -> str:
        self._savepoints += 1
        return f"rowstate_sp{self._savepoints}"

    def _isolated(self, statements: Sequence[tuple[str, Sequence[Any]]],
                  transaction: bool) -> bool:
        """Does an engine batch need its own savepoint? A multi-statement write always; on
        PostgreSQL any write too, since one failed statement (a refused UNIQUE invariant)
        would abort the whole transaction. The engine's reads start with SELECT."""
        if transaction:
            return True
        return self.dialect != "sqlite" and not all(
            sql.startswith("SELECT") for sql, _ in statements)

    def after_commit(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` once the unit committed (never if it rolled back)."""
        self._after_commit.append(callback)

    def _door(self, lifecycle: Door | None) -> Door:
        door = lifecycle if lifecycle is not None else self.door
        if door is None:
            raise ValidationError("hold/fence on a store's unit need lifecycle=: the "
                                  "binding whose row they check")
        return door

    def _sql(self, sql: str) -> str:
        if not isinstance(sql, str) or not sql.strip():
            raise ValidationError("application SQL is a non-empty string")
        return sqlite_sql(sql, rewrite=self.dialect == "sqlite")


class Unit(UnitBase):
    """One open transaction (sync). ``raw(sql, params)`` runs a statement on the unit's
    connection and returns ``(rows, column names or None)``, errors already translated."""

    def __init__(self, dialect: str, raw: Callable[[str, Any], tuple[list[Any], Any]],
                 door: Door | None = None,
                 to_json: Callable[[Any], Any] = json.dumps) -> None:
        super().__init__(dialect, door, to_json)
        self._raw = raw

    def run(self, batch: Batch) -> Rows:
        """An engine batch, inside this transaction (a savepoint where it must be)."""
        self._usable()
        statements = batch.statements
        if not self._isolated(statements, batch.transaction):
            out = [self._raw(sql, params)[0] for sql, params in statements]
        else:
            with self._savepoint():
                out = [self._raw(sql, params)[0] for sql, params in statements]
        if batch.otherwise is not None and not out[-1]:  # the read explaining a refusal
            out.append(self._raw(*batch.otherwise)[0])
        return out

    def execute(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        """Run the application's own statement; its rows (if any) as dicts."""
        self._usable()
        bound = bound_params(params, self.dialect, self.to_json)
        rows, columns = self._raw(self._sql(sql), bound)
        return as_dicts(columns, rows) if columns else []

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        name = self._next_savepoint()
        self._raw(f"SAVEPOINT {name}", ())
        try:
            yield
        except BaseException:
            self._raw(f"ROLLBACK TO SAVEPOINT {name}", ())
            self._raw(f"RELEASE SAVEPOINT {name}", ())
            raise
        self._raw(f"RELEASE SAVEPOINT {name}", ())

    @contextmanager
    def savepoint(self) -> Iterator[Unit]:
        """A nested unit: an exception inside rolls back only what was done inside."""
        self._usable()
        with self._savepoint():
            yield self

    def hold(self, key: object, states: str | Sequence[str], *,
             lifecycle: Door | None = None) -> HoldResult:
        """Lock the row and check it is in one of ``states`` with no live lease (see the
        module docstring). Refused: a :class:`~rowstate.results.HoldResult` saying why,
        and this unit can no longer commit."""
        self._usable()
        got = drive(self, self._door(lifecycle).core.hold(key, states))
        if not got.held:
            self._refuse(got.reason)
        return got

    def fence(self, lease: object, *, lifecycle: Door | None = None) -> HoldResult:
        """Check that ``lease`` (a claim, or the object ``run()`` hands its act) still
        holds the row: its token is still the row's, and the row is locked against a
        takeover until the unit ends. Refused (``LEASE_LOST``): the unit cannot commit."""
        self._usable()
        got = drive(self, self._door(lifecycle).core.fence(lease))
        if not got.held:
            self._refuse(got.reason)
        return got


class AsyncUnit(UnitBase):
    """One open transaction (asyncio); the twin of :class:`Unit`."""

    def __init__(self, dialect: str, raw: Callable[[str, Any], Any],
                 door: Door | None = None,
                 to_json: Callable[[Any], Any] = json.dumps) -> None:
        super().__init__(dialect, door, to_json)
        self._raw = raw

    async def run(self, batch: Batch) -> Rows:
        self._usable()
        statements = batch.statements
        if not self._isolated(statements, batch.transaction):
            out = [(await self._raw(sql, params))[0] for sql, params in statements]
        else:
            name = await self._begin_savepoint()
            try:
                out = [(await self._raw(sql, params))[0] for sql, params in statements]
            except BaseException:
                await self._rollback_savepoint(name)
                raise
            await self._raw(f"RELEASE SAVEPOINT {name}", ())
        if batch.otherwise is not None and not out[-1]:  # the read explaining a refusal
            out.append((await self._raw(*batch.otherwise))[0])
        return out

    async def execute(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        self._usable()
        bound = bound_params(params, self.dialect, self.to_json)
        rows, columns = await self._raw(self._sql(sql), bound)
        return as_dicts(columns, rows) if columns else []

    async def _begin_savepoint(self) -> str:
        name = self._next_savepoint()
        await self._raw(f"SAVEPOINT {name}", ())
        return name

    async def _rollback_savepoint(self, name: str) -> None:
        await self._raw(f"ROLLBACK TO SAVEPOINT {name}", ())
        await self._raw(f"RELEASE SAVEPOINT {name}", ())

    def savepoint(self) -> _AsyncSavepoint:
        self._usable()
        return _AsyncSavepoint(self)

    async def hold(self, key: object, states: str | Sequence[str], *,
                   lifecycle: Door | None = None) -> HoldResult:
        self._usable()
        got = await adrive(self, self._door(lifecycle).core.hold(key, states))
        if not got.held:
            self._refuse(got.reason)
        return got

    async def fence(self, lease: object, *,
                    lifecycle: Door | None = None) -> HoldResult:
        self._usable()
        got = await adrive(self, self._door(lifecycle).core.fence(lease))
        if not got.held:
            self._refuse(got.reason)
        return got


class _AsyncSavepoint:
    def __init__(self, unit: AsyncUnit) -> None:
        self.unit = unit
        self.name = ""

    async def __aenter__(self) -> AsyncUnit:
        self.name = await self.unit._begin_savepoint()
        return self.unit

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            await self.unit._raw(f"RELEASE SAVEPOINT {self.name}", ())
        else:
            await self.unit._rollback_savepoint(self.name)
