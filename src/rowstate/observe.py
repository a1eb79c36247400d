"""Metrics and traces: what a front end tells an observer about each operation it runs.

``Lifecycle(store, binding, observer=...)`` (and its async twin) tells an :class:`Observer`
about every public operation (the names in :data:`OPERATIONS`) in two calls: ``finish =
observer.start(operation, machine)`` just before the operation runs, and
``finish(observation)`` once it has returned or raised, with an :class:`Observation`: its
outcome, reason, round trips and duration. Why two calls and not one: a tracer's span must
be open while the operation runs, so that what runs inside it (an act's own spans, a
database driver's instrumentation) is its child, and so that it covers the real duration;
an observer that only counts returns the same bound method every time and pays nothing
for the first call.

What an observer may rely on:

* one ``start`` and one ``finish`` per call of a public operation, in the caller's thread
  or task (a context variable set in ``start`` can be reset in ``finish``); an operation
  that runs another inside it (an act that transitions another row) gives two nested
  observations, each with its own round trips;
* an observer that raises never breaks or undoes the operation: its error is logged
  (logger ``rowstate``) and the caller gets the operation's own result or exception;
* without an observer the front end is exactly what it was: the observed methods are
  wrapped on the instance only when one is given (:mod:`rowstate._async.observing`).

Outcomes: ``"applied"`` (a write that landed: a transition, claim, release, create...),
``"refused"`` (a write the database refused; ``reason`` says why, as the result does),
``"read"`` (an operation that only reads, and a set-based one that found nothing to move)
and ``"error"`` (it raised; ``reason`` is the exception's class name). Labels stay few: an
observation never carries the row's key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, NamedTuple, Protocol

from .machine import Machine
from .results import Reason

log = logging.getLogger("rowstate")

APPLIED, REFUSED, READ, ERROR = "applied", "refused", "read", "error"


class Observation(NamedTuple):
    """One operation, as it ended.

    ``edge``: the edge the call named or its write moved along (None when neither says:
    a refused transition, a read); ``to``: the state the call asked for (a transition's
    target, a leased edge's destination, a create's state). ``round_trips``: the store
    batches the operation sent (a lane transition is 1; a refused one whose explaining read
    went along with the write is 1 too). ``takeover``: a claim (or run) took over an expired
    lease of its kind. A fencing refusal is ``reason == "LEASE_LOST"`` (:attr:`fenced`).
    """

    operation: str
    machine: str
    edge: str | None
    to: str | None
    outcome: str
    reason: str | None
    round_trips: int
    duration: float  # seconds, from a monotonic clock
    takeover: bool = False

    @property
    def fenced(self) -> bool:
        """The write was refused because its lease had been taken over (a zombie)."""
        return self.reason == Reason.LEASE_LOST


Finish = Callable[[Observation], object]


class Observer(Protocol):
    """What ``observer=`` takes: ``start`` is called before each operation and returns the
    function its observation is handed to (see the module)."""

    def start(self, operation: str, machine: str) -> Finish: ...


class Calling:
    """An observer that hands each observation to one function (a list's ``append``, a
    logger): the smallest observer, for tests and quick looks."""

    def __init__(self, fn: Finish) -> None:
        self.fn = fn

    def start(self, operation: str, machine: str) -> Finish:
        return self.fn


# -- what the front ends' observed path shares --------------------------------------------

# the store batches of the operation running in this thread or task: a cell set per
# observed call (nested calls set their own), counted by the front end's counting runner
TRIPS: ContextVar[list[int] | None] = ContextVar("rowstate_round_trips", default=None)


def begin(observer: Observer, operation: str, machine: str) -> Finish | None:
    try:
        return observer.start(operation, machine)
    except Exception:
        log.exception("rowstate: observer %r failed to start %s", observer, operation)
        return None


def end(finish: Finish | None, observation: Observation) -> None:
    if finish is None:
        return
    try:
        finish(observation)
    except Exception:  # the operation is done; an observer cannot undo or break it
        log.exception("rowstate: observer failed for %s", observation)


# (edge, to, outcome, reason) of an operation that returned: from its arguments and result
Facts = Callable[[Machine, tuple[Any, ...], Mapping[str, Any], Any], tuple[
    str | None, str | None, str, str | None]]


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], i: int, name: str) -> Any:
    return args[i] if len(args) > i else kwargs.get(name)


def _verdict(ok: bool, reason: str | None) -> tuple[str, str | None]:
    return (APPLIED, None) if ok else (REFUSED, reason)


def _transition(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any], r: Any) -> Any:
    event = r.event
    return (None if event is None else event.edge, _arg(a, k, 1, "to"),
            *_verdict(r.applied, r.reason))


def _with_claim(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any], r: Any) -> Any:
    """finalize / release: the claim presented names the edge."""
    edge = getattr(_arg(a, k, 1, "claim"), "edge", None)
    ok = r.applied if hasattr(r, "applied") else r.released
    return edge, _destination(m, edge), *_verdict(ok, r.reason)


def _leased(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any], r: Any) -> Any:
    """claim / run: the edge is the call's second argument."""
    edge = _arg(a, k, 1, "edge")
    ok = r.claimed if hasattr(r, "claimed") else r.applied
    return edge, _destination(m, edge), *_verdict(ok, r.reason)


