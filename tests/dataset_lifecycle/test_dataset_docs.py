"""The dataset_lifecycle manual (docs/dataset_lifecycle.md) runs as written: every block of
it, top to bottom, in one namespace, on the table its own setup block makes with
``schema_sql``, against the database ``$MULTIPLATFORM_PG_CONNECTION_STRING`` names (the
turnkey path), once on SQLite and once on a fresh PostgreSQL database. A block tagged
``postgresql`` (```` ```python postgresql ````) runs on PostgreSQL only; nothing is set up
here but the environment variable. Its SQL is the seed's migration, character for
character, and its state machine diagram is the machine's table."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from dataset_lifecycle import (
    ENV_DSN,
    MIGRATION_SQL,
    TRANSITION_TABLE,
    AsyncDatasetLifecycle,
    DatasetLifecycle,
    schema_sql,
)
from dataset_lifecycle.testing import MockDatasetLifecycle
from support.doc_blocks import Block, fenced_blocks

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "dataset_lifecycle.md"
SEED = Path("/work/shared/seeds/dataset-lifecycle.md")
PG_ONLY = "postgresql"


def blocks(lang: str | None = None) -> list[Block]:
    return [b for b in fenced_blocks(DOC) if lang is None or b.lang == lang]


def as_url(dsn: str) -> str:
    """A libpq conninfo as a ``postgresql://`` URL (the page's setup opens the database with
    ``rowstate.connect``, which takes URLs)."""
    if dsn.startswith(("postgresql://", "postgres://")):
        return dsn
    parts = conninfo_to_dict(dsn)
    auth = quote(str(parts.get("user", "")))
    if parts.get("password"):
        auth += ":" + quote(str(parts["password"]))
    host = f"{parts.get('host', '127.0.0.1')}:{parts.get('port', 5432)}"
    return f"postgresql://{auth}{'@' if auth else ''}{host}/{parts.get('dbname', '')}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(dialect, URL) of an empty database for the page."""
    if request.param == "sqlite":
        yield "sqlite", f"sqlite:///{tmp_path}/datasets.db"
    else:
        yield "postgresql", as_url(request.getfixturevalue("pg_dsn"))


def the_row(dialect: str, url: str) -> Any:
    query = ('SELECT "dataloadingStatus", "jobId", "rowCount" FROM {} '
             "WHERE \"userId\" = 'user-1' AND \"datasetId\" = 'dataset-1'")
    if dialect == "sqlite":
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            got = conn.execute(query.format("qv_dataset")).fetchone()
        conn.close()
        return got
    with psycopg.connect(url) as pg:
        return pg.execute(query.format("data_sources_datasets.qv_dataset")).fetchone()


def check_diagram(block: Block) -> None:
    """The ```text diagram says what TRANSITION_TABLE says, edge for edge, in order."""
    drawn = {}
    for line in block.text.strip().splitlines():
        src, _, dsts = line.partition("->")
        drawn[src.strip()] = tuple(d.strip() for d in dsts.split("|"))
    assert drawn == dict(TRANSITION_TABLE), block.where(DOC)


def test_every_block_of_the_page_runs_as_written(database: tuple[str, str], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    dialect, url = database
    monkeypatch.setenv(ENV_DSN, url)
    monkeypatch.chdir(tmp_path)  # a relative path a block might name lands here
    namespace: dict[str, Any] = {"__name__": "dataset_lifecycle_docs"}
    ran: list[Block] = []
    try:
        for block in blocks():
            if PG_ONLY in block.tags and dialect != "postgresql":
                continue
            if block.lang == "python":
                # padded so that a traceback names the page's own line
                code = compile("\n" * block.line + block.text, str(DOC), "exec")
                exec(code, namespace)
            elif block.lang == "sql":
                assert PG_ONLY in block.tags, f"{block.where(DOC)}: which database?"
                with psycopg.connect(url, autocommit=True) as pg:
                    pg.execute(block.text)
            elif block.lang == "text":
                check_diagram(block)
            else:
                pytest.fail(f"{block.where(DOC)}: a block this test cannot run or check")
            ran.append(block)
        # the page's writes are in the database the environment names
        assert the_row(dialect, url) == ("LOADING", "job-4", 42)
    finally:
        DatasetLifecycle.reset()
        assert not AsyncDatasetLifecycle.initialized
        for value in namespace.values():
            if isinstance(value, MockDatasetLifecycle):
                value.close()
        pool = namespace.get("pool")
        if pool is not None:
            pool.close()
    skipped = [b for b in blocks() if b not in ran]
    assert all(PG_ONLY in b.tags for b in skipped)
    assert bool(skipped) == (dialect == "sqlite")  # the page has PostgreSQL-only blocks
    assert len([b for b in ran if b.lang == "python"]) >= 15


def test_the_setup_block_makes_the_table_with_schema_sql() -> None:
    """Nothing but the page prepares the database: its first block makes the table with
    ``schema_sql`` and the payload columns the examples write."""
    first = blocks()[0]
    assert first.lang == "python" and not first.tags
    assert "schema_sql(" in first.text and "INSERT INTO" in first.text
    for column in ("metadataId", "rowCount"):
        assert column in first.text


def test_the_docs_and_the_library_give_the_seeds_migration_verbatim() -> None:
    [sql] = blocks("sql")
    assert sql.text == MIGRATION_SQL and PG_ONLY in sql.tags
    assert MIGRATION_SQL in schema_sql("postgresql")
    if SEED.exists():  # the seed flattens whitespace; compare token by token
        assert " ".join(MIGRATION_SQL.split()) in " ".join(SEED.read_text().split())
