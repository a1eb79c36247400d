"""Metrics and traces: what a front end tells an observer about each operation it runs.

``Lifecycle(store, binding, observer=...)`` (and its async twin) tells an :class:`Observer`
about every public operation (the names in :data:`OPERATIONS`) in two calls: ``finish =
observer.start(operation, machine)`` just before the operation runs, and
``finish(observation)`` once it has returned or raised, with an :class:`Observation`: its
outcome, reason, round trips and duration. Why two calls and not one: a tracer's span must
be open while the operation runs, so that what runs inside it (an act's own spans, a
database driver's instrumentation) is its child, and so that it covers the real duration;
an observer that only counts returns the same bound method every time and pays one call
for the first. A unit of work's ``hold`` and ``fence`` are observed too (:func:`watched`).

What an observer may rely on:

* one ``start`` and one ``finish`` per call of a public operation, in the caller's thread
  or task (a context variable set in ``start`` can be reset in ``finish``); an operation
  that runs another inside it (an act that transitions another row) gives two nested
  observations, each with its own round trips;
* an observer that raises never breaks or undoes the operation: its error is logged
  (logger ``rowstate``) and the caller gets the operation's own result or exception;
* without an observer the front end is exactly what it was: the observed methods are
  wrapped on the instance only when one is given (:mod:`rowstate._async.observing`);
* with one, an observed ``claim`` or ``run`` on a leased binding first reads the row's
  lease (one primary-key read, not counted in the operation's round trips): if the row
  had a lease and the claim then landed, that lease had expired, a takeover.

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
from time import perf_counter
from typing import Any, NamedTuple, Protocol

from .machine import Machine
from .protocol import Batch, Op
from .results import Reason

log = logging.getLogger("rowstate")
_new = tuple.__new__

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


# What the call names (edge, to), read from its arguments, before or without a result;
# and what its result says (outcome, reason, and the edge its write moved along, if any)
Named = Callable[[Machine, tuple[Any, ...], Mapping[str, Any]], tuple[str | None, str | None]]
Verdict = Callable[[Any], tuple[str, str | None, str | None]]


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], i: int, name: str) -> Any:
    return args[i] if len(args) > i else kwargs.get(name)


def _destination(m: Machine, edge: object) -> str | None:
    if not isinstance(edge, str):
        return None
    try:
        return m.edge(edge).dst
    except Exception:  # the operation itself judges the name; no second error here
        return None


def _target(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any]) -> tuple[None, Any]:
    return None, _arg(a, k, 1, "to")


def _many_target(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any]) -> tuple[None, Any]:
    return None, _arg(a, k, 0, "to")


def _edge(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any]) -> tuple[Any, str | None]:
    edge = _arg(a, k, 1, "edge")
    return edge, _destination(m, edge)


def _claims_edge(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any],
                 ) -> tuple[Any, str | None]:
    edge = getattr(_arg(a, k, 1, "claim"), "edge", None)
    return edge, _destination(m, edge)


def _birth_state(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any]) -> tuple[None, Any]:
    return None, k.get("state") or m.initial


def _nothing(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any]) -> tuple[None, None]:
    return None, None


def _moved(r: Any) -> tuple[str, str | None, str | None]:
    if r.applied:
        return APPLIED, None, None if r.event is None else r.event.edge
    return REFUSED, r.reason, None


def _claimed(r: Any) -> tuple[str, str | None, None]:
    return (APPLIED, None, None) if r.claimed else (REFUSED, r.reason, None)


def _released(r: Any) -> tuple[str, str | None, None]:
    return (APPLIED, None, None) if r.released else (REFUSED, r.reason, None)


def _ran(r: Any) -> tuple[str, str | None, None]:
    return (APPLIED, None, None) if r.applied else (REFUSED, r.reason, None)


def _ensured(r: Any) -> tuple[str, None, None]:
    return APPLIED, None, None  # the row exists now, found or created


def _many(r: Any) -> tuple[str, str | None, None]:
    if r.applied:
        return APPLIED, None, None
    return (REFUSED, r.refused[0][1], None) if r.refused else (READ, None, None)


def _fired(r: Any) -> tuple[str, str | None, None]:
    if not r.fired:
        return READ, None, None
    if r.applied:
        return APPLIED, None, None
    first = r.fired[0]  # a refused move's reason, or its callback's failure
    return REFUSED, first.reason or ("ACT_ERROR" if first.error else None), None


def _checked(r: Any) -> tuple[str, str | None, None]:
    return READ, r.reasons[0] if r.reasons else None, None


def _read(r: Any) -> tuple[str, None, None]:
    return READ, None, None


def _fenced_edge(m: Machine, a: tuple[Any, ...], k: Mapping[str, Any],
                 ) -> tuple[str | None, None]:
    edge = getattr(_arg(a, k, 0, "lease"), "edge", None)  # a LeaseClaim's name, an Edge
    return (edge if isinstance(edge, str) else getattr(edge, "name", None)), None


def _held(r: Any) -> tuple[str, str | None, None]:
    return (APPLIED, None, None) if r.held else (REFUSED, r.reason, None)


#: every observed operation: what its call names, and what its result says. ``ensure`` is
#: "applied" whether it found the row or created it; ``can_transition`` is a "read" whose
#: reason is the first reason the move would be refused; ``hold`` and ``fence`` are a unit
#: of work's row checks (a refused fence is a fencing refusal, LEASE_LOST).
FACTS: dict[str, tuple[Named, Verdict]] = {
    "transition": (_target, _moved),
    "can_transition": (_target, _checked),
    "claim": (_edge, _claimed),
    "finalize": (_claims_edge, _moved),
    "release": (_claims_edge, _released),
    "run": (_edge, _ran),
    "create": (_birth_state, _moved),
    "ensure": (_birth_state, _ensured),
    "transition_many": (_many_target, _many),
    "fire_due": (_nothing, _fired),
    "claim_finalization": (_nothing, _claimed),
    "release_finalization": (_nothing, _released),
    "get": (_nothing, _read),
    "history": (_nothing, _read),
    "find": (_nothing, _read),
    "count": (_nothing, _read),
    "enabled_edges": (_nothing, _read),
    "hold": (_nothing, _held),
    "fence": (_fenced_edge, _held),
}
#: the front ends' observed methods (a unit's hold and fence are its core's operations)
UNIT_CHECKS = ("hold", "fence")
OPERATIONS = tuple(name for name in FACTS if name not in UNIT_CHECKS)

#: the operations that may take over an expired lease: observed, the row's lease is read
#: just before (one more round trip, not counted in the operation's)
CLAIMING = frozenset({"claim", "run"})


def claimed(result: Any) -> bool:
    """Did this claim's or run's result take the lease (a run's act ran)?"""
    return bool(result.claimed) if hasattr(result, "claimed") else bool(result.acted)


def observation(operation: str, machine: Machine, args: tuple[Any, ...],
                kwargs: Mapping[str, Any], result: Any, round_trips: int, duration: float,
                leased_before: bool) -> Observation:
    named, verdict = FACTS[operation]
    edge, to = named(machine, args, kwargs)
    outcome, reason, moved = verdict(result)
    # tuple.__new__: a named tuple's own __new__ is a Python frame, paid per observed call
    return _new(Observation, (operation, machine.name, moved or edge, to, outcome,
                              None if reason is None else str(reason), round_trips, duration,
                              leased_before and claimed(result)))


def failed(operation: str, machine: Machine, args: tuple[Any, ...], kwargs: Mapping[str, Any],
           exc: BaseException, round_trips: int, duration: float) -> Observation:
    edge, to = FACTS[operation][0](machine, args, kwargs)
    return Observation(operation, machine.name, edge if isinstance(edge, str) else None,
                       to if isinstance(to, str) else None, ERROR, type(exc).__name__,
                       round_trips, duration)


def watched(make: Callable[..., Op[Any]], operation: str, observer: Observer,
            machine: Machine) -> Callable[..., Op[Any]]:
    """A core operation observed by itself, whoever drives it: a unit of work runs its
    ``hold``/``fence`` on its own connection, not through the front end's runner, so the
    operation's batches are counted as it yields them."""

    def call(*args: Any, **kwargs: Any) -> Op[Any]:
        return _watch(make(*args, **kwargs), operation, observer, machine, args, kwargs)

    return call


def _watch(op: Op[Any], operation: str, observer: Observer, machine: Machine,
           args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Op[Any]:
    finish = begin(observer, operation, machine.name)
    trips = 0
    started = perf_counter()
    try:
        step = next(op)
        while True:
            if type(step) is Batch:
                trips += 1
            try:
                got = yield step
            except BaseException as exc:  # thrown in by the driver: the operation's to handle
                step = op.throw(exc)
            else:
                step = op.send(got)
    except StopIteration as stop:
        result = stop.value
    except BaseException as exc:
        end(finish, failed(operation, machine, args, kwargs, exc, trips,
                           perf_counter() - started))
        raise
    end(finish, observation(operation, machine, args, kwargs, result, trips,
                            perf_counter() - started, False))
    return result
