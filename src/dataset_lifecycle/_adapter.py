"""The adapter path: the engine's rules on a store that only knows two plain calls.

A :class:`~._types.PersistenceAdapter` can read a record and do one conditional write of
plain ``{field: value}`` shapes. That is enough for every operation, because the rules are
not re-stated here: :class:`AdapterBackend` asks the rowstate core for the checks a write is
conditioned on (:meth:`rowstate.core.Core.transition_checks`, the tree the SQL is rendered
from) and turns them into a condition shape:

* a check that *is* a plain shape (``state IN (...)``, ``jobId = owner``, a guard such as
  ``__DR.isJobRunning IN (NULL, false)``) is sent as that shape: the adapter's atomic
  conditional write enforces it, with no read before it;
* a check that is not (the claim's "free, ours, or older than the TTL", the LOADING block
  "no live claim") is evaluated in Python on a row just read
  (:func:`rowstate.conditions.evaluate`), and the write is conditioned on the *observed*
  values of every field that check reads. If any of them moved since the read, the write
  matches nothing: a compare-and-set, so stealing a stale claim is safe (the condition holds
  the exact observed ``finalizingClaimTime``; of two stealers, one wins).

A refused write is diagnosed like the engine's: read the row, evaluate every check, report
each one that fails. If none fails, the row changed between the write and the read; the
operation is tried again against the new observation (a few times, then STATE_MISMATCH).

Time on this path is the process's clock (or the injected one): an adapter has no server
clock to ask.

:class:`StorePersistenceAdapter` is the default adapter (``create_persistence_adapter``):
the two calls over a rowstate store, in SQL built from the same condition nodes.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Generator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rowstate import (
    NOW,
    And,
    AsyncStore,
    Batch,
    Binding,
    Call,
    Check,
    CheckResult,
    Compiler,
    Core,
    DefinitionError,
    Dialect,
    Event,
    FinalizationClaimResult,
    In,
    IsNull,
    Node,
    Not,
    Older,
    Or,
    Postgres,
    Ref,
    ReleaseResult,
    RowView,
    Same,
    Set,
    Slot,
    SQLite,
    SqlOut,
    Statement,
    Store,
    TransitionResult,
    UsageError,
    ValidationError,
    Value,
    canonical_time,
    check_scalar,
    evaluate,
    failing,
    lookup,
    set_path,
)

from ._machine import Reason
from ._rules import Rules, parse_time, status_of

log = logging.getLogger("dataset_lifecycle")
MAX_ATTEMPTS = 5
Op = Generator[Batch | Call, Any, Any]
Key = tuple[str, str]

# -- the condition tree as a plain shape ---------------------------------------------------


def _resolve(value: Value, values: Mapping[str, Any]) -> Any:
    return values[value.name] if isinstance(value, Slot) else value.value


def _node_shape(node: Node, values: Mapping[str, Any]) -> dict[str, Any] | None:
    """The shape that means exactly ``node``, or None when the shapes cannot say it."""
    match node:
        case In(ref, vals, nullable) if ref.derived is None:
            accepted = [_resolve(v, values) for v in vals] + ([None] if nullable else [])
            if not accepted:
                return None
            return {ref.dotted: accepted[0] if len(accepted) == 1 else accepted}
        case IsNull(ref) if ref.derived is None:
            return {ref.dotted: None}
        case Same(ref, value) if ref.derived is None:
            return {ref.dotted: _resolve(value, values)}
        case And(parts):
            merged: dict[str, Any] = {}
            for part in parts:
                got = _node_shape(part, values)
                if got is None or merged.keys() & got.keys():
                    return None
                merged.update(got)
            return merged
    return None


def to_shape(checks: Sequence[Check], values: Mapping[str, Any],
             ) -> tuple[dict[str, Any], list[Node]]:
    """(the condition shape of the expressible checks, the checks that need a read)."""
    shape: dict[str, Any] = {}
    opaque: list[Node] = []
    for check in checks:
        got = _node_shape(check.node, values)
        if got is None or shape.keys() & got.keys():
            opaque.append(check.node)
        else:
            shape.update(got)
    return shape, opaque


def _refs(node: Node) -> list[Ref]:
    match node:
        case In(ref, _, _) | IsNull(ref) | Same(ref, _) | Older(ref, _, _):
            return [ref]
        case Or(parts) | And(parts):
            return [r for p in parts for r in _refs(p)]
        case Not(part):
            return _refs(part)
    raise TypeError(f"not a condition node: {node!r}")  # pragma: no cover


def observed(nodes: Sequence[Node], row: Mapping[str, Any]) -> dict[str, Any]:
    """Equalities on the values the nodes read, as the row has them: the CAS condition."""
    out: dict[str, Any] = {}
    for node in nodes:
        for ref in _refs(node):
            value = lookup(ref, row)
            if isinstance(value, list | tuple | dict):
                raise ValidationError(f"{ref.dotted}: a structured value cannot be "
                                      "compared by a persistence adapter")
            out[ref.dotted] = value
    return out


def pin(node: Node, view: RowView, values: Mapping[str, Any]) -> dict[str, Any]:
    """A condition shape under which ``node`` (true on ``view.row``) stays true: the node
    itself when it is a plain shape; for ``Or``, only the branch that holds (a free claim is
    pinned as "holder IS NULL", a redelivery as "same holder and scope", a stale claim on
    its exact claim time); otherwise the observed value of every field it reads."""
    shape = _node_shape(node, values)
    if shape is not None:
        return shape
    match node:
        case Or(parts):
            for part in parts:
                if evaluate(part, view):
                    return pin(part, view, values)
        case And(parts):
            merged: dict[str, Any] = {}
            for part in parts:
                got = pin(part, view, values)
                if any(k in merged and merged[k] != v for k, v in got.items()):
                    return observed([node], view.row)
                merged.update(got)
            return merged
    return observed([node], view.row)


def apply_update(row: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` as it is after ``update`` (dotted fields set inside their JSON column, by
    the engine's rule: :func:`rowstate.conditions.set_path`)."""
    out = dict(row)
    for field, value in update.items():
        column, *path = field.split(".")
        if not path:
            out[column] = value
            continue
        doc = out.get(column)
        if isinstance(doc, str | bytes):
            try:
                doc = json.loads(doc)
            except ValueError:  # a decoded JSON string, not JSON text: not an object
                doc = None
        out[column] = set_path(doc, path, value)
    return out


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
        self.b = b
        self.adapter = adapter
        self.core = core
        self.clock = clock
        self.table = rules.table_name
        self.asynchronous = asynchronous

    def now(self) -> datetime:
        return self.clock() if self.clock is not None else datetime.now(UTC)

    # -- the two calls -------------------------------------------------------------------

    def _keys(self, key: Key) -> dict[str, Any]:
        return dict(zip(self.b.key, key, strict=True))

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
                            value = lookup(self.b.ref(field), row)  # both hold: pin the row's
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
        b = self.b
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
        update = {**self.entry_writes(to), **self.b.check_payload(payload)}
        # one from-state: one conditional write, no read. Several: read first and write on
        # the observed status, so the result and the event say which one the move left.
        applied, reason, reasons, before, after = yield from self._cas(
            key, checks, values, update, observe_all=len(froms) > 1)
        if not applied:
            state = status_of(before)
            return TransitionResult(False, reason, reasons, state, state, before)
        previous = status_of(before) if before is not None else froms[0]
        event = Event(self.b.machine.name, key, None, previous, to, owner, data, None,
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
        f = self.b.finalization
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
        f = self.b.finalization
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


# -- the default adapter: plain shapes as SQL ----------------------------------------------


class ShapeStatements:
    """Plain shapes to SQL for one binding and dialect.

    Field names are checked against the binding (only checked names reach SQL text; a
    dotted name must be inside a JSON column), values are always bound parameters, the full
    key must be in every condition (one row, never a bulk update), and statements are cached
    per shape so the SQL text of one shape is byte-identical across calls.
    """

    def __init__(self, binding: Binding, dialect: Dialect) -> None:
        self.b = binding
        self.d = dialect
        self.c = Compiler(binding, dialect)
        self.times = {binding.finalization.at} if binding.finalization else set()
        out = SqlOut()
        where = self.c.key_where(None, out)
        self._read = Statement(f"SELECT {self.c.cols(None)} FROM {self.c.table} WHERE {where}",
                               tuple(out.params))
        self._cache: dict[tuple[Any, ...], Statement] = {}

    def _key_values(self, fields: Mapping[str, Any], values: dict[str, Any]) -> None:
        missing = [k for k in self.b.key if k not in fields]
        if missing:
            raise ValidationError(f"the shape must hold the whole key; missing {missing}")
        for i, v in enumerate(self.b.key_values({k: fields[k] for k in self.b.key})):
            values[f"k{i}"] = v

    def _compare_value(self, value: Any, ref: Ref) -> Any:
        if isinstance(value, datetime):
            return canonical_time(value) if isinstance(self.d, SQLite) else value
        check_scalar(value, f"condition on {ref.dotted}", ValidationError)
        return value

    def update(self, update: Mapping[str, Any], condition: Mapping[str, Any],
               ) -> tuple[str, list[Any]]:
        if not isinstance(update, Mapping) or not isinstance(condition, Mapping) or not update:
            raise ValidationError("update and condition must be mappings; update not empty")
        values: dict[str, Any] = {}
        self._key_values(condition, values)
        csig: list[Any] = []
        checks: list[Check] = []
        for i, (field, want) in enumerate(
                (f, w) for f, w in condition.items() if f not in self.b.key):
            ref = self.b.ref(field)
            json_ = bool(ref.path)
            if want is None:
                checks.append(Check(IsNull(ref), "", ""))
                csig.append((field, "null"))
                continue
            accepted = list(want) if isinstance(want, list | tuple) else [want]
            given = [v for v in accepted if v is not None]
            if not accepted:
                raise ValidationError(f"condition on {field}: an empty list matches nothing")
            slots = []
            for j, v in enumerate(given):
                values[f"c{i}_{j}"] = self._compare_value(v, ref)
                slots.append(Slot(f"c{i}_{j}", json=json_))
            checks.append(Check(In(ref, tuple(slots), len(given) < len(accepted)), "", ""))
            csig.append((field, len(given), len(given) < len(accepted)))
        usig: list[Any] = []
        sets: list[Set] = []
        by_json: dict[str, list[tuple[tuple[str, ...], Value]]] = {}
        for j, (field, value) in enumerate(update.items()):
            ref = self.b.ref(field)
            if ref.column in self.b.key:
                raise ValidationError(f"{field}: key columns cannot be updated")
            name = f"u{j}"
            if ref.path:
                try:
                    values[name] = json.dumps(value, allow_nan=False)
                except (TypeError, ValueError) as exc:
                    raise ValidationError(f"{field}: not a JSON value: {exc}") from None
                by_json.setdefault(ref.column, []).append((ref.path, Slot(name)))
                usig.append((field, "json"))
            elif value is None:
                sets.append(self.c.set_null(ref.column))
                usig.append((field, "null"))
            else:
                values[name] = self.d.payload_value(value)
                sets.append(self.c.set_value(ref.column, Slot(name)))
                usig.append((field, "value"))
        for column, writes in by_json.items():
            out = SqlOut()
            try:
                expr = self.d.json_set(self.d.column(column, None), writes, out)
            except DefinitionError as exc:  # the update's own fields overlap (a and a.b)
                raise ValidationError(str(exc)) from None
            sets.append((column, expr, tuple(out.params)))
        key = (tuple(csig), tuple(usig))
        stmt = self._cache.get(key)
        if stmt is None:
            stmt = self.c.conditional_update(checks, sets)
            self._cache[key] = stmt
        return stmt.bind(self.d, values)

    def read(self, keys: Mapping[str, Any]) -> tuple[str, list[Any]]:
        if not isinstance(keys, Mapping):
            raise ValidationError(f"keys must be a mapping, got {keys!r}")
        values: dict[str, Any] = {}
        self._key_values(keys, values)
        return self._read.bind(self.d, values)

    def record(self, rows: list[tuple[Any, ...]]) -> dict[str, Any] | None:
        """The first row as plain data (JSON decoded, times as datetimes, on SQLite too)."""
        if not rows:
            return None
        cols = self.c.columns
        out = dict(zip(cols, rows[0][: len(cols)], strict=True))
        if isinstance(self.d, SQLite):
            for c in self.b.json_columns:
                if isinstance(out.get(c), str):
                    out[c] = json.loads(out[c])
            for c in self.times:
                out[c] = parse_time(out.get(c))
        return out


def _dialect(store: Store | AsyncStore) -> Dialect:
    return SQLite() if store.dialect == "sqlite" else Postgres()


class _StoreAdapterBase:
    def __init__(self, store: Any, rules: Rules, *, owns_store: bool) -> None:
        self.store = store
        self.rules = rules
        self.owns_store = owns_store
        self.sql = ShapeStatements(rules.binding, _dialect(store))
        self._tables = {rules.table_name, rules.binding.table}

    def _table(self, table: str) -> None:
        if table not in self._tables:
            raise ValidationError(f"this adapter serves {self.rules.binding.table}, "
                                  f"not {table!r}")


class StorePersistenceAdapter(_StoreAdapterBase):
    """The default :class:`PersistenceAdapter`: the two calls over a rowstate store."""

    store: Store

    def update_by_expression(self, table: str, update: Mapping[str, Any],
                             condition: Mapping[str, Any]) -> bool:
        self._table(table)
        rows = self.store.run(Batch((self.sql.update(update, condition),)))
        return bool(rows[0])

    def get_by_keys(self, table: str, keys: Mapping[str, Any]) -> dict[str, Any] | None:
        self._table(table)
        return self.sql.record(self.store.run(Batch((self.sql.read(keys),)))[0])

    def close(self) -> None:
        if self.owns_store:
            self.store.close()


class AsyncStorePersistenceAdapter(_StoreAdapterBase):
    """:class:`StorePersistenceAdapter` for asyncio: the same calls, as coroutines."""

    store: AsyncStore

    async def update_by_expression(self, table: str, update: Mapping[str, Any],
                                   condition: Mapping[str, Any]) -> bool:
        self._table(table)
        rows = await self.store.run(Batch((self.sql.update(update, condition),)))
        return bool(rows[0])

    async def get_by_keys(self, table: str, keys: Mapping[str, Any],
                          ) -> dict[str, Any] | None:
        self._table(table)
        return self.sql.record((await self.store.run(Batch((self.sql.read(keys),))))[0])

    async def close(self) -> None:
        if self.owns_store:
            await self.store.close()


__all__ = [
    "AdapterBackend",
    "AsyncStorePersistenceAdapter",
    "ShapeStatements",
    "StorePersistenceAdapter",
    "apply_update",
    "observed",
    "to_shape",
]
