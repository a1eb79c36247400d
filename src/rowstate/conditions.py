"""Conditions as a small tree with two readers.

Every check the engine makes (state, owner, guards, leases, claims) is built once as a tree
of these nodes. :func:`render` turns it into SQL for the write; :func:`evaluate` runs it in
Python against a row for the dry run and for explaining a refused write. Because both read the
same tree, "may I?" and "do it" cannot diverge.

Values never appear in the tree: a node holds a :class:`Slot` naming a per-call value, so the
rendered SQL of one statement shape is byte-identical across calls (cacheable, and prepared
server-side by psycopg after a few runs). Field names are :class:`Ref` objects that the
binding built after checking them, so nothing a caller passes is ever pasted into SQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

# -- leaves --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Slot:
    """A per-call value, looked up by name when the statement runs."""

    name: str
    json: bool = False  # compared against a JSON path: bound as JSON text on PostgreSQL


@dataclass(frozen=True, slots=True)
class Const:
    """A value fixed by the binding's definition (still bound as a parameter)."""

    value: object


Value = Slot | Const


@dataclass(frozen=True, slots=True)
class Ref:
    """A field of the row: a column, a path inside a JSON column, or the effective state.

    ``derived`` is set on the state reference when the binding derives a state from a legacy
    column while the state column is NULL: ``(legacy_column, ((legacy, state), ...))``.
    """

    column: str
    path: tuple[str, ...] = ()
    derived: tuple[str, tuple[tuple[str, str], ...]] | None = None

    @property
    def dotted(self) -> str:
        return ".".join((self.column, *self.path))


# -- nodes ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class In:
    """``ref IN values``, null-aware: ``nullable`` adds ``OR ref IS NULL``."""

    ref: Ref
    values: tuple[Value, ...]
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class IsNull:
    ref: Ref


@dataclass(frozen=True, slots=True)
class Same:
    """Null-safe equality (``IS NOT DISTINCT FROM``): ``None`` matches only NULL."""

    ref: Ref
    value: Value


@dataclass(frozen=True, slots=True)
class Older:
    """``ref < now - ttl`` (``<=`` when inclusive); a NULL ref is not older than anything."""

    ref: Ref
    ttl: Value  # seconds
    inclusive: bool = False


@dataclass(frozen=True, slots=True)
class NotAfter:
    """``ref <= value`` for times (a due column against a caller's instant); a NULL ref is
    never due."""

    ref: Ref
    value: Value


@dataclass(frozen=True, slots=True)
class Or:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class And:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    part: Node


Node = In | IsNull | Same | Older | NotAfter | Or | And | Not


@dataclass(frozen=True, slots=True)
class Check:
    """One conjunct of a write's WHERE, with the reason reported when it fails.

    ``reason`` is what the caller reads in ``result.reasons`` (e.g. ``JOB_RUNNING``);
    ``category`` is the primary ``result.reason`` it maps to (e.g. ``GUARD_FAILED``).
    """

    node: Node
    reason: str
    category: str


# -- reader 1: SQL -------------------------------------------------------------------------


class SqlDialect(Protocol):
    def ref(self, ref: Ref, alias: str | None, out: SqlOut) -> str: ...
    def is_null(self, ref: Ref, alias: str | None, out: SqlOut) -> str: ...
    def older(self, column_sql: str, ttl: Value, out: SqlOut, inclusive: bool) -> str: ...
    def same(self, left: str, right: str) -> str: ...
    def value(self, value: Value, out: SqlOut) -> str: ...


class SqlOut:
    """Collects the parameters (slots and constants) in the order the SQL text uses them."""

    __slots__ = ("params",)

    def __init__(self) -> None:
        self.params: list[Value] = []


