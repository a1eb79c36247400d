"""The every-minute tick: ``tick(pub, now)``. Safe with several app instances at once.

The engine in charge owns time (:meth:`pubsched.engines.base.Engine.tick`): with the flag
off, the legacy crons (:func:`pubsched.engines.legacy.crons`); with it on, the legacy crons
stand down and the v2 tick (:mod:`pubsched.engines.v2_tick`: nudges and autopilot) moves
each due run exactly once through the one door, however many ticks run.
"""

from __future__ import annotations

from datetime import datetime

from .engines.choose import engine_for
from .pub import Pub, Verdict, utc


def tick(pub: Pub, now: datetime | None = None) -> list[Verdict]:
    """One tick as of ``now``: the legacy crons, or the v2 tick (nudges and autopilot)."""
    at = utc(now)
    return engine_for(pub).tick(pub, at)
