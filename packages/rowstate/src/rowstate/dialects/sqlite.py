"""SQLite's spelling: ``json_extract`` paths, the writing host's clock in the canonical
text form, no schemas."""

from __future__ import annotations

import json
import sys
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from ..conditions import Const, Ref, Slot, SqlOut, Value
from .base import SQLITE_NOW_FORMAT, Dialect, canonical_time


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
        if _decimal_or_uuid(value):
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
        # an INTEGER PRIMARY KEY is the rowid: SQLite fills it
        return ("SELECT name, type, \"notnull\" = 1 AND dflt_value IS NULL AND NOT "
                "(pk = 1 AND upper(type) = 'INTEGER') FROM pragma_table_info(?)", [parts[-1]])

    def indexes_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        return "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", [
            parts[-1]]

    def identity_query(self, parts: tuple[str, ...]) -> tuple[str, list[Any]]:
        # the database's file ("" in memory) and the table's first event
        return ("SELECT (SELECT file FROM pragma_database_list WHERE name = 'main'), "
                f"(SELECT created_at FROM {self.table(parts)} ORDER BY id LIMIT 1)", [])

    # SQLite types are affinities: any declared type holds the engine's values


def _sqlite_path(path: tuple[str, ...]) -> str:
    return "$" + "".join(f".{p}" for p in path)


def _decimal_or_uuid(value: object) -> bool:
    """A Decimal or a UUID, asked of the modules only when they are loaded: no such value
    can exist in a process that never imported them, and importing them (uuid brings
    platform) would cost every ``import rowstate`` more than the check saves."""
    decimal, uuid = sys.modules.get("decimal"), sys.modules.get("uuid")
    return ((decimal is not None and isinstance(value, decimal.Decimal))
            or (uuid is not None and isinstance(value, uuid.UUID)))
