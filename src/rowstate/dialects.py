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
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, ClassVar
from uuid import UUID

from psycopg.types.json import Jsonb

from .conditions import Const, Ref, Slot, SqlOut, Value
from .errors import DefinitionError, ValidationError

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SQLITE_NOW_FORMAT = "%Y-%m-%dT%H:%M:%fZ"


def check_ident(name: str, what: str) -> str:
    """Identifiers are checked when a binding is built; only these ever reach SQL text."""
    if not isinstance(name, str) or not IDENT.match(name) or len(name) > 63:
        raise DefinitionError(f"{what} {name!r} is not a plain identifier")
    return name


def canonical_time(at: datetime) -> str:
    """The one text form SQLite stores: UTC, millisecond precision, ``Z`` suffix."""
    if at.tzinfo is None:
        raise ValidationError("times must be timezone-aware")
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


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
    time_type: ClassVar[str]
    json_type: ClassVar[str]
    serial_pk: ClassVar[str]

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
        """The parameter sent for one slot or constant."""
        if isinstance(value, Const):
            return value.value
        return values[value.name]

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

    def json_value(self, col: str, path: tuple[str, ...], out: SqlOut) -> str:
        raise NotImplementedError

    def json_set(self, current: str, path: tuple[str, ...], value: Value, out: SqlOut) -> str:
        """``current`` with ``path`` set to ``value``, a :class:`Const` holding JSON text."""
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

    def json_set(self, current: str, path: tuple[str, ...], value: Value, out: SqlOut) -> str:
        where = self.value(Const(_sqlite_path(path)), out)
        return f"json_set(COALESCE({current}, '{{}}'), {where}, json({self.value(value, out)}))"

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


class Postgres(Dialect):
    name = "postgresql"
    placeholder = "%s"
    for_update = " FOR UPDATE"
    time_type = "TIMESTAMPTZ"
    json_type = "JSONB"
    serial_pk = "BIGSERIAL PRIMARY KEY"

    def json_value(self, col: str, path: tuple[str, ...], out: SqlOut) -> str:
        return f"({col} #> {self.value(Const(list(path)), out)})"

    def is_null(self, ref: Ref, alias: str | None, out: SqlOut) -> str:
        if ref.path and ref.derived is None:
            # ->> folds a JSON null and a missing key into SQL NULL, as the guards mean it
            col = self.column(ref.column, alias)
            return f"({col} #>> {self.value(Const(list(ref.path)), out)}) IS NULL"
        return super().is_null(ref, alias, out)

    def json_set(self, current: str, path: tuple[str, ...], value: Value, out: SqlOut) -> str:
        where = self.value(Const(list(path)), out)
        return (
            f"jsonb_set(COALESCE({current}, '{{}}'::jsonb), {where}, "
            f"{self.value(value, out)}::jsonb, true)"
        )

    def value(self, value: Value, out: SqlOut) -> str:
        out.params.append(value)
        if isinstance(value, Slot) and value.json:
            return "%s::jsonb"
        return "%s"

    def adapt(self, value: Value, values: dict[str, Any]) -> Any:
        got = super().adapt(value, values)
        if isinstance(value, Slot) and value.json:
            return json.dumps(got)
        return got

    def json_param(self, value: Value, out: SqlOut) -> str:
        return self.value(value, out) + "::jsonb"

    def payload_value(self, value: object) -> object:
        if isinstance(value, dict | list):
            return Jsonb(value)
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


def _sqlite_path(path: tuple[str, ...]) -> str:
    return "$" + "".join(f".{p}" for p in path)
