"""What the words of a verdict need to know about its week, read for them
(:class:`pubsched.words.WeekFacts`): the wording itself does no I/O.

Read after the action, through the engine in charge then (a flip that refused the action
made the other one in charge), so a sentence says what the week is now: its state and its
moments as that engine reads them, the side effect running on it, and, for a refusal by
the one-open-form invariant only, the other week whose form is open (one query, its
filter and limit in SQL: :meth:`pubsched.engines.base.Engine.open_week`).
"""

from __future__ import annotations

from ..pub import Pub
from ..verdicts import Verdict
from ..words import WeekFacts, told
from .choose import engine_for


def week_facts(pub: Pub, week: str, verdict: Verdict) -> WeekFacts:
    """The facts of ``week`` (a Monday's key) that the words of ``verdict`` may need."""
    engine = engine_for(pub)
    # named even when the refused open created nothing (its unit rolled back)
    other = engine.open_week(pub, week) if verdict.reason == "INVARIANT" else None
    row = pub.runs.get(week)
    if row is None:
        return WeekFacts(pub.config.tz, open_week=other)
    times = engine.times(pub, row)
    kind = row.get("acting_kind")
    return WeekFacts(
        pub.config.tz, state=engine.state_of(pub, row),
        times={"opens_at": times["opens_at"], "deadline_at": times["deadline_at"],
               "generate_at": times["generate_at"], "send_window_at": times["send_window_at"]},
        acting_kind=None if kind is None else str(kind), open_week=other)


def in_words(pub: Pub, name: str, week: str, verdict: Verdict) -> Verdict:
    """The verdict of action ``name`` on ``week`` said in the operator's words
    (:func:`pubsched.words.told`, with the facts read here)."""
    return told(name, week, verdict, week_facts(pub, week, verdict))
