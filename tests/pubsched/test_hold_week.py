"""``Engine.hold_week``: each engine holds a week in the states an edit of its own data is
allowed in (its shifts, its roster), as that engine reads the state, on both databases."""

from __future__ import annotations

import pytest

from pubsched.engines import legacy, v2
from pubsched.engines.base import Engine
from pubsched.pub import Pub
from pubsched.verdicts import BadInput
from pubsched.week.runs import ensure_week
from support.pub_engines import WEEK, moment

pytestmark = [pytest.mark.pub_setup("engines"),
              pytest.mark.both_databases("a hold: FOR SHARE on PostgreSQL, a lock on SQLite")]

BEFORE_ROSTER = ("DRAFT", "COLLECTING", "CLOSED")


def held(pub: Pub, engine: Engine, states: tuple[str, ...]) -> tuple[object, object]:
    with pub.atomic() as tx:
        got = engine.hold_week(tx, WEEK, states)
    return (None, None) if got is None else (got.reason, got.detail.get("state"))


@pytest.mark.parametrize("engine", [legacy, v2], ids=["legacy", "v2"])
def test_a_week_is_held_in_its_states_and_refused_elsewhere(pub: Pub, engine: Engine) -> None:
    ensure_week(pub, WEEK)
    assert held(pub, engine, BEFORE_ROSTER) == (None, None)
    at = moment(pub, WEEK, "opens_at")
    assert engine.open_form(pub, WEEK, now=at)
    assert engine.close(pub, WEEK, now=at)
    assert engine.generate(pub, WEEK, now=at)
    assert held(pub, engine, BEFORE_ROSTER) == ("STATE_MISMATCH", "ASSIGNED")
    assert held(pub, engine, ("ASSIGNED",)) == (None, None)


@pytest.mark.parametrize("engine", [legacy, v2], ids=["legacy", "v2"])
def test_an_unknown_week_is_bad_input(pub: Pub, engine: Engine) -> None:
    with pytest.raises(BadInput, match="no week"), pub.atomic() as tx:
        engine.hold_week(tx, WEEK, BEFORE_ROSTER)
