"""The core knows no driver: importing it (or the package) in a fresh interpreter loads
neither psycopg nor psycopg_pool; only a store does."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import sys
import {module}
loaded = sorted(m for m in ("psycopg", "psycopg_pool") if m in sys.modules)
print(",".join(loaded))
"""


@pytest.mark.parametrize("module", [
    "rowstate", "rowstate.machine", "rowstate.conditions", "rowstate.compiler",
    "rowstate.core", "rowstate.lifecycle", "rowstate.units", "rowstate.schemacheck",
])
def test_the_core_imports_no_driver(module: str) -> None:
    out = subprocess.run([sys.executable, "-c", CHECK.format(module=module)],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} loaded {out.stdout.strip()}"


def test_a_postgres_store_loads_the_driver() -> None:
    code = CHECK.format(module="rowstate") + "rowstate.stores.PostgresStore\n" + \
        "print('psycopg' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["True"]


def test_every_exported_name_resolves() -> None:
    import rowstate

    missing = [name for name in rowstate.__all__ if not hasattr(rowstate, name)]
    assert missing == []


SQLITE_ONLY = """
import asyncio
import sys
import rowstate
import rowstate.ext
store = rowstate.connect("sqlite://")
assert isinstance(store, rowstate.stores.SQLiteStore), store
assert store.run(rowstate.ext.Batch((("SELECT 1", []),))) == [[(1,)]]
store.close()
astore = rowstate.connect_async("sqlite://")
assert isinstance(astore, rowstate.stores.AsyncSQLiteStore), astore
asyncio.run(astore.close())
loaded = sorted(m for m in ("psycopg", "psycopg_pool") if m in sys.modules)
print(",".join(loaded))
"""


def test_a_sqlite_only_program_loads_no_postgres_driver() -> None:
    """The stores are split by database: the SQLite ones (and ``connect("sqlite:...")``)
    resolve without importing the PostgreSQL store, nor psycopg."""
    out = subprocess.run([sys.executable, "-c", SQLITE_ONLY], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "", f"a SQLite-only program loaded {out.stdout.strip()}"
