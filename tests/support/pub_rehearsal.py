"""A passed dress rehearsal for a test that turns v2 on over real weeks (the cutover
refuses it otherwise: REHEARSAL_REQUIRED), run through the real code path: the whole
rehearsal on a throwaway copy, its mail to the operator at ``smtp`` (then forgotten, so the
test's own counts of mail start from nothing)."""

from __future__ import annotations

from datetime import datetime

from pubsched.pub import Pub
from pubsched.rehearsal import PASSED, StepResult, run_all
from pubsched.rehearsal.record import latest
from support.smtp_server import SmtpTestServer


def rehearse(pub: Pub, smtp: SmtpTestServer | None = None, *,
             now: datetime | None = None) -> list[StepResult]:
    """Run a real rehearsal on ``pub`` and check that it passed."""
    results = list(run_all(pub, now=lambda: now))
    assert [r.ok for r in results] == [True] * len(results), results[-1]
    done = latest(pub)
    assert done is not None and done.outcome == PASSED, done
    if smtp is not None:
        smtp.clear_received()
    return results
