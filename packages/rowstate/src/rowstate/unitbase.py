"""What both units of work share (:mod:`rowstate.units` says what a unit is): the
placeholder rewrite, how values are bound and read, and :class:`UnitBase`, the state and
checks of an open unit. The units themselves are ``_async/units.py`` (the source) and
``_sync/units.py`` (generated from it by ``scripts/unasync.py``).

One pair is here because it is not a matter of spelling, named in the generator's table:
:func:`call_back` / :func:`acall_back`, an after-commit callback called, or called and
awaited when it gives a coroutine (how ``AsyncLifecycle`` publishes after a commit)."""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .dialects import canonical_time
from .errors import UnitRefusedError, ValidationError
from .protocol import Door

Rows = list[list[tuple[Any, ...]]]
# runs one statement on the unit's connection: (rows, column names or None)
Raw = Callable[[str, Any], tuple[list[Any], Any]]
AsyncRaw = Callable[[str, Any], Awaitable[tuple[list[Any], Any]]]
Params = Sequence[Any] | Mapping[str, Any] | None

# -- placeholders --------------------------------------------------------------------------

# psycopg reads placeholders anywhere in the text (quotes included: a literal percent sign
# is ``%%`` everywhere), so the rewrite does too, and both databases see the same SQL
_TOKENS = re.compile(r"%\((?P<name>[A-Za-z_][A-Za-z0-9_]*)\)s|%(?P<other>.)", re.DOTALL)


@functools.lru_cache(maxsize=2048)
def sqlite_sql(sql: str, *, rewrite: bool = True) -> str:
    """psycopg's placeholders (``%s``, ``%(name)s``, ``%%``) in SQLite's spelling; with
    ``rewrite=False`` only checked (PostgreSQL reads them itself), by the same rule. An
    application runs the same few texts again and again: each is read once (a refused
    one raises, and is not remembered)."""
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
        # the canonical form ends in Z: fromisoformat (3.11) reads it as aware UTC, ~70
        # times faster than strptime, and a page reads hundreds of them
        return datetime.fromisoformat(value)
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


def call_back(callback: Callable[[], Any]) -> None:
    """An after-commit callback of a sync unit: called."""
    callback()


async def acall_back(callback: Callable[[], Any]) -> None:
    """An after-commit callback of an async unit: called, and awaited when it gives a
    coroutine (``AsyncLifecycle`` publishes after the commit that way)."""
    got = callback()
    if inspect.iscoroutine(got):
        await got
