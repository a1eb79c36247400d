"""One function per operator button, called by the CLI and the web alike: the flag
decides which engine performs it (v2 with ``PUB_SCHEDULER_V2`` on, else the legacy one).
Operator actions are not time-gated; ``now`` is the instant they act at."""

from __future__ import annotations

from datetime import datetime
from types import ModuleType
from typing import Any

from .app import BadInput, Pub, Verdict
from .flags import v2_enabled

NAMES = ("open", "close", "generate", "reopen", "approve", "unapprove", "send", "extend",
         "autopilot")


def engine(pub: Pub) -> ModuleType:
    from . import legacy, v2

    return v2 if v2_enabled(pub) else legacy


def perform(pub: Pub, name: str, week: str, *, now: datetime | None = None,
            **options: Any) -> Verdict:
    """Run the named action on ``week`` with the engine the flag selects."""
    if name not in NAMES:
        raise BadInput(f"unknown action {name!r}; one of {', '.join(NAMES)}")
    chosen = engine(pub)
    function = {"open": "open_form"}.get(name, name)
    return getattr(chosen, function)(pub, week, now=now, **options)  # type: ignore[no-any-return]
