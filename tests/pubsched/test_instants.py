"""The one reader of a stored instant (:mod:`pubsched.db.instants`): both databases' forms
of one instant read back as the same aware UTC datetime, and the app's own SQL on each
database hands back something it reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from pubsched.db import open_store
from pubsched.db.instants import instant, maybe_instant
from pubsched.pub import Pub

AT = datetime(2026, 12, 14, 15, 0, 0, 250_000, tzinfo=UTC)


@pytest.mark.parametrize("raw", [
    AT,                                               # PostgreSQL: a datetime
    AT.astimezone(timezone(timedelta(hours=-5))),     # ...in the session's zone
    "2026-12-14T15:00:00.250Z",                       # SQLite: its canonical text
    "2026-12-14T15:00:00.250+00:00",
    "2026-12-14T10:00:00.250-05:00",
    "2026-12-14 15:00:00.250",                        # no zone: stored as UTC
    AT.replace(tzinfo=None),
])
def test_every_form_of_one_instant_reads_as_the_same_aware_utc_datetime(raw: object) -> None:
    got = instant(raw)
    assert got == AT and got.tzinfo is UTC


@pytest.mark.parametrize("raw", ["", "not a time", 17, b"2026-12-14"])
def test_what_is_no_instant_is_value_error(raw: object) -> None:
    with pytest.raises(ValueError):
        instant(raw)


def test_null_stays_none() -> None:
    assert maybe_instant(None) is None
    assert maybe_instant("2026-12-14T15:00:00.250Z") == AT


@pytest.mark.both_databases("each database hands an instant back in its own type")
def test_the_apps_own_sql_reads_back_through_it(db_url: str) -> None:
    pub = Pub(open_store(db_url))
    try:
        with pub.atomic() as tx:
            tx.execute("INSERT INTO pub_schedule_runs (week_of, opened_at) VALUES (%s, %s)",
                       ["2026-12-14", AT])
        [row] = pub.query("SELECT opened_at FROM pub_schedule_runs WHERE week_of = %s",
                          ["2026-12-14"])
        assert instant(row["opened_at"]) == AT
    finally:
        pub.close()
