# Generated from rowstate/_async/observing.py by scripts/unasync.py: do not edit.
# Edit the source, then run `make unasync` (`make twins` checks).
"""The front end's observed path, written once: this asyncio module is the source, and
``_sync/observing.py`` is generated from it by ``scripts/unasync.py``.

Chosen once, in the front end's ``__init__``: without an observer nothing here runs (the
methods are the class's own, and the front end's runner is the store itself). With one,
each public operation is wrapped on the instance (:func:`observe_front`; a unit of work's
``hold`` and ``fence`` on the instance's core), and the runner
the methods drive is an :class:`CountingRunner`, which counts each batch into the
cell of the operation running in this task (:data:`rowstate.observe.TRIPS`). See
:mod:`rowstate.observe` for what the observer is told.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any

from ..machine import Machine
from ..observe import (
    CLAIMING,
    OPERATIONS,
    TRIPS,
    UNIT_CHECKS,
    Observer,
    begin,
    end,
    failed,
    observation,
    watched,
)
from ..protocol import Batch, Rows, SyncRunner, drive

if TYPE_CHECKING:  # types only: importing the front ends loads no driver
    from ..core import Core


class CountingRunner:
    """The store, counting the batches (round trips) of the observed operation running."""

    __slots__ = ("store",)

    def __init__(self, store: SyncRunner) -> None:
        self.store = store

    def run(self, batch: Batch) -> Rows:
        cell = TRIPS.get()
        if cell is not None:
            cell[0] += 1
        return self.store.run(batch)


def observe_front(front: Any, observer: Observer) -> None:
    """Wrap each public operation of ``front`` (a lifecycle) on the instance."""
    for name in OPERATIONS:
        setattr(front, name, _observed(getattr(front, name), name, observer, front.machine,
                                       front.store, front.core, front.binding.lease))
    for name in UNIT_CHECKS:  # a unit's row checks: the core's own, driven by the unit
        setattr(front.core, name, watched(getattr(front.core, name), name, observer,
                                          front.machine))


def _observed(method: Callable[..., Any], name: str, observer: Observer, machine: Machine,
              store: SyncRunner, core: Core, lease: Any) -> Callable[..., Any]:
    claiming = name in CLAIMING and lease is not None

    def call(*args: Any, **kwargs: Any) -> Any:
        leased = _leased_now(store, core, lease.kind, args, kwargs) if claiming else False
        finish = begin(observer, name, machine.name)
        cell = [0]
        token = TRIPS.set(cell)
        started = perf_counter()
        try:
            result = method(*args, **kwargs)
        except BaseException as exc:
            took = perf_counter() - started
            TRIPS.reset(token)
            end(finish, failed(name, machine, args, kwargs, exc, cell[0], took))
            raise
        took = perf_counter() - started
        TRIPS.reset(token)
        end(finish, observation(name, machine, args, kwargs, result, cell[0], took, leased))
        return result

    return call


def _leased_now(store: SyncRunner, core: Core, kind: str, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> bool:
    """Does the row carry a lease just before this claim? If the claim then lands, that
    lease had expired: a takeover. (A bad key is the operation's own error to raise.)"""
    key = args[0] if args else kwargs.get("key")
    try:
        row = drive(store, core.get(key))
    except Exception:
        return False
    return row is not None and row.get(kind) is not None
