"""DDL: the base ``qv_dataset`` table as the existing service has it, and the seed's
migration, verbatim.

The lifecycle owns no other table: no version column, no events table, no lease. Only the
three nullable ``finalizing*`` columns and their partial index are added, exactly as the
seed's README gives them (:data:`MIGRATION_SQL`), so a service that already ran that
migration is already set up.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rowstate import DefinitionError, ValidationError
from rowstate.ext import check_ident

from ._rules import DEFAULT_SCHEMA, DEFAULT_TABLE

#: The seed's migration for the default table, character for character.
MIGRATION_SQL = """\
ALTER TABLE data_sources_datasets.qv_dataset
    ADD COLUMN IF NOT EXISTS "finalizingJobId"     VARCHAR(255) DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS "finalizingScope"     VARCHAR(32)  DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS "finalizingClaimTime" TIMESTAMPTZ  DEFAULT NULL;

CREATE INDEX IF NOT EXISTS idx_qv_dataset_finalizing_claim
    ON data_sources_datasets.qv_dataset
       ("finalizingJobId", "finalizingScope", "finalizingClaimTime")
    WHERE "finalizingJobId" IS NOT NULL;
"""

_BARE = re.compile(r"^[a-z_][a-z0-9_]*$")
_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_ (),]*$")


def _name(name: str, what: str) -> str:
    try:
        check_ident(name, what)
    except DefinitionError as exc:
        raise ValidationError(str(exc)) from None
    return name if _BARE.match(name) else f'"{name}"'


def migration_sql(*, schema: str = DEFAULT_SCHEMA, table_name: str = DEFAULT_TABLE) -> str:
    """The seed's migration (PostgreSQL) for a table of another name."""
    table = f"{_name(schema, 'schema')}.{_name(table_name, 'table')}"
    index = _name(f"idx_{table_name}_finalizing_claim"[:63], "index")
    return (MIGRATION_SQL
            .replace("data_sources_datasets.qv_dataset", table)
            .replace("idx_qv_dataset_finalizing_claim", index))


def schema_sql(dialect: str = "postgresql", *, schema: str = DEFAULT_SCHEMA,
               table_name: str = DEFAULT_TABLE,
               extra_columns: Mapping[str, str] | None = None) -> str:
    """The base table (for tests and new installs) followed by the seed's migration.

    ``dialect`` is ``"postgresql"`` or ``"sqlite"`` (where there are no schemas, times are
    canonical UTC text and JSON is text). ``extra_columns`` (name -> SQL type) adds the
    columns a transition payload writes, e.g. ``{"rowCount": "INTEGER"}``.
    """
    extra = dict(extra_columns or {})
    for column, type_ in extra.items():
        _name(column, "column")
        if not isinstance(type_, str) or not _TYPE.match(type_):
            raise ValidationError(f"column {column!r}: {type_!r} is not a plain SQL type")
    if dialect in ("postgresql", "postgres", "pg"):
        s, t = _name(schema, "schema"), _name(table_name, "table")
        extras = "".join(f',\n    "{c}" {ty}' for c, ty in extra.items())
        base = (
            f"CREATE SCHEMA IF NOT EXISTS {s};\n\n"
            f"CREATE TABLE IF NOT EXISTS {s}.{t} (\n"
            '    "userId"            VARCHAR(255) NOT NULL,\n'
            '    "datasetId"         VARCHAR(255) NOT NULL,\n'
            """    "dataloadingStatus" VARCHAR(32)  NOT NULL DEFAULT 'NOT_AVAILABLE',\n"""
            '    "jobId"             VARCHAR(255) DEFAULT NULL,\n'
            '    "__DR"              JSONB        DEFAULT NULL,\n'
            '    "queuedLoadToken"   VARCHAR(255) DEFAULT NULL'
            f"{extras},\n"
            '    PRIMARY KEY ("userId", "datasetId")\n'
            ");\n\n"
        )
        return base + migration_sql(schema=schema, table_name=table_name)
    if dialect in ("sqlite", "sqlite3"):
        t = f'"{table_name}"'
        _name(table_name, "table")
        extras = "".join(f',\n    "{c}" {ty}' for c, ty in extra.items())
        index = f'"idx_{table_name}_finalizing_claim"'
        return (
            f"CREATE TABLE IF NOT EXISTS {t} (\n"
            '    "userId"              TEXT NOT NULL,\n'
            '    "datasetId"           TEXT NOT NULL,\n'
            """    "dataloadingStatus"   TEXT NOT NULL DEFAULT 'NOT_AVAILABLE',\n"""
            '    "jobId"               TEXT DEFAULT NULL,\n'
            '    "__DR"                TEXT DEFAULT NULL,\n'
            '    "queuedLoadToken"     TEXT DEFAULT NULL,\n'
            '    "finalizingJobId"     TEXT DEFAULT NULL,\n'
            '    "finalizingScope"     TEXT DEFAULT NULL,\n'
            '    "finalizingClaimTime" TEXT DEFAULT NULL'
            f"{extras},\n"
            '    PRIMARY KEY ("userId", "datasetId")\n'
            ");\n\n"
            f"CREATE INDEX IF NOT EXISTS {index}\n"
            f"    ON {t}\n"
            '       ("finalizingJobId", "finalizingScope", "finalizingClaimTime")\n'
            '    WHERE "finalizingJobId" IS NOT NULL;\n'
        )
    raise ValidationError(f"unknown dialect {dialect!r}: use 'postgresql' or 'sqlite'")
