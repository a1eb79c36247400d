"""The close's answers from the usual are all or none (issue 19), on PostgreSQL: a process
closing a week for forty tenders who never answered is SIGKILLed at a different moment each
round; after each kill the week has either every answer from a usual or none of them (never
half), a closed week always every one, and a close run again (once the killed one's lease
is past its TTL) finishes the week with every answer once. Over the rounds the kill lands
before the close claimed, inside its act (rolled back: none), between the act's commit and
the finalize (all, the week still collecting) and after it; which ones a run hits depends
on the machine's timing, the invariant holds for each."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from pubsched.engines import v2
from pubsched.people import tenders, usual
from pubsched.pub import Pub
from pubsched.week import runs as weeks
from support.pubs import NOW, WEEK

HERE = Path(__file__).resolve().parent
PEOPLE = 40
CLOSE_IN_A_CHILD = """
import sys
sys.path[:0] = [{tests!r}]
from support.pubs import NOW, WEEK
from pubsched.engines import v2
from pubsched.config import Config
from pubsched.pub import Pub
from pubsched.db import open_store
pub = Pub(open_store(sys.argv[1]), Config(db_url=sys.argv[1]))
pub.query("SELECT 1 AS ready")
print("ready", flush=True)
v2.close(pub, WEEK, now=NOW)
print("closed", flush=True)
pub.close()
"""


def _answers(pub: Pub) -> int:
    rows = pub.query("SELECT COUNT(*) AS n FROM pub_availability WHERE week_of = %s AND "
                     "source = 'usual'", [WEEK])
    return int(rows[0]["n"])


def _age_lease(pub: Pub) -> None:
    with pub.atomic() as tx:
        tx.execute("UPDATE pub_schedule_runs SET acting_at = acting_at - %s "
                   "WHERE week_of = %s AND acting_at IS NOT NULL",
                   [timedelta(seconds=700), WEEK])


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_close_killed_at_any_moment_leaves_every_answer_or_none(pub: Pub,
                                                                   db_url: str) -> None:
    for i in range(PEOPLE):
        assert tenders.add(pub, f"T{i:02d}", f"t{i:02d}@pub.test", now=NOW)
    assert v2.open_form(pub, WEEK, now=NOW)
    everyone = weeks.shifts(pub, WEEK)
    with pub.atomic() as tx:
        for t in tenders.all_tenders(pub):
            usual.write(tx, t.id, {usual.identity(s.starts_at, pub.config.tz)
                                   for s in everyone}, None, NOW)
    script = CLOSE_IN_A_CHILD.format(tests=str(HERE.parent))
    seen: set[str] = set()
    for delay in (0.0, 0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1):
        child = subprocess.Popen([sys.executable, "-c", script, db_url], env=dict(os.environ),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)
        state = pub.runs.state(WEEK)
        got = _answers(pub)
        assert got in (0, PEOPLE), (delay, state, got)  # never half
        if state == "CLOSED":
            assert got == PEOPLE
            seen.add("closed")
            assert v2.reopen(pub, WEEK, now=NOW)  # the next round closes it again
        else:
            assert state == "COLLECTING"
            leased = pub.query("SELECT acting_kind FROM pub_schedule_runs WHERE week_of = %s",
                               [WEEK])[0]["acting_kind"] == "close"
            seen.add("answered, not closed" if got else
                     "killed in the act: rolled back" if leased else "killed before")
            _age_lease(pub)  # the killed close's lease, past its TTL
    _age_lease(pub)
    assert v2.close(pub, WEEK, now=NOW).applied
    assert _answers(pub) == PEOPLE
    rows = pub.query("SELECT COUNT(*) AS n FROM pub_availability_shifts WHERE week_of = %s",
                     [WEEK])
    assert int(rows[0]["n"]) == PEOPLE * len(everyone)  # each answer once, whole
    assert seen, "no round ran"
