"""Conditions as a small tree with two readers.

Every check the engine makes (state, owner, guards, leases, claims) is built once as a tree
of these nodes. :func:`render` turns it into SQL for the write; :func:`evaluate` runs it in
Python against a row for the dry run and for explaining a refused write. Because both read the
same tree, "may I?" and "do it" cannot diverge; both follow one rule of equality (below), and
tests/rowstate/test_condition_differential.py holds the two readers and both databases to it.

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
    ``aliases`` is set on it while the machine keeps old names of renamed states
    (``Machine(aliases=)``): ``((old, new), ...)``, a row still holding an old name reads as
    the new one.
    """

    column: str
    path: tuple[str, ...] = ()
    derived: tuple[str, tuple[tuple[str, str], ...]] | None = None
    aliases: tuple[tuple[str, str], ...] = ()

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
    """Null-safe equality (``IS NOT DISTINCT FROM``): ``None`` matches only NULL. For plain
    columns (claims, fences); a guard inside a JSON document is an :class:`In`."""

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
    def json_in(self, ref: Ref, values: tuple[Value, ...], alias: str | None,
                out: SqlOut) -> str: ...
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
            if ref.aliases and all(isinstance(v, Const) for v in values):
                # states named by the binding: the stored column against the names and the
                # old names they had, so that an index on the state column still serves
                olds = tuple(Const(old) for old, new in ref.aliases
                             if any(isinstance(v, Const) and v.value == new
                                    for v in values))
                ref, values = Ref(ref.column, ref.path, ref.derived), values + olds
            if values and ref.path and ref.derived is None:
                # JSON's equality, not the database's: see same_json
                parts.append(dialect.json_in(ref, values, alias, out))
            elif values:
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
            # SQL's NOT of an unknown (a comparison with NULL) is unknown, which a WHERE
            # reads as false; the Python reader's comparisons with a missing value are
            # plainly false, so its NOT is true. COALESCE makes SQL read it the same way.
            return f"NOT COALESCE({render(part, dialect, alias, out)}, FALSE)"
    raise TypeError(f"not a condition node: {node!r}")  # pragma: no cover


# -- reader 2: Python ----------------------------------------------------------------------


def json_text(raw: Any) -> Any:
    """A JSON column's value as SQLite (and most adapters) hand it back: JSON text."""
    return json.loads(raw) if isinstance(raw, str | bytes) else raw


@dataclass(frozen=True, slots=True)
class RowView:
    """What :func:`evaluate` needs: the row, the call's values, the clock, a time parser,
    and how a JSON column's value is decoded (``json_text`` by default; PostgreSQL's rows
    are decoded already, so there a ``str`` is a JSON string document, not JSON text)."""

    row: Mapping[str, Any]
    values: Mapping[str, Any]
    now: datetime
    parse_time: Callable[[Any], datetime | None]
    load_json: Callable[[Any], Any] = json_text


def lookup(ref: Ref, row: Mapping[str, Any],
           load_json: Callable[[Any], Any] = json_text) -> Any:
    """The value ``ref`` names in ``row``; None for NULL, a JSON null, a missing key, or a
    path through anything but an object (as SQL's path operators read it)."""
    value = row.get(ref.column)
    if ref.aliases and value is not None:
        value = dict(ref.aliases).get(value, value)
    if ref.derived is not None and value is None:
        legacy, mapping = ref.derived
        return dict(mapping).get(row.get(legacy))  # type: ignore[arg-type]
    if ref.path:
        # the column as stored (JSON text on SQLite); a string found *inside* the document
        # is a string, as SQL's path operators see it, even if its text looks like JSON
        try:
            value = load_json(value)
        except ValueError:
            return None
    for key in ref.path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _resolve(value: Value, view: RowView) -> Any:
    return view.values[value.name] if isinstance(value, Slot) else value.value


# The rule of equality, one for both readers and both databases:
#
# * Inside a JSON document (a guard on ``column.path``) JSON's types decide: a number is not
#   a boolean (``0`` is not ``false``, ``1`` is not ``true``), a string is not a number
#   (``"1"`` is not ``1``), an object or array equals no guard value, and numbers compare
#   by value (``1`` is ``1.0``). PostgreSQL's jsonb compares so by itself; SQLite's
#   ``json_extract`` reads JSON true/false as 1/0, so its dialect also compares
#   ``json_type`` (``SQLite.json_in``); Python's ``0 == False`` is not consulted.
# * On a plain column the database's own comparison applies, and a guard value should be
#   of the column's type. SQLite has no boolean type and stores booleans as the integers
#   0/1, so there a bool guard matches a 0/1 number (PostgreSQL refuses to compare a
#   boolean with an integer column at all).


def same_json(got: Any, want: Any) -> bool:
    """Equality of a value read from a JSON document with a guard's scalar (JSON's rule)."""
    if isinstance(got, bool) or isinstance(want, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got is want
    if isinstance(got, int | float) and isinstance(want, int | float):
        return bool(got == want)
    if isinstance(got, str) and isinstance(want, str):
        return got == want
    return False


def same_value(a: Any, b: Any) -> bool:
    """Equality of a plain column's value with a guard's (the column's rule, above)."""
    if isinstance(a, bool) or isinstance(b, bool):
        if isinstance(a, bool) and isinstance(b, bool):
            return a is b
        # SQLite stores booleans as 0/1: a 0/1 number column compares equal to a bool
        other, flag = (a, b) if isinstance(b, bool) else (b, a)
        return isinstance(other, int | float) and other == int(flag)
    return bool(a == b)


def evaluate(node: Node, view: RowView) -> bool:
    match node:
        case In(ref, values, nullable):
            got = lookup(ref, view.row, view.load_json)
            if got is None:
                return nullable
            same = same_json if ref.path else same_value
            return any(same(got, _resolve(v, view)) for v in values)
        case IsNull(ref):
            return lookup(ref, view.row, view.load_json) is None
        case Same(ref, value):
            got, want = lookup(ref, view.row, view.load_json), _resolve(value, view)
            if got is None or want is None:
                return got is None and want is None
            return (same_json if ref.path else same_value)(got, want)
        case Older(ref, ttl, inclusive):
            at = view.parse_time(lookup(ref, view.row, view.load_json))
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


def set_path(document: Any, path: Sequence[str], value: Any) -> dict[str, Any]:
    """``document`` (decoded JSON) with ``path`` set to ``value``: the Python twin of the
    dialects' ``json_set``, which the entry writes (a reservation field such as
    ``__DR.flags.running``) are rendered with.

    The rule, on both databases: anything on the way that is not an object (a missing
    key, JSON null, SQL NULL, a string, a number, an array) is replaced by an object, so
    the write always lands. An entry write is part of a transition; a terminal move must
    never be refused, or raise, because of what an unrelated writer left in the document.
    """
    out = dict(document) if isinstance(document, Mapping) else {}
    head, *rest = path
    out[head] = set_path(out.get(head), rest, value) if rest else value
    return out


def failing(checks: Sequence[Check], view: RowView) -> list[Check]:
    """Every check the row fails, in order: the dry run reports them all at once."""
    return [c for c in checks if not evaluate(c.node, view)]
