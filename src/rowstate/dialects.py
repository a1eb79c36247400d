"""What differs between SQLite and PostgreSQL, and nothing else.

A dialect renders references, parameters, the clock and JSON access, adapts values on their
way in and times on their way out. All decisions live in the compiler and the core; a dialect
only knows how each database spells them.

Time: by default "now" is the database's clock, so workers with skewed clocks agree on what
is stale (SQLite has no server, so there it is the writing host's clock). With an injected
clock, "now" is a bound parameter instead. SQLite stores times as one canonical UTC text
format, ``YYYY-MM-DDTHH:MM:SS.sssZ``, so that comparing the text compares the instants.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, ClassVar
from uuid import UUID

from .conditions import Const, Ref, Slot, SqlOut, Value
from .errors import DefinitionError, ValidationError

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
        """(name, declared type) of a table's columns."""
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


class SQLite(Dialect):
    name = "sqlite"
    placeholder = "?"
    time_type = "TEXT"
    json_type = "TEXT"
    serial_pk = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def table(self, qualified: tuple[str, ...]) -> str:
        # SQLite has no schemas here: the last part names the table
        return self.quote(qualified[-1])

    def json_value(self, col: str, path: tuple[str, ...], out: SqlOut) -> str:
        return f"json_extract({col}, {self.value(Const(_sqlite_path(path)), out)})"

    def in_list(self, column: str, param: str) -> str:
        # no array type: the list is bound as JSON text
        return f"{column} IN (SELECT value FROM json_each({param}))"

    def list_param(self, values: list[Any]) -> Any:
        return json.dumps(values)

    def json_in(self, ref: Ref, values: tuple[Value, ...], alias: str | None,
                out: SqlOut) -> str:
        """``json_extract`` reads JSON true/false as 1/0 and an object as its text, so the
        value alone would take ``0`` for ``false`` and ``{}`` for the string ``"{}"``: the
        JSON types must agree too (integer and real are one type: ``1`` is ``1.0``). The
        guard value is bound as JSON text (:meth:`Dialect.adapt`)."""
        col = self.column(ref.column, alias)
        parts = []
        for v in values:
            got = self.json_value(col, ref.path, out)
            want = f"json_extract({self.value(v, out)}, '$')"
            kind = f"json_type({col}, {self.value(Const(_sqlite_path(ref.path)), out)})"
            want_kind = f"json_type({self.value(v, out)})"
            parts.append(f"({got} = {want} AND replace({kind}, 'real', 'integer') = "
                         f"replace({want_kind}, 'real', 'integer'))")
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"

    def json_text_param(self, value: Value, out: SqlOut) -> str:
        return f"json({self.value(value, out)})"

    def json_object_at(self, current: str, prefix: tuple[str, ...], out: SqlOut) -> str:
        if not prefix:  # the column itself: no path to extract
            return f"CASE WHEN json_type({current}) = 'object' THEN {current} ELSE '{{}}' END"
        where = self.value(Const(_sqlite_path(prefix)), out)
        again = self.value(Const(_sqlite_path(prefix)), out)
        return (f"CASE WHEN json_type({current}, {where}) = 'object' "
                f"THEN json_extract({current}, {again}) ELSE '{{}}' END")

    def json_key(self, key: str, out: SqlOut) -> str:
        return self.value(Const(_sqlite_path((key,))), out)

    @staticmethod
    def json_put(obj: str, key: str, value: str) -> str:
        return f"json_set({obj}, {key}, {value})"

    def payload_value(self, value: object) -> object:
        """sqlite3 binds str, int, float, bytes and None only: the other kinds the value
        rules accept (docs/values.md) are stored as their text (a time, a UUID, a Decimal
        exactly), a duration as its seconds."""
        if isinstance(value, dict | list):
            return json.dumps(value)
        if isinstance(value, datetime):
            return canonical_time(value)
        if isinstance(value, date | time):
            return value.isoformat()
        if isinstance(value, Decimal | UUID):
            return str(value)
        if isinstance(value, timedelta):
            return value.total_seconds()
        return value

    def same(self, left: str, right: str) -> str:
        return f"{left} IS {right}"

    now_is_param = True

    def db_now(self) -> str:
        return f"strftime('{SQLITE_NOW_FORMAT}', 'now')"

    def now(self, out: SqlOut) -> str:
        return self.value(Slot("now"), out)

    def older(self, column_sql: str, ttl: Value, out: SqlOut, inclusive: bool) -> str:
        base = self.value(Slot("now"), out)
        secs = self.value(ttl, out)
        op = "<=" if inclusive else "<"
        return (
            f"{column_sql} {op} strftime('{SQLITE_NOW_FORMAT}', {base}, "
            f"'-' || {secs} || ' seconds')"
        )

    def db_time(self, at: datetime) -> Any:
        return canonical_time(at)

    def parse_time(self, raw: Any) -> datetime | None:
        if raw is None:
            return None
        if isinstance(raw, datetime):
            return raw
        parsed = datetime.fromisoformat(str(raw))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


    def columns_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        return "SELECT name, type FROM pragma_table_info(?)", [parts[-1]]

    def indexes_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        return "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", [
            parts[-1]]

    def identity_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        # the database's file ("" in memory) and the table's first event
        return ("SELECT (SELECT file FROM pragma_database_list WHERE name = 'main'), "
                f"(SELECT created_at FROM {self.table(parts)} ORDER BY id LIMIT 1)", [])

    # SQLite types are affinities: any declared type holds the engine's values


