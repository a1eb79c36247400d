"""Two ``week create`` of one week at once (two operators, two connections): one creates
it, the other is told it exists (WEEK_EXISTS), on either engine and both databases; never
both "created". Threads released together by a barrier, many trials."""

from __future__ import annotations

import threading
from datetime import date, timedelta
from typing import Any

import pytest

from pubsched.engines import legacy as LEGACY
from pubsched.engines import v2 as V2
from pubsched.engines.base import Engine
from pubsched.pub import Pub
from support.pub_engines import WEEK
from support.pubs import make_pub

pytestmark = [pytest.mark.pub_setup("engines"),
              pytest.mark.both_databases("races: two connections create one week")]
TRIALS = 8


@pytest.mark.parametrize("engine", [V2, LEGACY], ids=["v2", "legacy"])
def test_two_creates_at_once_create_the_week_once(pub: Pub, db_url: str,
                                                  engine: Engine) -> None:
    first = date.fromisoformat(WEEK)
    for trial in range(TRIALS):
        week = (first + timedelta(weeks=trial)).isoformat()
        got = _race(db_url, engine, week)
        assert sorted((v.applied, v.reason) for v in got) == [
            (False, "WEEK_EXISTS"), (True, None)], (trial, got)
        rows = pub.query("SELECT COUNT(*) AS n FROM pub_shifts WHERE week_of = %s", [week])
        assert rows[0]["n"] == 3  # the template's shifts, once


def _race(db_url: str, engine: Engine, week: str) -> list[Any]:
    """Both creates released at once, each on its own connection."""
    pubs = [make_pub(db_url), make_pub(db_url)]
    barrier = threading.Barrier(2)
    got: list[Any] = [None, None]

    def create(i: int) -> None:
        barrier.wait()
        got[i] = engine.create(pubs[i], week)

    workers = [threading.Thread(target=create, args=(i,)) for i in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    for made in pubs:
        made.close()
    return got
