"""The base of every dialect: identifiers, the canonical time form, the store's clock
placeholder, and :class:`Dialect` (what SQLite and PostgreSQL spell alike, and the hooks
each spells its own way). See :mod:`rowstate.dialects`."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from ..conditions import Const, Ref, Slot, SqlOut, Value
from ..errors import DefinitionError, ValidationError

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SQLITE_NOW_FORMAT = "%Y-%m-%dT%H:%M:%fZ"


def text_array(items: tuple[str, ...]) -> str:
    """PostgreSQL's array literal of these strings, each quoted (any text is safe)."""
    quoted = ('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"' for item in items)
    return "{" + ",".join(quoted) + "}"


def check_ident(name: str, what: str) -> str:
    """Identifiers are checked when a binding is built; only these ever reach SQL text."""
    if not isinstance(name, str) or not IDENT.match(name) or len(name) > 63:
        raise DefinitionError(f"{what} {name!r} is not a plain identifier")
    return name


def canonical_time(at: datetime) -> str:
    """The one text form SQLite stores: UTC, millisecond precision, ``Z`` suffix."""
    if at.tzinfo is None:
        raise ValidationError("times must be timezone-aware")
    # isoformat: C, four-digit years (strftime's %Y drops the zeros of years before 1000)
    return at.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class _StoreNow:
    """Parameter placeholder the SQLite store replaces with its clock reading, once per
    batch after ``BEGIN IMMEDIATE``: every statement of one write sees the same instant
    (SQLite's own ``'now'`` is re-read per statement, so a read, an event INSERT and the
    UPDATE of one transition could disagree on whether a lease is stale)."""

    def __repr__(self) -> str:
        return "STORE_NOW"


STORE_NOW: Any = _StoreNow()


