"""The parts a binding is declared with: its lease, its claims, guards, invariants,
timers and notices, and ``NOW``.

Plain frozen data, checked by :class:`rowstate.binding.Binding` when it is built; they live
below it so that what reads a binding's layout (:mod:`rowstate.schema`) can name them
without importing the binding itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class _Now:
    """Entry-write value meaning "the current time" (database clock unless injected)."""

    def __repr__(self) -> str:
        return "NOW"


NOW: Any = _Now()


@dataclass(frozen=True)
class Lease:
    """Columns of the in-flight lease of side-effecting edges (pub scheduler ``acting_*``)."""

    at: str = "acting_at"
    kind: str = "acting_kind"
    token: str | None = None
    holder: str | None = None
    error: str | None = None
    ttl: float = 300.0
    # stamped when an act fails (cleared by the finalize): fire_due skips a row that failed
    # within its timer's back-off, so failing rows cannot starve healthy ones
    failed_at: str | None = None


@dataclass(frozen=True)
class FinalizationClaim:
    """Columns of a claim keyed by (holder, scope), stealable after ``ttl`` seconds.

    A transition into a state that is not active clears it in the same write. ``blocks``
    names states that cannot be entered while a live (not yet stale) claim is held, whoever
    holds it (reason ``FINALIZATION_HELD``): e.g. no new load may start while a finalizer
    is still doing its destructive work on the row.
    """

    holder: str
    scope: str
    at: str
    token: str | None = None
    ttl: float = 300.0
    blocks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Derived:
    """The effective state while the state column is NULL: ``mapping[legacy column]``.

    The pub scheduler seeds ``v2_state`` lazily from its legacy ``status``; the first
    transition writes the state column, and from then on it is the truth.
    """

    column: str
    mapping: Mapping[str, str]


@dataclass(frozen=True)
class Guard:
    """Accepted values of a field, with the reason reported when the row has another.

    ``None`` among the values means IS NULL (a missing JSON key or a JSON null counts).
    """

    values: tuple[Any, ...]
    reason: str = "GUARD_FAILED"


@dataclass(frozen=True)
class Unique:
    """At most one row in ``state`` (per the ``per`` columns): a partial UNIQUE index."""

    state: str
    per: tuple[str, ...] = ()
    name: str | None = None


@dataclass(frozen=True)
class TimedEdge:
    """Fire ``edge`` for rows in its source state once ``now >= row[due]``."""

    edge: str
    due: str
    guards: Mapping[str, Any] = field(default_factory=dict)
    backoff: float = 60.0  # seconds a row whose act failed waits (needs Lease.failed_at)


@dataclass(frozen=True)
class Notice:
    """A once-per-row nudge: claimed by stamping ``claim`` (NULL until sent)."""

    name: str
    states: tuple[str, ...]
    due: str
    claim: str
    guards: Mapping[str, Any] = field(default_factory=dict)


GuardSpec = Mapping[str, Any]
