"""What an action hands back, and the errors pubsched raises: plain data, no I/O.

The bottom of the domain: every module that acts or refuses says so with these, so they
import nothing of pubsched. A lost race, a wrong state or a held lease is a refused
:class:`Verdict` (normal in a concurrent system, never an exception); bad input is
:class:`BadInput`, raised before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class PubError(Exception):
    """Root of the errors pubsched raises."""


class BadInput(PubError, ValueError):
    """Input the pub refuses (not a Monday, an unknown tender or shift): nothing written."""


@dataclass(frozen=True)
class Verdict:
    """What an action did: ``applied``; or refused (``reason``: a lost race, a wrong
    state, a held lease, an invariant); or ran and ``failed`` (SMTP down, a recipient
    refused: the run stays where it was, ``last_error`` set)."""

    applied: bool
    reason: str | None = None
    failed: str | None = None
    message: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.applied


__all__ = ["BadInput", "PubError", "Verdict"]
