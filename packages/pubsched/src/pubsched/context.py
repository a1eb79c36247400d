"""What an action runs in, per thread and per task: the fence every unit of work runs
first, and who is acting.

Both are context variables: a front end (or an engine's chosen action) sets one once for
a block, every unit of work and every move made inside reads it, and no domain signature
grows an argument for it. Per thread and per task, so a value never leaks into another
request or another tick; a nested block sets its own until it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import rowstate

from .verdicts import BadInput

Fence = Callable[[rowstate.Unit], None]
# the check every unit of work runs first, while an action chosen by an engine is running
# (:func:`pubsched.engines.choose.chosen`)
_FENCE: ContextVar[Fence | None] = ContextVar("pubsched_fence", default=None)
# who is moving weeks (``cli:ann``, ``operator:EMAIL``, ``tick``): set once by each front
# end (:func:`acting_as`), read where a move writes its event (:func:`actor`)
_ACTOR: ContextVar[str | None] = ContextVar("pubsched_actor", default=None)
MAX_ACTOR = 200


@contextmanager
def fenced(check: Fence | None) -> Iterator[None]:
    """Every unit of work opened in this block runs ``check`` first (:meth:`pubsched.pub.Pub.
    atomic`); ``None`` lifts the fence (a side effect's finalize, which must land)."""
    token = _FENCE.set(check)
    try:
        yield
    finally:
        _FENCE.reset(token)


def fence() -> Fence | None:
    """The fence of this thread or task now (None: no fence)."""
    return _FENCE.get()


@contextmanager
def acting_as(by: str | None) -> Iterator[None]:
    """Every move made in this block records ``by`` as who made it (its event's ``by``,
    read from :func:`actor`); a nested block names another actor until it ends (the tick
    run by ``pubsched tick`` is the tick, not the shell's user)."""
    if by is not None and (not isinstance(by, str) or not by.strip() or len(by) > MAX_ACTOR
                           or not by.isprintable()):
        raise BadInput(f"who acts is a printable name of at most {MAX_ACTOR} characters, "
                       f"got {by!r}")
    token = _ACTOR.set(by)
    try:
        yield
    finally:
        _ACTOR.reset(token)


def actor() -> str | None:
    """Who is moving weeks here and now (None: nobody said)."""
    return _ACTOR.get()


__all__ = ["MAX_ACTOR", "Fence", "acting_as", "actor", "fence", "fenced"]
