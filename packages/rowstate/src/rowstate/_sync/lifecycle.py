# Generated from rowstate/_async/lifecycle.py by scripts/unasync.py: do not edit.
# Edit the source, then run `make unasync` (`make twins` checks).
"""The front end, written once: ``_async/lifecycle.py`` (asyncio) is the source, and
``_sync/lifecycle.py`` is generated from it by ``scripts/unasync.py`` (``make twins``
checks that it is current).

Both are thin: each method builds the core operation and drives it on the store. The only
thing they add is publishing events after commit when the binding has no events table (with
an events table, the :mod:`relay <rowstate.relay>` delivers them from the outbox). What the
two share beyond spelling is :mod:`rowstate.frontend`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ..binding import Binding
from ..core.lane import drive_lane
from ..errors import UsageError
from ..frontend import FrontEnd, Publisher, accept_act, log, publish_one
from ..gauges import Gauges, read_gauges
from ..observe import Observer
from ..protocol import ActiveLease, Op, SyncRunner, drive
from ..results import (
    BulkResult,
    CheckResult,
    EdgeCheck,
    Event,
    FinalizationClaimResult,
    FireReport,
    LeaseClaim,
    ReleaseResult,
    Resolution,
    RunResult,
    TransitionResult,
)
from ..schemacheck import check_schema
from ..specs import GuardSpec
from ..stale import StaleStates
from ..units import Unit
from .observing import CountingRunner, observe_front

if TYPE_CHECKING:  # types only: importing the front ends loads no driver
    from ..stores import Store

R = TypeVar("R")


class Lifecycle(FrontEnd):
    """Durable state machine over one table: each method builds the core operation and
    drives it on the store, then publishes the event in process (see the module)."""

    store: Store

    def __init__(self, store: Store, binding: Binding, *,
                 clock: Callable[[], datetime] | None = None,
                 publishers: Sequence[Publisher] = (),
                 observer: Observer | None = None) -> None:
        super().__init__(store, binding, clock=clock, publishers=publishers, door=self)
        # chosen once (rowstate.observe): without an observer the methods are the class's
        # own and drive the store itself; with one, each is wrapped on this instance and
        # drives a runner counting its round trips
        self.observer = observer
        self.runner: SyncRunner = store
        if observer is not None:
            self.runner = CountingRunner(store)
            observe_front(self, observer)

    def create_schema(self) -> None:
        self.store.execute_script(self.schema_sql())

    def check_schema(self) -> StaleStates:
        """Raise :class:`~rowstate.errors.SchemaMismatch` if the table lacks anything; else
        the rows in states the machine no longer has (:mod:`rowstate.stale`; logged as a
        warning when there are any: a release renamed a state, rename_state moves them)."""
        return drive(self.store, check_schema(self.binding, self.core.dialect))

    def _published(self, event: Event | None) -> None:
        if event is None or self.binding.events:  # callers skip the call without publishers
            return
        unit = self._in_unit()
        if unit is not None:  # published once the unit commits, never if it rolls back
            unit.after_commit(lambda: self._publish_now(event))
            return
        self._publish_now(event)

    def _publish_now(self, event: Event) -> None:
        for publish in self.publishers:
            try:
                publish_one(publish, event)
            except Exception:  # the write committed; a publisher cannot undo it
                log.exception("rowstate: publisher failed for %s", event)

    def transition(self, key: object, to: str, *,
                   from_: Iterable[str] | str | None = None, owner: object = None,
                   payload: Mapping[str, Any] | None = None,
                   guards: GuardSpec | None = None, data: Any = None,
                   returning: Iterable[str] | None = None, by: str | None = None,
                   note: str | None = None) -> TransitionResult:
        """Move the row to ``to``; ``by`` and ``note`` (who and why) go in its event."""
        call = (self.core.transition_lane(key, to, from_, owner, returning)
                if payload is None and guards is None and data is None and by is None
                and note is None else None)
        if call is not None:
            result = drive_lane(self.runner, call)
        else:
            result = drive(self.runner, self.core.transition(
                key, to, from_=from_, owner=owner, payload=payload, guards=guards, data=data,
                returning=returning, by=by, note=note))
        if self.publishers:  # no coroutine or call per write without one
            self._published(result.event)
        return result

    def can_transition(self, key: object, to: str, *,
                       from_: Iterable[str] | str | None = None, owner: object = None,
                       guards: GuardSpec | None = None) -> CheckResult:
        return drive(self.runner, self.core.can_transition(
            key, to, from_=from_, owner=owner, guards=guards))

    def claim(self, key: object, edge: str, *, holder: str | None = None,
              owner: object = None, guards: GuardSpec | None = None,
              returning: Iterable[str] | None = None, by: str | None = None,
              note: str | None = None) -> LeaseClaim:
        return drive(self.runner, self.core.claim(key, edge, holder=holder,
                                                  owner=owner, guards=guards,
                                                  returning=returning, by=by, note=note))

    def finalize(self, key: object, claim: LeaseClaim, *,
                 payload: Mapping[str, Any] | None = None, owner: object = None,
                 data: Any = None, by: str | None = None,
                 note: str | None = None, to: str | None = None) -> TransitionResult:
        result = drive(self.runner, self.core.finalize(key, claim, payload=payload,
                                                       owner=owner, data=data, by=by,
                                                       note=note, to=to))
        if self.publishers:  # no coroutine or call per write without one
            self._published(result.event)
        return result

    def release(self, key: object, claim: LeaseClaim, *, error: str | None = None,
                ) -> ReleaseResult:
        return drive(self.runner, self.core.release(key, claim, error=error))

    def run(self, key: object, edge: str, act: Callable[[ActiveLease], Any], *,
            holder: str | None = None, owner: object = None,
            payload: Mapping[str, Any] | None = None, guards: GuardSpec | None = None,
            data: Any = None, returning: Iterable[str] | None = None,
            by: str | None = None, note: str | None = None) -> RunResult:
        accept_act(act)
        result = drive(self.runner, self.core.run(
            key, edge, act, holder=holder, owner=owner, payload=payload, guards=guards,
            data=data, returning=returning, by=by, note=note))
        if self.publishers:  # no coroutine or call per write without one
            self._published(result.event)
        return result

    def claim_finalization(self, key: object, holder: str, scope: str | None = None,
                           *, returning: Iterable[str] | None = None,
                           ) -> FinalizationClaimResult:
        return drive(self.runner, self.core.claim_finalization(
            key, holder, scope, returning=returning))

    def release_finalization(self, key: object, holder: str,
                             scope: str | None = None) -> ReleaseResult:
        return drive(self.runner, self.core.release_finalization(key, holder, scope))

    def get(self, key: object) -> dict[str, Any] | None:
        return drive(self.runner, self.core.get(key))

    def state(self, key: object) -> str | None:
        row = self.get(key)
        return None if row is None else self.core.state_of(row)

    def state_of(self, row: Mapping[str, Any]) -> str | None:
        """The state of a row the caller read itself (a join, a list page): the state
        column, or while it is NULL the state derived from the binding's ``derived``
        column; None when neither says. No I/O, so a reader of many rows need not fetch
        each one again through :meth:`get`."""
        return self.core.state_of(row)

    def history(self, key: object) -> list[Event]:
        return drive(self.runner, self.core.history(key))

    def resolve(self, key: object, to: str, *,
                from_: Iterable[str] | str | None = None, since: int | None = None,
                by: str | None = None) -> Resolution:
        """What became of a move whose call raised :class:`~rowstate.OutcomeUnknown`: read
        from the row and its events (one round trip, on the primary), ``applied`` or not.
        ``since``: the row's version read before the call, for an exact answer when the row
        may have moved on; ``by``: the ``by=`` the call gave, to tell its move from a
        racer's. A ``transition_many`` is resolved key by key; a leased act by its edge's
        ``to`` and ``from_``. See docs/engine.md, "When a COMMIT gets no answer"."""
        return drive(self.runner, self.core.resolve(key, to, from_=from_,
                                                    since=since, by=by))

    def gauges(self) -> Gauges:
        """The database's figures now, in one round trip: rows per state, the outbox's lag,
        overdue timers (:mod:`rowstate.gauges`; ``PrometheusObserver.set_gauges``)."""
        return drive(self.store, read_gauges(self.binding, self.core.dialect,
                                             self.core.clock))

    # -- the application door -----------------------------------------------------------

    def do(self, op: Op[R]) -> R:
        """Run a core operation (``self.core.<op>(...)``) on this store: the seam an app
        that composes its own operations builds on (docs/extending.md)."""
        return drive(self.store, op)

    @contextlib.contextmanager
    def atomic(self, *, fence: Any = None, connection: Any = None,
               session: Any = None) -> Iterator[Unit]:
        """A unit of work on this lifecycle's store (:mod:`rowstate.units`); with
        ``fence=lease``, fenced by that lease at once. ``connection=``/``session=``: inside
        the caller's open transaction, on a store that can join one
        (:mod:`rowstate.contrib.sqlalchemy`)."""
        join = {name: value for name, value in (("connection", connection),
                                                ("session", session)) if value is not None}
        if join and not getattr(self.store, "joins_transactions", False):
            raise UsageError(f"{type(self.store).__name__} cannot join a caller's transaction "
                             "(connection=, session=): rowstate.contrib.sqlalchemy's stores can")
        with self.store.atomic(door=self, **join) as tx:
            if fence is not None:
                tx.fence(fence)
            yield tx

    def create(self, key: object, *, state: str | None = None, data: Any = None,
               by: str | None = None, note: str | None = None,
               columns: Mapping[str, Any] | None = None,
               **more: Any) -> TransitionResult:
        """The row with its columns (keywords, or ``columns=`` as one mapping: a column
        named ``by``, ``note``, ``state`` or ``data`` can only go there), in ``state``
        (default the machine's initial); ``data``, ``by`` and ``note``: its birth event's,
        as a transition's."""
        cols = self._row_columns(columns, more, by, note)
        result = drive(self.runner, self.core.create(key, state=state, columns=cols,
                                                     data=data, by=by, note=note))
        if self.publishers:
            self._published(result.event)
        return result

    def ensure(self, key: object, *, state: str | None = None, data: Any = None,
               by: str | None = None, note: str | None = None,
               columns: Mapping[str, Any] | None = None,
               **more: Any) -> dict[str, Any]:
        cols = self._row_columns(columns, more, by, note)
        return drive(self.runner, self.core.ensure(key, state=state, columns=cols,
                                                   data=data, by=by, note=note))

    def enabled_edges(self, key: object, *,
                      owner: object = None) -> tuple[EdgeCheck, ...]:
        return drive(self.runner, self.core.enabled_edges(key, owner=owner))

    def transition_many(self, to: str, *, keys: Iterable[object] | None = None,
                        where: GuardSpec | None = None,
                        from_: Iterable[str] | str | None = None, owner: object = None,
                        guards: GuardSpec | None = None, data: Any = None,
                        limit: int = 10_000, by: str | None = None,
                        note: str | None = None) -> BulkResult:
        result = drive(self.runner, self.core.transition_many(
            to, keys=keys, where=where, from_=from_, owner=owner, guards=guards, data=data,
            limit=limit, by=by, note=note))
        if self.publishers:
            for event in result.events:
                self._published(event)
        return result

    def find(self, *, state: str | Sequence[str] | None = None,
             where: GuardSpec | None = None,
             order_by: str | Sequence[str] | None = None,
             limit: int = 100) -> list[dict[str, Any]]:
        return drive(self.runner, self.core.find(state=state, where=where,
                                                 order_by=order_by, limit=limit))

    def count(self, *, state: str | Sequence[str] | None = None,
              where: GuardSpec | None = None) -> int:
        return drive(self.runner, self.core.count(state=state, where=where))

    def fire_due(self, *, acts: Mapping[str, Callable[[ActiveLease], Any]] | None = None,
                 notify: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
                 limit: int = 100, holder: str | None = None,
                 now: datetime | None = None, data: Any = None, by: str | None = None,
                 note: str | None = None) -> FireReport:
        return drive(self.runner, self.core.fire_due(acts=acts, notify=notify,
                                                     limit=limit, holder=holder, now=now,
                                                     data=data, by=by, note=note))
