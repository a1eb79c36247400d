"""The dataset machine, once, and everything the seed derives from it.

``MACHINE`` is the one source of truth: ``TRANSITION_TABLE``, :func:`is_valid_transition`,
:func:`evaluate_transition`, the SQL the engine compiles, the dry run and the mock all read
it, so none of them can drift from the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING

from rowstate import Edge, InvalidTransitionError, Machine

if TYPE_CHECKING:
    from ._types import TransitionCheckResult


class DatasetStatus(StrEnum):
    """A dataset's ``dataloadingStatus``. ``IDLE`` and ``CANCELLED`` are aliases (the same
    members as ``NOT_AVAILABLE`` and ``CANCELED``), so they are never written to the row."""

    NOT_AVAILABLE = "NOT_AVAILABLE"
    LOADING = "LOADING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    IDLE = "NOT_AVAILABLE"
    CANCELLED = "CANCELED"


STATUSES = DatasetStatus
NOT_AVAILABLE, LOADING, SUCCEEDED = "NOT_AVAILABLE", "LOADING", "SUCCEEDED"
FAILED, CANCELLING, CANCELED = "FAILED", "CANCELLING", "CANCELED"

#: Default finalization claim TTL: a claim older than this may be taken by anyone (self-heal).
STALE_CLAIM_MS = 300_000


def _edge(src: str, dst: str, label: str | None = None) -> Edge:
    return Edge(f"{src.lower()}_to_{dst.lower()}", src, dst, label=label)


MACHINE = Machine(
    "dataset",
    states=[NOT_AVAILABLE, LOADING, SUCCEEDED, FAILED, CANCELLING, CANCELED],
    initial=NOT_AVAILABLE,
    active=[LOADING, CANCELLING],
    edges=[
        _edge(NOT_AVAILABLE, LOADING),
        _edge(LOADING, SUCCEEDED),
        _edge(LOADING, FAILED),
        _edge(LOADING, CANCELLING),
        _edge(LOADING, CANCELED),
        _edge(CANCELLING, CANCELED),
        _edge(CANCELLING, FAILED),
        # "complete wins": a cancel that arrives after the job finished must not leave the
        # dataset stuck in CANCELLING with an orphaned index
        _edge(CANCELLING, SUCCEEDED, "complete wins"),
        *(_edge(src, dst) for src in (SUCCEEDED, FAILED, CANCELED)
          for dst in (LOADING, NOT_AVAILABLE)),
    ],
)

#: ``{from: (to, ...)}``, read from :data:`MACHINE`.
TRANSITION_TABLE: Mapping[str, tuple[str, ...]] = MappingProxyType({
    s: tuple(e.dst for e in MACHINE.edges if e.src == s) for s in MACHINE.states
})

ACTIVE = MACHINE.active


class Reason(StrEnum):
    """Every reason a result may carry.

    ``TransitionResult.reason`` is one of STATE_MISMATCH, NOT_OWNER, GUARD_FAILED,
    RECORD_NOT_FOUND; ``reasons`` lists the block reasons (DATALOADING_ACTIVE, JOB_RUNNING,
    ...); a claim is refused with HELD_BY_OTHER or RECORD_NOT_FOUND.
    """

    # primary reasons of a refused transition
    STATE_MISMATCH = "STATE_MISMATCH"
    NOT_OWNER = "NOT_OWNER"
    GUARD_FAILED = "GUARD_FAILED"
    RECORD_NOT_FOUND = "RECORD_NOT_FOUND"
    # block reasons (BlockReason in the seed)
    INVALID_TRANSITION = "INVALID_TRANSITION"
    DATALOADING_ACTIVE = "DATALOADING_ACTIVE"
    JOB_RUNNING = "JOB_RUNNING"
    JLO_RUNNING = "JLO_RUNNING"
    LOAD_QUEUED = "LOAD_QUEUED"
    FINALIZATION_HELD = "FINALIZATION_HELD"
    # claims and releases
    HELD_BY_OTHER = "HELD_BY_OTHER"
    NOT_HELD = "NOT_HELD"


def normalize_status(status: object) -> str:
    """The canonical name of a status (aliases resolved); an unknown one is a programming
    error and raises :class:`InvalidTransitionError`."""
    if isinstance(status, str) and status in DatasetStatus.__members__:
        return DatasetStatus[status].value
    raise InvalidTransitionError(f"dataset: unknown status {status!r}", to_state=status)


def normalize_statuses(statuses: Iterable[object] | str) -> tuple[str, ...]:
    if isinstance(statuses, str):
        return (normalize_status(statuses),)
    return tuple(dict.fromkeys(normalize_status(s) for s in statuses))


def is_valid_transition(from_status: object, to_status: object) -> bool:
    """Whether the machine has the edge ``from_status -> to_status`` (aliases accepted)."""
    try:
        return MACHINE.is_valid(normalize_status(from_status), normalize_status(to_status))
    except InvalidTransitionError:
        return False


def evaluate_transition(current: object, to: object) -> TransitionCheckResult:
    """Whether a dataset in ``current`` may move to ``to`` by the table alone (no row data).

    A move to LOADING out of an active status is DATALOADING_ACTIVE (a load is in flight);
    any other missing edge is INVALID_TRANSITION, as is a current value that is no status at
    all (e.g. a NULL column). An unknown ``to`` raises :class:`InvalidTransitionError`.
    """
    from ._types import TransitionCheckResult

    target = normalize_status(to)
    try:
        cur: str | None = normalize_status(current)
    except InvalidTransitionError:
        cur = None
    if cur is not None and target == LOADING and cur in ACTIVE:
        return TransitionCheckResult(False, [Reason.DATALOADING_ACTIVE.value], cur)
    if cur is None or not MACHINE.is_valid(cur, target):
        return TransitionCheckResult(False, [Reason.INVALID_TRANSITION.value], cur)
    return TransitionCheckResult(True, [], cur)
