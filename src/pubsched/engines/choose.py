"""Which engine runs: :func:`engine_for` reads the ``PUB_SCHEDULER_V2`` flag once and hands
back the engine in charge, behind the one protocol. Every caller that depends on the
engine (the actions, the tick, the week's views, a tender's submission) asks here, so no
other module reads the flag to pick an engine."""

from __future__ import annotations

from ..pub import Pub
from . import legacy, v2
from .base import Engine
from .flags import v2_enabled

ENGINES: dict[str, Engine] = {"legacy": legacy.ENGINE, "v2": v2.ENGINE}


def engine_for(pub: Pub) -> Engine:
    """The v2 engine with the flag on, else the legacy one (one read of the flag)."""
    return ENGINES["v2"] if v2_enabled(pub) else ENGINES["legacy"]
