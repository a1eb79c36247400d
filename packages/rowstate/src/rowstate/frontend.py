"""What both front ends share (:class:`rowstate.Lifecycle`, :class:`rowstate.AsyncLifecycle`).

The front ends are written once: ``_async/lifecycle.py`` is the source and
``_sync/lifecycle.py`` is generated from it by ``scripts/unasync.py`` (``make twins``
checks that it is current). What is not a matter of spelling is here, as pairs named in the
generator's table:

* :func:`publish_one` / :func:`apublish_one`: a publisher's awaitable is awaited by the
  async front end; the sync one calls the publisher and no more (as it always did);
* :func:`accept_act` / :func:`accept_act_async`: the sync ``run()`` refuses an async act
  (it could not await it); the async one takes both kinds.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from inspect import CO_COROUTINE
from types import FunctionType
from typing import TYPE_CHECKING, Any

from .binding import Binding
from .core import Core
from .dialects import Dialect, Postgres, SQLite
from .errors import UsageError
from .protocol import ActiveLease, Door
from .results import Event
from .units import AsyncUnit, Unit

if TYPE_CHECKING:  # types only: importing the front ends loads no driver
    from .stores import AsyncStore, Store

log = logging.getLogger("rowstate")
Publisher = Callable[[Event], Any]


def _async_function(fn: object) -> bool:
    """``inspect.iscoroutinefunction``, with a plain function's flag read directly (the
    inspect call unwraps partials and methods first: a microsecond per run())."""
    if type(fn) is FunctionType:
        return bool(fn.__code__.co_flags & CO_COROUTINE)
    return inspect.iscoroutinefunction(fn)


def accept_act(act: Callable[[ActiveLease], Any]) -> None:
    """The sync ``run()``'s check: an async act needs the async front end."""
    if _async_function(act):
        raise UsageError("an async act needs AsyncLifecycle.run")


def accept_act_async(act: Callable[[ActiveLease], Any]) -> None:
    """The async ``run()`` takes sync and async acts alike (the driver awaits the latter)."""


def publish_one(publish: Publisher, event: Event) -> None:
    publish(event)


async def apublish_one(publish: Publisher, event: Event) -> None:
    got = publish(event)
    if inspect.isawaitable(got):
        await got


def _dialect(name: str, clock: Callable[[], datetime] | None) -> Dialect:
    cls = SQLite if name == "sqlite" else Postgres
    return cls(injected_clock=clock is not None)


class FrontEnd:
    """The state both front ends hold: the store, the binding, the core built for the
    store's dialect (handed the front end as its door: acts receive leases whose
    ``atomic()`` opens a unit of work fenced by them) and the in-process publishers."""

    def __init__(self, store: Store | AsyncStore, binding: Binding, *,
                 clock: Callable[[], datetime] | None = None,
                 publishers: Sequence[Publisher] = (), door: Door) -> None:
        self.store = store
        self.binding = binding
        self.machine = binding.machine
        self.core = Core(binding, _dialect(store.dialect, clock), clock, door=door)
        self.publishers = list(publishers)

    def _in_unit(self) -> Unit | AsyncUnit | None:
        unit: Unit | AsyncUnit | None = self.store._unit.get()
        return unit

    def _row_columns(self, columns: Mapping[str, Any] | None, more: dict[str, Any],
                     by: object, note: object) -> dict[str, Any]:
        """``create``/``ensure``'s columns: ``columns=`` and the keywords, as one mapping.
        ``by=`` and ``note=`` name the birth event's who and why; on a binding with a
        column of that name, the keyword would be read one way and meant the other, so it
        is refused unless the columns are given as ``columns=`` (then the keyword is the
        event's, and the column is in the mapping)."""
        if columns is None:
            for name, given in (("by", by), ("note", note)):
                if given is not None and name in self.binding.known:
                    raise UsageError(
                        f"{self.binding.table} has a column named {name!r}: give the row's "
                        f"columns as columns={{...}} (the column's value in it); {name}= is "
                        "then the birth event's")
            return more
        if not isinstance(columns, Mapping):
            raise UsageError(f"columns= is a mapping of column names to values, got "
                             f"{columns!r}")
        clash = sorted(set(columns) & set(more))
        if clash:
            raise UsageError(f"column {clash[0]!r} given twice (columns= and a keyword)")
        return {**columns, **more}

    def schema_sql(self) -> str:
        return self.binding.schema_sql(self.core.dialect)
