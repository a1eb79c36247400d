"""#17.5: an action racing the flag flip obeys the flag in force when it commits, never the
flag it read before the flip: a legacy tick racing a flip to on, and a v2 open racing a
rollback, with real threads (a barrier, many trials) and real processes, on SQLite and on
a real PostgreSQL. Either the action lands first (and the flip then refuses: not the idle
gap) or the flip lands first (and the action is refused, FLAG_CHANGED, writing nothing)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from pubsched.engines import actions
from pubsched.engines.cutover import flip
from pubsched.engines.flags import set_v2, v2_enabled
from pubsched.pub import Pub
from pubsched.tick.run import tick
from pubsched.verdicts import Verdict
from pubsched.week.runs import ensure_week
from support.line_child import LineChild, at_once
from support.pub_engines import WEEK, moment, row
from support.pub_rehearsal import rehearse
from support.pubs import make_pub
from support.smtp_server import SmtpTestServer

pytestmark = [pytest.mark.pub_setup("engines"),
              pytest.mark.both_databases("races: the flag's lock against an action in flight")]
TRIALS = 12
HERE = Path(__file__).resolve().parent


def _race(url: str, on: bool, act: Any) -> tuple[Verdict, Any]:
    """One trial: the action and the flip start together, each on its own connection."""
    a, b = make_pub(url), make_pub(url)
    barrier = threading.Barrier(2)
    got: dict[str, Any] = {}

    def action() -> None:
        barrier.wait()
        got["action"] = act(a)

    def flipper() -> None:
        barrier.wait()
        got["flip"] = flip(b, on)

    threads = [threading.Thread(target=action), threading.Thread(target=flipper)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    a.close()
    b.close()
    return got["flip"], got["action"]


def _reset(pub: Pub, on: bool) -> None:
    with pub.atomic() as tx:
        for table in ("pub_availability_shifts", "pub_assignments", "pub_availability",
                      "pub_shifts", "pub_schedule_runs"):
            tx.execute(f"DELETE FROM {table}")
    set_v2(pub, on)
    ensure_week(pub, WEEK)


def test_a_legacy_tick_racing_a_flip_to_on_never_opens_the_week_under_legacy(
        pub: Pub, db_url: str, smtp: SmtpTestServer) -> None:
    rehearse(pub, smtp)  # turning v2 on over a week needs a passed rehearsal (#17.7)
    at = moment(pub, WEEK, "opens_at", 60)
    outcomes = set()
    for _ in range(TRIALS):
        _reset(pub, False)
        flipped, ticked = _race(db_url, True, lambda p: tick(p, at))
        week = row(pub, WEEK)
        legacy_opened = week["opened_at"] is not None and week.get("v2_state") in (None, "DRAFT")
        if flipped.applied and flipped.detail.get("changed"):
            assert v2_enabled(pub)
            assert not legacy_opened, (flipped, ticked, week)
            assert all(not v.applied for v in ticked), ticked
            outcomes.add("flip first")
        else:
            assert flipped.reason == "NOT_IDLE" and not v2_enabled(pub), flipped
            assert legacy_opened, week
            outcomes.add("tick first")
    assert outcomes


def test_a_v2_open_racing_a_rollback_never_lands_after_it(pub: Pub, db_url: str) -> None:
    at = moment(pub, WEEK, "opens_at", 60)
    outcomes = set()
    for _ in range(TRIALS):
        _reset(pub, True)
        flipped, opened = _race(db_url, False, lambda p: actions.perform(p, "open", WEEK, now=at))
        week = row(pub, WEEK)
        if flipped.applied and flipped.detail.get("changed"):
            assert not v2_enabled(pub)
            # never a v2 open after it: refused, or (chosen after the flip) a legacy open
            assert week.get("v2_state") in (None, "DRAFT"), (opened, week)
            if opened.applied:
                assert week["opened_at"] is not None, week
            else:
                assert opened.reason == "FLAG_CHANGED" and "try again" in opened.message.lower()
                assert week["opened_at"] is None, week
                outcomes.add("refused")
        else:
            assert flipped.reason == "NOT_IDLE" and v2_enabled(pub), flipped
            assert opened.applied and week["v2_state"] == "COLLECTING", (opened, week)


CHILD = """
import json, sys
sys.path[:0] = [{tests!r}]
from datetime import datetime
from support.pub_engines import WEEK
from support.pubs import make_pub
from pubsched.engines import actions
from pubsched.engines.cutover import flip
url, what, at = sys.argv[1], sys.argv[2], datetime.fromisoformat(sys.argv[3])
while sys.stdin.readline():  # a trial: connect and say so, then act on the next line
    pub = make_pub(url)
    print(json.dumps("connected"), flush=True)
    sys.stdin.readline()
    got = actions.perform(pub, "open", WEEK, now=at) if what == "open" else flip(pub, False)
    print(json.dumps({{"applied": got.applied, "reason": got.reason,
                      "changed": (got.detail or {{}}).get("changed")}}), flush=True)
    pub.close()
"""


def test_processes_racing_a_rollback_against_an_open(pub: Pub, db_url: str) -> None:
    """Two processes (support.line_child: started once, warm), each trial connected and
    waiting before both are let go together."""
    at = moment(pub, WEEK, "opens_at", 60)
    script = CHILD.format(tests=str(HERE.parent))
    kids = [LineChild(script, db_url, what, at.isoformat()) for what in ("open", "flip")]
    with kids[0], kids[1]:
        for _ in range(4):
            _reset(pub, True)
            assert at_once(kids, ["connect", "connect"]) == ["connected", "connected"]
            opened, flipped = at_once(kids, ["go", "go"])
            _check_trial(pub, opened, flipped)


def _check_trial(pub: Pub, opened: dict[str, Any], flipped: dict[str, Any]) -> None:
    week = row(pub, WEEK)
    if flipped["applied"] and flipped["changed"]:
        assert opened["applied"] or opened["reason"] == "FLAG_CHANGED", opened
        assert week.get("v2_state") in (None, "DRAFT"), week  # never v2's open after it
    else:
        assert flipped["reason"] == "NOT_IDLE" and week["v2_state"] == "COLLECTING"


def test_every_unfenced_path_acts_only_on_a_week_in_flight() -> None:
    """Why the leased edges, the timers and the nudges need no flag fence (their finalize
    must land once an email went out): each acts only on a week the idle gap excludes, so
    an unforced flip is refused (NOT_IDLE) for as long as any of them can run, and a week
    leaves the idle states only by a fenced move (open). A leased edge, timer or nudge added
    from DRAFT or SENT would break that argument: this fails, and it needs a fence."""
    from pubsched.engines.cutover import IDLE_STATES
    from pubsched.machine import RUN, RUNS

    leased = {e.name: e.src for e in RUN.edges if e.lease}
    timed = {t.edge: RUN.edge(t.edge).src for t in RUNS.timers}
    nudged = {n.name: state for n in RUNS.notices for state in n.states}
    assert leased and timed and nudged
    for kind, sources in (("leased edge", leased), ("timer", timed), ("nudge", nudged)):
        idle = {name: src for name, src in sources.items() if src in IDLE_STATES}
        assert not idle, f"a {kind} acts on an idle week and is not fenced: {idle}"
    assert sorted(actions.LEASE_GUARDED) == ["resend", "send"]  # resend: SENT, one code for both