_PG_FAMILIES = {
    "TIMESTAMPTZ": ("timestamp with time zone",),
    "JSONB": ("jsonb", "json"),
    "BIGINT": ("bigint", "integer", "smallint"),
    "INTEGER": ("bigint", "integer", "smallint"),
}


class Postgres(Dialect):
    name = "postgresql"
    placeholder = "%s"
    for_update = " FOR UPDATE"
    for_share = " FOR SHARE"
    time_type = "TIMESTAMPTZ"
    json_type = "JSONB"
    serial_pk = "BIGSERIAL PRIMARY KEY"
    writable_ctes = True
    has_schemas = True
    add_column_if_not_exists = True

    def json_value(self, col: str, path: tuple[str, ...], out: SqlOut) -> str:
        return f"({col} #> {self.path(path, out)})"

    def in_list(self, column: str, param: str) -> str:
        return f"{column} = ANY({param})"  # psycopg binds a list as an array

    def list_param(self, values: list[Any]) -> Any:
        return values

    def is_null(self, ref: Ref, alias: str | None, out: SqlOut) -> str:
        if ref.path and ref.derived is None:
            # ->> folds a JSON null and a missing key into SQL NULL, as the guards mean it
            col = self.column(ref.column, alias)
            return f"({col} #>> {self.path(ref.path, out)}) IS NULL"
        return super().is_null(ref, alias, out)

    def json_text_param(self, value: Value, out: SqlOut) -> str:
        return f"{self.value(value, out)}::jsonb"

    def json_object_at(self, current: str, prefix: tuple[str, ...], out: SqlOut) -> str:
        if not prefix:
            return (f"CASE WHEN jsonb_typeof({current}) = 'object' THEN {current} "
                    "ELSE '{}'::jsonb END")
        where = self.path(prefix, out)
        again = self.path(prefix, out)
        return (f"CASE WHEN jsonb_typeof({current} #> {where}) = 'object' "
                f"THEN {current} #> {again} ELSE '{{}}'::jsonb END")

    def json_key(self, key: str, out: SqlOut) -> str:
        return self.path((key,), out)

    def path(self, path: tuple[str, ...], out: SqlOut) -> str:
        """A JSON path as a text[] parameter sent as its array literal: a str is dumped
        in C, a Python list goes through psycopg's array dumper (its element type found
        per call: microseconds a statement)."""
        return self.value(Const(text_array(path)), out) + "::text[]"

    @staticmethod
    def json_put(obj: str, key: str, value: str) -> str:
        return f"jsonb_set({obj}, {key}, {value}, true)"

    def value(self, value: Value, out: SqlOut) -> str:
        out.params.append(value)
        if isinstance(value, Slot) and value.json:
            return "%s::jsonb"
        return "%s"

    def json_param(self, value: Value, out: SqlOut) -> str:
        return self.value(value, out) + "::jsonb"

    def payload_value(self, value: object) -> object:
        if isinstance(value, dict | list):
            return _jsonb()(value)
        return value

    def load_json(self, raw: Any) -> Any:
        # psycopg has decoded the jsonb already: a str here is a JSON string, not JSON text
        return raw

    def same(self, left: str, right: str) -> str:
        return f"{left} IS NOT DISTINCT FROM {right}"

    def db_now(self) -> str:
        return "now()"

    def now(self, out: SqlOut) -> str:
        if self.injected_clock:
            return self.value(Slot("now"), out) + "::timestamptz"
        return self.db_now()

    def older(self, column_sql: str, ttl: Value, out: SqlOut, inclusive: bool) -> str:
        base = self.now(out)
        op = "<=" if inclusive else "<"
        return f"{column_sql} {op} {base} - make_interval(secs => {self.value(ttl, out)})"

    def db_time(self, at: datetime) -> Any:
        if at.tzinfo is None:
            raise ValidationError("times must be timezone-aware")
        return at

    def parse_time(self, raw: Any) -> datetime | None:
        if raw is None or isinstance(raw, datetime):
            return raw
        parsed = datetime.fromisoformat(str(raw))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

    def columns_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        schema = parts[0] if len(parts) == 2 else None
        return ("SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = COALESCE(%s::text, current_schema()) "
                "AND table_name = %s", [schema, parts[-1]])

    def indexes_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        schema = parts[0] if len(parts) == 2 else None
        return ("SELECT indexname FROM pg_indexes WHERE schemaname = "
                "COALESCE(%s::text, current_schema()) AND tablename = %s", [schema, parts[-1]])

    def identity_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        # the cluster, the database in it and the table's oid (None while it does not exist)
        return ("SELECT (SELECT system_identifier FROM pg_control_system())::text, "
                "(SELECT oid FROM pg_database WHERE datname = current_database())::text, "
                f"to_regclass({self.placeholder})::oid::text", [self.table(parts)])

    def type_fits(self, wanted: str, actual: str) -> bool:
        family = _PG_FAMILIES.get(wanted.split()[0].upper())
        return family is None or actual.lower() in family


def _jsonb() -> Any:
    """psycopg's JSONB wrapper, imported on first use: the dialects (and so the core)
    import no driver, and a program that never talks to PostgreSQL never loads psycopg."""
    global _JSONB
    if _JSONB is None:
        from psycopg.types.json import Jsonb

        _JSONB = Jsonb
    return _JSONB


_JSONB: Any = None


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


def _sqlite_path(path: tuple[str, ...]) -> str:
    return "$" + "".join(f".{p}" for p in path)
