"""The schema's level (:mod:`pubsched.db.level`): read once, when a pub opens its database,
from the migrations applied; each feature's flag follows its own migration."""

from __future__ import annotations

import pytest

from pubsched.db import open_store
from pubsched.db.level import INTRODUCED, SchemaLevel, read_level
from pubsched.db.migrate import load, migrate
from pubsched.pub import Pub


def test_every_feature_names_a_migration_of_the_package() -> None:
    shipped = {m.version for m in load("sqlite")}
    assert set(INTRODUCED.values()) <= shipped


def test_each_flag_follows_its_own_migration() -> None:
    assert SchemaLevel.of(["0001", "0034"]) == SchemaLevel()
    at_0044 = SchemaLevel.of(f"{v:04d}" for v in range(1, 45))
    assert at_0044.link_versions and at_0044.skills and at_0044.notices
    assert not (at_0044.covers or at_0044.usual or at_0044.tick_status)
    assert SchemaLevel.of(INTRODUCED.values()) == SchemaLevel.full()


@pytest.mark.both_databases("the level is read with each dialect's catalogue query")
def test_a_migrated_database_has_every_feature(db_url: str) -> None:
    pub = Pub(open_store(db_url))
    try:
        assert pub.schema == SchemaLevel.full()
    finally:
        pub.close()


@pytest.mark.both_databases("the level is read with each dialect's catalogue query")
@pytest.mark.empty_db
def test_the_level_is_read_when_the_pub_opens(db_url: str) -> None:
    """Nothing applied: the legacy level (no error); at 0034, the same; a pub opened after
    the rest is applied has every feature, one opened before keeps what it read."""
    store = open_store(db_url)
    try:
        assert read_level(store) == SchemaLevel()
    finally:
        store.close()
    migrate(db_url, to="0034")
    before = Pub(open_store(db_url))
    try:
        assert before.schema == SchemaLevel()
        migrate(db_url)
        assert before.schema == SchemaLevel()
        after = Pub(open_store(db_url))
        try:
            assert after.schema == SchemaLevel.full()
        finally:
            after.close()
    finally:
        before.close()
