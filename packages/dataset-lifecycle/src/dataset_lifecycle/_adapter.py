"""The adapter path: the engine's rules on a store that only knows two plain calls.

A :class:`~._types.PersistenceAdapter` can read a record and do one conditional write of
plain ``{field: value}`` shapes. That is enough for every operation, because the rules are
not re-stated here: :class:`AdapterBackend` asks the rowstate core for the checks a write is
conditioned on (:meth:`rowstate.ext.Core.transition_checks`, the tree the SQL is rendered
from) and turns them into a condition shape:

* a check that *is* a plain shape (``state IN (...)``, ``jobId = owner``, a guard such as
  ``__DR.isJobRunning IN (NULL, false)``) is sent as that shape: the adapter's atomic
  conditional write enforces it, with no read before it;
* a check that is not (the claim's "free, ours, or older than the TTL", the LOADING block
  "no live claim") is evaluated in Python on a row just read
  (:func:`rowstate.ext.evaluate`), and the write is conditioned on the *observed*
  values of every field that check reads. If any of them moved since the read, the write
  matches nothing: a compare-and-set, so stealing a stale claim is safe (the condition holds
  the exact observed ``finalizingClaimTime``; of two stealers, one wins).

A refused write is diagnosed like the engine's: read the row, evaluate every check, report
each one that fails. If none fails, the row changed between the write and the read; the
operation is tried again against the new observation (a few times, then STATE_MISMATCH).

Time on this path is the process's clock (or the injected one): an adapter has no server
clock to ask.

The translations between the tree and plain shapes are :mod:`._shapes`; the default
adapter (``create_persistence_adapter``), the two calls over a rowstate store in SQL built
from the same condition nodes, is :mod:`._statements` and its twins
(``_async/store_adapter.py``, and ``_sync/store_adapter.py`` generated from it).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Generator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rowstate import (
    NOW,
    CheckResult,
    Event,
    FinalizationClaimResult,
    ReleaseResult,
    TransitionResult,
    UsageError,
    ValidationError,
)
from rowstate.ext import Batch, Call, Check, Core, RowView, failing, lookup

from ._machine import Reason
from ._rules import Rules, parse_time, status_of
from ._shapes import apply_update, observed, pin, to_shape

log = logging.getLogger("dataset_lifecycle")
MAX_ATTEMPTS = 5
Op = Generator[Batch | Call, Any, Any]
Key = tuple[str, str]

# -- the backend ---------------------------------------------------------------------------


class AdapterBackend:
    """The dataset primitives over a :class:`PersistenceAdapter`; see the module docstring.

    Works for bindings without a version column, a lease or fencing tokens (the dataset's):
    those writes are not plain values.
    """

    def __init__(self, rules: Rules, adapter: Any, core: Core,
                 clock: Callable[[], datetime] | None, *, asynchronous: bool = False) -> None:
        b = rules.binding
        if b.version or b.lease or (b.finalization and b.finalization.token):
            raise ValidationError("the adapter path cannot write versions, leases or tokens")
        for name in ("update_by_expression", "get_by_keys"):
            if not callable(getattr(adapter, name, None)):
                raise ValidationError(f"persistence adapter has no {name}() method")
        self.rules = rules
        self.binding = b
        self.adapter = adapter
        self.core = core
        self.clock = clock
        self.table = rules.table_name
        self.asynchronous = asynchronous

    def now(self) -> datetime:
        return self.clock() if self.clock is not None else datetime.now(UTC)

    # -- the two calls -------------------------------------------------------------------

    def _keys(self, key: Key) -> dict[str, Any]:
        return dict(zip(self.binding.key, key, strict=True))

    def _read(self, keys: dict[str, Any]) -> Any:
        return self._settled(self.adapter.get_by_keys(self.table, keys), "get_by_keys")

    def _write(self, args: tuple[dict[str, Any], dict[str, Any]]) -> Any:
        return self._settled(self.adapter.update_by_expression(self.table, args[0], args[1]),
                             "update_by_expression")

    def _settled(self, got: Any, what: str) -> Any:
        """An awaitable under the sync front end means the adapter is async: say so."""
        if not self.asynchronous and inspect.isawaitable(got):
            close = getattr(got, "close", None)
            if callable(close):
                close()  # never awaited: close it so it does not warn
            raise UsageError(f"the persistence adapter's {what}() is async: "
                             "use it with AsyncDatasetLifecycle")
        return got

    def get(self, key: Key) -> Op:
        got = yield Call(self._read, self._keys(key))
        if got is None:
            return None
        if not isinstance(got, Mapping):
            raise UsageError(f"get_by_keys must return a mapping or None, got {got!r}")
        return dict(got)

    def _update(self, update: dict[str, Any], condition: dict[str, Any]) -> Op:
        got = yield Call(self._write, (update, condition))
        return bool(got)

    # -- the compare-and-set -------------------------------------------------------------

    def _view(self, row: Mapping[str, Any], values: Mapping[str, Any]) -> RowView:
        return RowView(row, values, self.now(), parse_time)

    def _cas(self, key: Key, checks: Sequence[Check], values: Mapping[str, Any],
             update: dict[str, Any], *, observe_all: bool = False) -> Op:
        """(applied, reason, reasons, row before, row after): see the module docstring.

        ``observe_all`` reads first and conditions the write on every observed value, so the
        row before the write is known exactly (which from-state a move left)."""
        if observe_all:
            shape: dict[str, Any] = {}
            opaque = [c.node for c in checks]
        else:
            shape, opaque = to_shape(checks, values)
        keys = self._keys(key)
        row: dict[str, Any] | None = None
        need_row = bool(opaque)
        for _ in range(MAX_ATTEMPTS):
            if need_row and row is None:
                row = yield from self.get(key)
                if row is None:
                    return False, Reason.RECORD_NOT_FOUND, (Reason.RECORD_NOT_FOUND,), None, None
            if row is not None:
                bad = failing(checks, self._view(row, values))
                if bad:
                    return False, bad[0].category, _reasons(bad), row, None
            condition = {**keys, **shape}
            if row is not None:
                view = self._view(row, values)
                for node in opaque:
                    pinned = observed([node], row) if observe_all else pin(node, view, values)
                    for field, value in pinned.items():
                        if field in condition and condition[field] != value:
                            value = lookup(self.binding.ref(field), row)  # both hold: pin the row's
                        condition[field] = value
            if (yield from self._update(dict(update), condition)):
                return True, None, (), row, None if row is None else apply_update(row, update)
            row = yield from self.get(key)
            if row is None:
                return False, Reason.RECORD_NOT_FOUND, (Reason.RECORD_NOT_FOUND,), None, None
            bad = failing(checks, self._view(row, values))
            if bad:
                return False, bad[0].category, _reasons(bad), row, None
            need_row = True  # the row moved under us and still qualifies: observe, retry
        log.warning("dataset_lifecycle: the persistence adapter refused %d conditional writes "
                    "whose condition the row satisfies (%s); is its CAS honest?",
                    MAX_ATTEMPTS, self.table)
        return False, Reason.STATE_MISMATCH, (Reason.STATE_MISMATCH,), row, None

    # -- primitives ----------------------------------------------------------------------

    def entry_writes(self, to: str) -> dict[str, Any]:
        """What entering ``to`` writes, as plain values: the state, the cleared claim when
        ``to`` is not active, the binding's entry writes. The same binding data the engine
        renders into its SET clause (a test runs both paths and compares the rows)."""
        b = self.binding
        writes: dict[str, Any] = {b.state: to}
        f = b.finalization
        if f is not None and to not in b.machine.active:
            writes.update({f.holder: None, f.scope: None, f.at: None})
        for target, value in b.on_enter.get(to, {}).items():
            writes[target] = self.now() if value is NOW else value
        return writes

    def transition(self, key: Key, to: str, froms: tuple[str, ...], owner: str | None,
                   payload: Mapping[str, Any], guards: Mapping[str, Any] | None,
                   data: Any) -> Op:
        checks, values = self.core.transition_checks(key, to, from_=froms, owner=owner,
                                                     guards=guards)
        update = {**self.entry_writes(to), **self.binding.check_payload(payload)}
        # one from-state: one conditional write, no read. Several: read first and write on
        # the observed status, so the result and the event say which one the move left.
        applied, reason, reasons, before, after = yield from self._cas(
            key, checks, values, update, observe_all=len(froms) > 1)
        if not applied:
            state = status_of(before)
            return TransitionResult(False, reason, reasons, state, state, before)
        previous = status_of(before) if before is not None else froms[0]
        event = Event(self.binding.machine.name, key, None, previous, to, owner, data, None,
                      self.now())
        return TransitionResult(True, None, (), previous, to, after, event)

    def can_transition(self, key: Key, to: str, owner: str | None) -> Op:
        checks, values = self.core.transition_checks(key, to, owner=owner)
        row = yield from self.get(key)
        if row is None:
            return CheckResult(False, (Reason.RECORD_NOT_FOUND,), None)
        reasons = _reasons(failing(checks, self._view(row, values)))
        return CheckResult(not reasons, reasons, status_of(row))

    def claim(self, key: Key, holder: str, scope: str | None) -> Op:
        f = self.binding.finalization
        assert f is not None
        claim, _, values = self.core.finalization_checks(key, holder, scope)
        update = {f.holder: holder, f.scope: scope, f.at: self.now()}
        applied, _, _, before, after = yield from self._cas(key, (claim,), values, update)
        if applied:
            return FinalizationClaimResult(True, None, holder, scope, None, after)
        if before is None:
            return FinalizationClaimResult(False, Reason.RECORD_NOT_FOUND)
        return FinalizationClaimResult(False, Reason.HELD_BY_OTHER, before.get(f.holder),
                                       before.get(f.scope), None, before)

    def release(self, key: Key, holder: str, scope: str | None) -> Op:
        f = self.binding.finalization
        assert f is not None
        _, release, values = self.core.finalization_checks(key, holder, scope)
        shape, opaque = to_shape((release,), values)
        assert not opaque
        update = {f.holder: None, f.scope: None, f.at: None}
        # one write, no read: nothing held by (holder, scope) is the normal, idempotent case
        released = yield from self._update(update, {**self._keys(key), **shape})
        return ReleaseResult(released)


def _reasons(bad: Sequence[Check]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c.reason for c in bad))
