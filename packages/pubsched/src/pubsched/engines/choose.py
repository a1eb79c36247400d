"""Which engine runs: :func:`engine_for` reads the ``PUB_SCHEDULER_V2`` flag once and hands
back the engine in charge, behind the one protocol. Every caller that depends on the
engine (the actions, the tick, the week's views, a tender's submission) asks here, so no
other module reads the flag to pick an engine.

:func:`chosen` is the one to act with: it hands back the engine and fences every unit of
work run under it by the flag it chose by (:mod:`pubsched.engines.flags`), so an action
racing a flip lands before it or is refused (:class:`~pubsched.engines.flags.FlagChanged`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..pub import Pub
from . import legacy, v2
from .base import Engine
from .flags import fence, v2_enabled

# the engine modules themselves, each an Engine (mypy checks every member here)
ENGINES: dict[str, Engine] = {"legacy": legacy, "v2": v2}


def engine_for(pub: Pub) -> Engine:
    """The v2 engine with the flag on, else the legacy one (one read of the flag)."""
    return ENGINES["v2"] if v2_enabled(pub) else ENGINES["legacy"]


@contextmanager
def chosen(pub: Pub) -> Iterator[Engine]:
    """The engine in charge, every unit of work in the block fenced by the flag it was
    chosen by: a unit that opens after a flip raises
    :class:`~pubsched.engines.flags.FlagChanged` (rolled back), and a flip waits for a
    unit already open."""
    on = v2_enabled(pub)
    with pub.fenced(fence(pub, on)):
        yield ENGINES["v2"] if on else ENGINES["legacy"]
