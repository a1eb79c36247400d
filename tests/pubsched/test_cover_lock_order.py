"""A cover's take racing the tick's expiry of the same request, on PostgreSQL, in threads
(issue 29, item 17), every other round a cancel of it too: the three lock the same rows
in one order (the week, then the request: ``pubsched.covers.requests.LOCK_ORDER``), so
no round deadlocks (before, 2 to 7 rounds in 48 did); each round ends with the request
in one end state, and the roster moved only when it was taken."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from pubsched import covers
from pubsched.pub import Pub
from support.pub_covers import THU, email, roster, sent_week
from support.pubs import NOW, WEEK, make_pub

ROUNDS = 48
PUBS: dict[str, Pub] = {}  # one app instance per racer, each its own connection


def _together(calls: list[Any]) -> list[Any]:
    """Each call in a thread of its own, released at once; what each returned or raised."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = calls[i]()
        except BaseException as exc:  # the deadlock, if any: counted by the test
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _racers(cover_id: int, taker: str, start: datetime, *, cancel: bool
            ) -> list[Callable[[], Any]]:
    """The take 20 s before the shift, the tick's expiry at its start, and (``cancel``)
    the asker calling it off 10 s before: each with its own pub (its own connection)."""
    def take() -> Any:
        return covers.take(PUBS["taker"], cover_id, taker, now=start - timedelta(seconds=20))

    def expire() -> Any:
        return covers.expire_due(PUBS["ticker"], start)

    def call_off() -> Any:
        return covers.cancel(PUBS["canceller"], cover_id, now=start - timedelta(seconds=10))

    return [take, expire, *([call_off] if cancel else [])]


@pytest.mark.postgres
def test_a_take_racing_the_expiry_of_its_request_never_deadlocks(pg_db_url: str) -> None:
    from pubsched.engines.flags import set_v2

    PUBS.update({who: make_pub(pg_db_url) for who in ("taker", "ticker", "canceller")})
    taker_pub = PUBS["taker"]
    try:
        set_v2(taker_pub, True, now=NOW)
        ids = sent_week(taker_pub)
        on, off = "ann", "fay"  # Ann works Thursday, Fay nothing
        failures: list[BaseException] = []
        outcomes = {covers.TAKEN: 0, covers.EXPIRED: 0, covers.CANCELLED: 0}
        for round_ in range(ROUNDS):
            asked = covers.ask(taker_pub, WEEK, ids[THU], email(on), now=NOW)
            assert asked, asked.message
            cover_id = asked.detail["cover_id"]
            start = covers.existing(taker_pub, cover_id).starts_at
            got = _together(_racers(cover_id, email(off), start, cancel=bool(round_ % 2)))
            failures += [r for r in got if isinstance(r, BaseException)]
            state = covers.existing(taker_pub, cover_id).state
            outcomes[state] += 1
            if state == covers.TAKEN:
                assert not isinstance(got[0], BaseException) and got[0].applied
                on, off = off, on
            assert email(on).split("@")[0].title() in roster(taker_pub)[ids[THU]]
        assert failures == []
        assert sum(outcomes.values()) == ROUNDS
        # the races were real: the take won some rounds, the expiry others
        assert outcomes[covers.TAKEN] and outcomes[covers.EXPIRED], outcomes
    finally:
        for pub in PUBS.values():
            pub.close()
        PUBS.clear()
