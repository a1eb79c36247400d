"""The dataset_lifecycle tests' fixtures (helpers in tests/support/dataset.py).

  ds_pg_database  module  str: one PostgreSQL database per test module; each test makes a
                          schema of its own in it (support.dataset.new_pg_schema)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def ds_pg_database(pg_admin_dsn: str, pg_template: str) -> Iterator[str]:
    """One PostgreSQL database per dataset_lifecycle test module (a schema per test)."""
    from support.dataset import session_database

    with session_database(pg_admin_dsn, pg_template) as dsn:
        yield dsn
