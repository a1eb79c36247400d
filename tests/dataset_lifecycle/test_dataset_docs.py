"""The dataset_lifecycle manual (docs/dataset_lifecycle.md) is runnable: its ```python blocks
run, in order, in one namespace, against a fresh PostgreSQL database reached the turnkey way
(the environment); its SQL is the seed's migration, character for character."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dataset_lifecycle import (
    ENV_DSN,
    MIGRATION_SQL,
    AsyncDatasetLifecycle,
    DatasetLifecycle,
    schema_sql,
)
from dataset_lifecycle.testing import MockDatasetLifecycle

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "dataset_lifecycle.md"
SEED = Path("/work/shared/seeds/dataset-lifecycle.md")


def section() -> str:
    """The whole manual: every block of it is an example to run."""
    return DOC.read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", section(), re.S | re.M)


def test_the_docs_python_examples_run(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(schema_sql("postgresql", extra_columns={"metadataId": "VARCHAR(255)",
                                                             "rowCount": "INTEGER"}))
        conn.execute('INSERT INTO data_sources_datasets.qv_dataset ("userId", "datasetId") '
                     "VALUES ('user-1', 'dataset-1')")
    monkeypatch.setenv(ENV_DSN, pg_dsn)
    code = blocks("python")
    assert len(code) >= 10
    namespace: dict[str, Any] = {"__name__": "dataset_lifecycle_docs"}
    try:
        for i, block in enumerate(code):
            exec(compile(block, f"{DOC.name}[python block {i + 1}]", "exec"), namespace)
        with psycopg.connect(pg_dsn) as conn:
            row = conn.execute('SELECT "dataloadingStatus", "jobId", "rowCount" FROM '
                               "data_sources_datasets.qv_dataset WHERE \"datasetId\" = "
                               "'dataset-1'").fetchone()
        assert row == ("LOADING", "job-4", 42)
    finally:
        DatasetLifecycle.reset()
        assert not AsyncDatasetLifecycle.initialized
        for value in namespace.values():
            if isinstance(value, MockDatasetLifecycle):
                value.close()
        pool = namespace.get("pool")
        if pool is not None:
            pool.close()


def test_the_docs_and_the_library_give_the_seeds_migration_verbatim() -> None:
    [sql] = blocks("sql")
    assert sql == MIGRATION_SQL
    assert MIGRATION_SQL in schema_sql("postgresql")
    if SEED.exists():  # the seed flattens whitespace; compare token by token
        assert " ".join(MIGRATION_SQL.split()) in " ".join(SEED.read_text().split())
