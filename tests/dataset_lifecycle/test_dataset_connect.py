"""The turnkey init's database: a missing one fails at init with its cause, and a
SQLAlchemy URL (``postgresql+psycopg://``) is taken, another driver's refused by name."""

from __future__ import annotations

import time
import uuid

import pytest

from dataset_lifecycle import (
    ENV_DSN,
    AsyncDatasetLifecycleClient,
    DatasetLifecycleClient,
    ValidationError,
    create_persistence_adapter,
)
from rowstate import StoreError, connect, connect_async
from rowstate.ext import Batch
from support import databases

Client = DatasetLifecycleClient | AsyncDatasetLifecycleClient


def _client(twin: str) -> Client:
    return DatasetLifecycleClient() if twin == "sync" else AsyncDatasetLifecycleClient()


@pytest.mark.parametrize("source", ["dsn", "environment"])
@pytest.mark.parametrize("twin", ["sync", "async"])
def test_init_on_a_missing_database_fails_at_once_with_the_cause(
        pg_admin_dsn: str, twin: str, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a 30 s pool timeout saying "couldn't get a connection" on the first call."""
    missing = databases.database_dsn(pg_admin_dsn, f"rs_missing_{uuid.uuid4().hex}")
    lc = _client(twin)
    started = time.monotonic()
    with pytest.raises(StoreError, match="does not exist") as info:
        if source == "dsn":
            lc.init(dsn=missing)
        else:
            monkeypatch.setenv(ENV_DSN, missing)
            lc.init()
    assert time.monotonic() - started < 5
    assert info.value.__cause__ is not None  # the driver's error is kept
    assert not lc.initialized
    with pytest.raises(StoreError, match="does not exist"):
        create_persistence_adapter(dsn=missing, asynchronous=twin == "async")


def _sqlalchemy(dsn: str, driver: str) -> str:
    assert dsn.startswith("postgresql://"), dsn
    return dsn.replace("postgresql://", f"postgresql+{driver}://", 1)


@pytest.mark.parametrize("twin", ["sync", "async"])
async def test_a_sqlalchemy_psycopg_url_is_taken(pg_dsn: str, twin: str) -> None:
    lc = _client(twin)
    lc.init(dsn=_sqlalchemy(pg_dsn, "psycopg"))
    try:
        if isinstance(lc, AsyncDatasetLifecycleClient):
            await lc.create_schema()
            assert await lc.get_status({"userId": "u1", "datasetId": "d1"}) is None
        else:
            lc.create_schema()
            assert lc.get_status({"userId": "u1", "datasetId": "d1"}) is None
    finally:
        if isinstance(lc, AsyncDatasetLifecycleClient):
            await lc.reset()
        else:
            lc.reset()
    store = connect(_sqlalchemy(pg_dsn, "psycopg"))
    try:
        assert store.run(Batch((("SELECT 1", []),))) == [[(1,)]]
    finally:
        store.close()
    astore = connect_async(_sqlalchemy(pg_dsn, "psycopg_async"))
    try:
        assert await astore.run(Batch((("SELECT 1", []),))) == [[(1,)]]
    finally:
        await astore.close()


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg2", "pg8000"])
def test_another_drivers_url_is_refused_by_its_suffix(driver: str) -> None:
    url = f"postgresql+{driver}://u:secret@127.0.0.1:1/x"
    for call in (lambda: DatasetLifecycleClient().init(dsn=url),
                 lambda: AsyncDatasetLifecycleClient().init(dsn=url),
                 lambda: connect(url), lambda: connect_async(url)):
        with pytest.raises(ValidationError, match=rf"'\+{driver}'") as info:
            call()
        assert "secret" not in str(info.value)
