"""Schema ownership: the engine's needs as migration statements for a table the application
owns, and ``check_schema`` naming everything a migrated table lacks, on both databases."""

from __future__ import annotations

import pytest

from rowstate import SchemaMismatch
from support.engine import JOBS, RUNS, Backend, on


@on("sync")
def test_a_quick_start_schema_passes_the_check(backend: Backend) -> None:
    for binding in (RUNS, JOBS):
        backend.make(binding).check_schema()
        binding.check_schema(backend.store)


@on("sync")
def test_migration_sql_completes_an_app_owned_table(backend: Backend) -> None:
    backend.execute("CREATE TABLE pub_schedule_runs (week_of TEXT PRIMARY KEY, "
                    "status TEXT NOT NULL DEFAULT 'pending')")
    with pytest.raises(SchemaMismatch) as caught:
        RUNS.check_schema(backend.store)
    problems = caught.value.problems
    assert any("v2_state: missing" in p for p in problems)
    assert any("rowstate_events does not exist" in p for p in problems)
    for statement in RUNS.migration_sql(backend.store.dialect, existing=("status",)):
        backend.execute(statement)
    RUNS.check_schema(backend.store)
    runs = backend.make(RUNS)
    assert runs.create("2026-01-05").applied


@on("sync")
def test_check_schema_names_every_missing_piece(backend: Backend) -> None:
    runs = backend.make(RUNS)
    backend.execute('DROP INDEX "rs_pub_schedule_runs_one_collecting"')
    backend.execute('DROP INDEX "idx_pub_schedule_runs_lease"')
    with pytest.raises(SchemaMismatch) as caught:
        runs.check_schema()
    text = str(caught.value)
    assert "rs_pub_schedule_runs_one_collecting" in text and "UNIQUE invariant" in text
    assert "idx_pub_schedule_runs_lease" in text


@on("postgres-sync")
def test_check_schema_reports_a_wrong_type_on_postgres(backend: Backend) -> None:
    backend.execute("CREATE TABLE pub_schedule_runs (week_of TEXT PRIMARY KEY)")
    for statement in RUNS.migration_sql("postgresql"):
        if '"acting_at"' in statement and "ADD COLUMN" in statement:
            statement = statement.replace("TIMESTAMPTZ", "TEXT")
        backend.execute(statement)
    with pytest.raises(SchemaMismatch, match="acting_at: is text, wanted TIMESTAMPTZ"):
        RUNS.check_schema(backend.store)
