"""The every-minute tick: ``tick(pub, now)``. Safe with several app instances at once.

The engine in charge owns time (:meth:`pubsched.engines.base.Engine.tick`): with the flag
off, the legacy crons (:func:`pubsched.engines.legacy.crons`); with it on, the legacy crons
stand down and the v2 tick (:mod:`pubsched.engines.v2_tick`: nudges and autopilot) moves
each due run exactly once through the one door, however many ticks run. The tick runs
fenced by the flag it chose its engine by (:func:`pubsched.engines.choose.chosen`): a tick
racing a flip lands before it, or is refused (FLAG_CHANGED) and writes nothing more.

Then, whichever engine ran and outside the fence (they move no week), the reminders
(:func:`pubsched.reminders.remind`): what the engine's tick just did (a roster made) is
seen by the reminders of the same tick.
"""

from __future__ import annotations

from datetime import datetime

from .engines.choose import chosen
from .engines.flags import FLAG_CHANGED, FlagChanged
from .pub import Pub, Verdict, utc
from .reminders import remind


def tick(pub: Pub, now: datetime | None = None) -> list[Verdict]:
    """One tick as of ``now``: the legacy crons, or the v2 tick (nudges and autopilot);
    then the reminders."""
    at = utc(now)
    try:
        with chosen(pub) as engine:
            out = engine.tick(pub, at)
    except FlagChanged as changed:  # a flip landed mid-tick: the next tick runs the new one
        out = [Verdict(False, FLAG_CHANGED, message=f"tick: {changed}")]
    return out + remind(pub, at)