def render(node: Node, dialect: SqlDialect, alias: str | None, out: SqlOut) -> str:
    """SQL text for ``node``; parameters are appended to ``out`` in order."""
    match node:
        case In(ref, values, nullable):
            parts = []
            if values:
                # rendered only when used: a JSON path or a derived state binds parameters
                col = dialect.ref(ref, alias, out)
                if len(values) == 1:
                    parts.append(f"{col} = {dialect.value(values[0], out)}")
                else:
                    inner = ", ".join(dialect.value(v, out) for v in values)
                    parts.append(f"{col} IN ({inner})")
            if nullable:
                parts.append(dialect.is_null(ref, alias, out))
            return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"
        case IsNull(ref):
            return dialect.is_null(ref, alias, out)
        case Same(ref, value):
            col = dialect.ref(ref, alias, out)
            return dialect.same(col, dialect.value(value, out))
        case Older(ref, ttl, inclusive):
            return dialect.older(dialect.ref(ref, alias, out), ttl, out, inclusive)
        case NotAfter(ref, value):
            return f"{dialect.ref(ref, alias, out)} <= {dialect.value(value, out)}"
        case Or(parts):
            return "(" + " OR ".join(render(p, dialect, alias, out) for p in parts) + ")"
        case And(parts):
            return "(" + " AND ".join(render(p, dialect, alias, out) for p in parts) + ")"
        case Not(part):
            return f"NOT {render(part, dialect, alias, out)}"
    raise TypeError(f"not a condition node: {node!r}")  # pragma: no cover


# -- reader 2: Python ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowView:
    """What :func:`evaluate` needs: the row, the call's values, the clock, a time parser."""

    row: Mapping[str, Any]
    values: Mapping[str, Any]
    now: datetime
    parse_time: Callable[[Any], datetime | None]


def lookup(ref: Ref, row: Mapping[str, Any]) -> Any:
    value = row.get(ref.column)
    if ref.derived is not None and value is None:
        legacy, mapping = ref.derived
        return dict(mapping).get(row.get(legacy))  # type: ignore[arg-type]
    if ref.path and isinstance(value, str | bytes):
        # the column as stored (JSON text on SQLite); a string found *inside* the document
        # is a string, as SQL's path operators see it, even if its text looks like JSON
        try:
            value = json.loads(value)
        except ValueError:
            return None
    for key in ref.path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _resolve(value: Value, view: RowView) -> Any:
    return view.values[value.name] if isinstance(value, Slot) else value.value


def same_value(a: Any, b: Any) -> bool:
    """Equality as SQL sees it for the values guards accept (bools are not numbers)."""
    if isinstance(a, bool) or isinstance(b, bool):
        if isinstance(a, bool) and isinstance(b, bool):
            return a is b
        # SQLite stores booleans as 0/1: a 0/1 integer column compares equal to a bool
        other, flag = (a, b) if isinstance(b, bool) else (b, a)
        return isinstance(other, int) and other == int(flag)
    return bool(a == b)


def evaluate(node: Node, view: RowView) -> bool:
    match node:
        case In(ref, values, nullable):
            got = lookup(ref, view.row)
            if got is None:
                return nullable
            return any(same_value(got, _resolve(v, view)) for v in values)
        case IsNull(ref):
            return lookup(ref, view.row) is None
        case Same(ref, value):
            got, want = lookup(ref, view.row), _resolve(value, view)
            if got is None or want is None:
                return got is None and want is None
            return same_value(got, want)
        case Older(ref, ttl, inclusive):
            at = view.parse_time(lookup(ref, view.row))
            if at is None:
                return False
            limit = view.now - timedelta(seconds=float(_resolve(ttl, view)))
            return at <= limit if inclusive else at < limit
        case NotAfter(ref, value):
            at, until = view.parse_time(lookup(ref, view.row)), view.parse_time(
                _resolve(value, view))
            return at is not None and until is not None and at <= until
        case Or(parts):
            return any(evaluate(p, view) for p in parts)
        case And(parts):
            return all(evaluate(p, view) for p in parts)
        case Not(part):
            return not evaluate(part, view)
    raise TypeError(f"not a condition node: {node!r}")  # pragma: no cover


def failing(checks: Sequence[Check], view: RowView) -> list[Check]:
    """Every check the row fails, in order: the dry run reports them all at once."""
    return [c for c in checks if not evaluate(c.node, view)]