def _destination(m: Machine, edge: object) -> str | None:
    if not isinstance(edge, str):
        return None
    try:
        return m.edge(edge).dst
    except Exception:  # the operation itself judged the name; no second error here
        return None


def _birth(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any], r: Any) -> Any:
    to = k.get("state") or m.initial
    if isinstance(r, Mapping):  # ensure: the row exists now, found or created
        return None, to, APPLIED, None
    return None, to, *_verdict(r.applied, r.reason)


def _finalization(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any], r: Any) -> Any:
    ok = r.claimed if hasattr(r, "claimed") else r.released
    return None, None, *_verdict(ok, r.reason)


def _many(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any], r: Any) -> Any:
    to = _arg(a, k, 0, "to")
    if r.applied:
        return None, to, APPLIED, None
    if r.refused:
        return None, to, REFUSED, r.refused[0][1]
    return None, to, READ, None


def _fired(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any], r: Any) -> Any:
    if not r.fired:
        return None, None, READ, None
    if r.applied:
        return None, None, APPLIED, None
    first = r.fired[0]  # a refused move's reason, or its callback's failure
    return None, None, REFUSED, first.reason or ("ACT_ERROR" if first.error else None)


def _check(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any], r: Any) -> Any:
    return None, _arg(a, k, 1, "to"), READ, r.reasons[0] if r.reasons else None


def _read(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any], r: Any) -> Any:
    return None, None, READ, None


#: every observed operation and how its observation is read from its call and result
OPERATIONS: dict[str, Facts] = {
    "transition": _transition,
    "can_transition": _check,
    "claim": _leased,
    "finalize": _with_claim,
    "release": _with_claim,
    "run": _leased,
    "create": _birth,
    "ensure": _birth,
    "transition_many": _many,
    "fire_due": _fired,
    "claim_finalization": _finalization,
    "release_finalization": _finalization,
    "get": _read,
    "history": _read,
    "find": _read,
    "count": _read,
    "enabled_edges": _read,
}

#: the operations that may take over an expired lease: observed, the row's lease is read
#: just before (one more round trip, not counted in the operation's)
CLAIMING = frozenset({"claim", "run"})


def claimed(result: Any) -> bool:
    """Did this claim's or run's result take the lease (a run's act ran)?"""
    return bool(result.claimed) if hasattr(result, "claimed") else bool(result.acted)


def observation(operation: str, machine: Machine, args: tuple[Any, ...],
                kwargs: Mapping[str, Any], result: Any, round_trips: int, duration: float,
                leased_before: bool) -> Observation:
    edge, to, outcome, reason = OPERATIONS[operation](machine, args, kwargs, result)
    takeover = leased_before and claimed(result)
    return Observation(operation, machine.name, edge, to, outcome,
                       None if reason is None else str(reason), round_trips, duration,
                       takeover)


def failed(operation: str, machine: Machine, exc: BaseException, round_trips: int,
           duration: float) -> Observation:
    return Observation(operation, machine.name, None, None, ERROR, type(exc).__name__,
                       round_trips, duration)