class Dialect:
    """Shared spelling; subclasses override what their database spells differently."""

    # SQLite: "now" is always a parameter, filled by the store (STORE_NOW) unless injected
    now_is_param: ClassVar[bool] = False

    name: ClassVar[str]
    placeholder: ClassVar[str]
    for_update: ClassVar[str] = ""
    for_share: ClassVar[str] = ""  # a read lock held to the end of a unit of work
    time_type: ClassVar[str]
    json_type: ClassVar[str]
    serial_pk: ClassVar[str]

    # What the databases can do, named where the engine's statements differ by it:
    #: INSERT and UPDATE inside WITH ("writable CTEs"): one statement locks the row, moves
    #: it and writes its event row, and reads the row before and after. Without them the
    #: same write is several statements inside one ``BEGIN IMMEDIATE`` transaction.
    writable_ctes: ClassVar[bool] = False
    #: tables live in schemas: ``schema.table`` names one, and schema_sql creates the schema
    #: (without them, :meth:`table` keeps the last part)
    has_schemas: ClassVar[bool] = False
    #: ``ALTER TABLE ... ADD COLUMN IF NOT EXISTS``: schema_sql creates the table with its
    #: keys and adds every other column, so it also brings an older table up to date
    add_column_if_not_exists: ClassVar[bool] = False
    #: the driver hands times as datetimes and JSON documents decoded (else they are text,
    #: decoded before a row is handed to a caller: :meth:`rowstate.core.Context.public`)
    decodes_values: ClassVar[bool] = False

    def __init__(self, *, injected_clock: bool = False) -> None:
        self.injected_clock = injected_clock

    # -- names -------------------------------------------------------------------------

    @staticmethod
    def quote(name: str) -> str:
        return '"' + name + '"'

    def table(self, qualified: tuple[str, ...]) -> str:
        return ".".join(self.quote(p) for p in qualified)

    def column(self, name: str, alias: str | None) -> str:
        return f"{alias}.{self.quote(name)}" if alias else self.quote(name)

    # -- values ------------------------------------------------------------------------

    def value(self, value: Value, out: SqlOut) -> str:
        out.params.append(value)
        return self.placeholder

    def json_param(self, value: Value, out: SqlOut) -> str:
        """A parameter holding JSON text, stored in a JSON column."""
        return self.value(value, out)

    def adapt(self, value: Value, values: dict[str, Any]) -> Any:
        """The parameter sent for one slot or constant; a JSON slot (a guard value compared
        inside a JSON document) is sent as JSON text, so the database compares JSON types
        (``false`` is not ``0``)."""
        if isinstance(value, Const):
            return value.value
        got = values[value.name]
        return json.dumps(got) if value.json else got

    def payload_value(self, value: object) -> object:
        return value

    def load_json(self, raw: Any) -> Any:
        """A JSON column's value as read: text to decode (SQLite stores JSON as TEXT)."""
        return json.loads(raw) if isinstance(raw, str | bytes) else raw

    # -- references --------------------------------------------------------------------

    def ref(self, ref: Ref, alias: str | None, out: SqlOut) -> str:
        col = self.column(ref.column, alias)
        if ref.aliases:  # an old name of a renamed state reads as its new name
            whens = " ".join(
                f"WHEN {self.value(Const(old), out)} THEN {self.value(Const(new), out)}"
                for old, new in ref.aliases)
            col = f"CASE {col} {whens} ELSE {col} END"
        if ref.derived is not None:
            legacy, mapping = ref.derived
            whens = " ".join(
                f"WHEN {self.value(Const(old), out)} THEN {self.value(Const(new), out)}"
                for old, new in mapping
            )
            return f"COALESCE({col}, CASE {self.column(legacy, alias)} {whens} END)"
        if ref.path:
            return self.json_value(col, ref.path, out)
        return col

    def is_null(self, ref: Ref, alias: str | None, out: SqlOut) -> str:
        return f"{self.ref(ref, alias, out)} IS NULL"

    def json_in(self, ref: Ref, values: tuple[Value, ...], alias: str | None,
                out: SqlOut) -> str:
        """``ref`` (a JSON path) equals one of ``values`` (JSON slots), by JSON's rule
        (:func:`rowstate.conditions.same_json`)."""
        col = self.ref(ref, alias, out)
        if len(values) == 1:
            return f"{col} = {self.value(values[0], out)}"
        return f"{col} IN ({', '.join(self.value(v, out) for v in values)})"

    def json_value(self, col: str, path: tuple[str, ...], out: SqlOut) -> str:
        raise NotImplementedError

    def in_list(self, column: str, param: str) -> str:
        """``column`` equals one of the values of the list parameter ``param`` (bound as
        :meth:`list_param` gives it): one statement text for any number of values."""
        raise NotImplementedError

    def list_param(self, values: list[Any]) -> Any:
        """A list of values as the parameter :meth:`in_list` reads."""
        raise NotImplementedError

    def json_set(self, column: str, writes: Sequence[tuple[tuple[str, ...], Value]],
                 out: SqlOut) -> str:
        """The JSON document in ``column`` (a column's SQL, holding no parameter) with each
        ``(path, value)`` of ``writes`` set in order; a value holds JSON text.

        Whatever is on the way and is not an object (SQL NULL, JSON null, a string, a
        number, an array, a missing key) is replaced by an object, on both databases, as
        :func:`rowstate.conditions.set_path` does in Python: the write always lands, so a
        terminal move is never refused or failed by its reservation write.

        The writes are merged into one tree of keys first; each node reads the object at
        its own prefix straight from the column, so the text grows linearly with the paths
        instead of nesting copies of the column's expression.
        """
        tree = _JsonTree()
        for path, value in writes:
            tree.put(path, value, path)
        return self._json_tree(column, (), tree, out)

    def _json_tree(self, column: str, prefix: tuple[str, ...], tree: _JsonTree,
                   out: SqlOut) -> str:
        # parameters are appended in text order: put(put(base, k1, v1), k2, v2) is the
        # base's, then k1 and v1's, then k2 and v2's
        text = self.json_object_at(column, prefix, out)
        for key, sub in tree.keys.items():
            key_sql = self.json_key(key, out)
            if isinstance(sub, _JsonTree):
                value = self._json_tree(column, (*prefix, key), sub, out)
            else:
                value = self.json_text_param(sub, out)
            text = self.json_put(text, key_sql, value)
        return text

    def json_text_param(self, value: Value, out: SqlOut) -> str:
        raise NotImplementedError

    def json_object_at(self, current: str, prefix: tuple[str, ...], out: SqlOut) -> str:
        """The object at ``prefix`` inside ``current``, or an empty one if there is none."""
        raise NotImplementedError

    def json_key(self, key: str, out: SqlOut) -> str:
        """The parameter naming one key for :meth:`json_put`."""
        raise NotImplementedError

    @staticmethod
    def json_put(obj: str, key: str, value: str) -> str:
        """The object ``obj`` with ``key`` (from :meth:`json_key`) set to the JSON
        ``value``."""
        raise NotImplementedError


    # -- comparisons and the clock -----------------------------------------------------

    def same(self, left: str, right: str) -> str:
        raise NotImplementedError

    def now(self, out: SqlOut) -> str:
        if self.injected_clock:
            return self.value(Slot("now"), out)
        return self.db_now()

    def db_now(self) -> str:
        raise NotImplementedError

    def older(self, column_sql: str, ttl: Value, out: SqlOut, inclusive: bool) -> str:
        raise NotImplementedError

    def db_time(self, at: datetime) -> Any:
        """A Python time as this database stores it (for an injected clock)."""
        raise NotImplementedError

    def parse_time(self, raw: Any) -> datetime | None:
        raise NotImplementedError

    # -- introspection (check_schema) --------------------------------------------------

    def columns_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        """(name, declared type, required) of a table's columns; required: NOT NULL with
        nothing the database fills in itself (no default, identity, rowid or generated
        value), so an INSERT that leaves it out fails."""
        raise NotImplementedError

    def indexes_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        raise NotImplementedError

    def type_fits(self, wanted: str, actual: str) -> bool:
        """Does a column of ``actual`` type hold what the engine writes as ``wanted``?"""
        return True

    def identity_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        """One row of texts that tells this database, and the table ``parts`` in it, apart
        from every other (the relay's namespace): a None among them while it cannot be told
        yet; an empty first one for a database in memory, which nothing outlives."""
        raise NotImplementedError


class _JsonTree:
    """Entry writes into one JSON column, merged by key (the text of each object level is
    built once). Writes whose paths overlap (``a`` and ``a.b``) are a definition error:
    their order would decide the document, and no binding needs it."""

    __slots__ = ("keys",)

    def __init__(self) -> None:
        self.keys: dict[str, _JsonTree | Value] = {}

    def put(self, path: tuple[str, ...], value: Value, whole: tuple[str, ...]) -> None:
        head, *rest = path
        sub = self.keys.get(head)
        if not rest:
            if isinstance(sub, _JsonTree):
                raise DefinitionError(f"JSON writes overlap at {'.'.join(whole)}")
            self.keys[head] = value  # the same path twice: the later value
            return
        if sub is None:
            sub = self.keys[head] = _JsonTree()
        elif not isinstance(sub, _JsonTree):
            raise DefinitionError(f"JSON writes overlap at {'.'.join(whole)}")
        sub.put(tuple(rest), value, whole)
