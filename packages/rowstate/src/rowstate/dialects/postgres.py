"""PostgreSQL's spelling: jsonb paths, ``now()`` on the server, schemas, type families.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..conditions import Const, Ref, Slot, SqlOut, Value
from ..errors import ValidationError
from .base import Dialect, text_array

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
    decodes_values = True

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
        return ("SELECT column_name, data_type, is_nullable = 'NO' AND column_default IS NULL "
                "AND is_identity = 'NO' AND is_generated = 'NEVER' "
                "FROM information_schema.columns "
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
