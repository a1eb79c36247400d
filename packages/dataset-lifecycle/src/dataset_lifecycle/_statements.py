"""The default persistence adapter's SQL: plain shapes as statements for one binding.

:class:`ShapeStatements` turns the two calls of a :class:`~._types.PersistenceAdapter`
(``update_by_expression``, ``get_by_keys``) into statements; :class:`StoreAdapterBase` is
what the two store adapters (``_async/store_adapter.py``, the source, and
``_sync/store_adapter.py``, generated) share.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rowstate import AsyncStore, Binding, DefinitionError, Store, ValidationError
from rowstate.ext import (
    Check,
    Compiler,
    Dialect,
    In,
    IsNull,
    Postgres,
    Ref,
    Set,
    Slot,
    SQLite,
    SqlOut,
    Statement,
    Value,
    canonical_time,
    check_scalar,
)

from ._rules import Rules, parse_time


class ShapeStatements:
    """Plain shapes to SQL for one binding and dialect.

    Field names are checked against the binding (only checked names reach SQL text; a
    dotted name must be inside a JSON column), values are always bound parameters, the full
    key must be in every condition (one row, never a bulk update), and statements are cached
    per shape so the SQL text of one shape is byte-identical across calls.
    """

    def __init__(self, binding: Binding, dialect: Dialect) -> None:
        self.binding = binding
        self.dialect = dialect
        self.compiler = Compiler(binding, dialect)
        self.times = {binding.finalization.at} if binding.finalization else set()
        out = SqlOut()
        where = self.compiler.key_where(None, out)
        compiler = self.compiler
        self._read = Statement(
            f"SELECT {compiler.cols(None)} FROM {compiler.table} WHERE {where}",
            tuple(out.params))
        self._cache: dict[tuple[Any, ...], Statement] = {}

    def _key_values(self, fields: Mapping[str, Any], values: dict[str, Any]) -> None:
        missing = [k for k in self.binding.key if k not in fields]
        if missing:
            raise ValidationError(f"the shape must hold the whole key; missing {missing}")
        for i, v in enumerate(self.binding.key_values({k: fields[k] for k in self.binding.key})):
            values[f"k{i}"] = v

    def _compare_value(self, value: Any, ref: Ref) -> Any:
        if isinstance(value, datetime):
            return canonical_time(value) if isinstance(self.dialect, SQLite) else value
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
                (f, w) for f, w in condition.items() if f not in self.binding.key):
            ref = self.binding.ref(field)
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
            ref = self.binding.ref(field)
            if ref.column in self.binding.key:
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
                sets.append(self.compiler.set_null(ref.column))
                usig.append((field, "null"))
            else:
                values[name] = self.dialect.payload_value(value)
                sets.append(self.compiler.set_value(ref.column, Slot(name)))
                usig.append((field, "value"))
        for column, writes in by_json.items():
            out = SqlOut()
            try:
                expr = self.dialect.json_set(self.dialect.column(column, None), writes, out)
            except DefinitionError as exc:  # the update's own fields overlap (a and a.b)
                raise ValidationError(str(exc)) from None
            sets.append((column, expr, tuple(out.params)))
        key = (tuple(csig), tuple(usig))
        stmt = self._cache.get(key)
        if stmt is None:
            stmt = self.compiler.conditional_update(checks, sets)
            self._cache[key] = stmt
        return stmt.bind(self.dialect, values)

    def read(self, keys: Mapping[str, Any]) -> tuple[str, list[Any]]:
        if not isinstance(keys, Mapping):
            raise ValidationError(f"keys must be a mapping, got {keys!r}")
        values: dict[str, Any] = {}
        self._key_values(keys, values)
        return self._read.bind(self.dialect, values)

    def record(self, rows: list[tuple[Any, ...]]) -> dict[str, Any] | None:
        """The first row as plain data (JSON decoded, times as datetimes, on SQLite too)."""
        if not rows:
            return None
        cols = self.compiler.columns
        out = dict(zip(cols, rows[0][: len(cols)], strict=True))
        if isinstance(self.dialect, SQLite):
            for c in self.binding.json_columns:
                if isinstance(out.get(c), str):
                    out[c] = json.loads(out[c])
            for c in self.times:
                out[c] = parse_time(out.get(c))
        return out


def _dialect(store: Store | AsyncStore) -> Dialect:
    return SQLite() if store.dialect == "sqlite" else Postgres()


class StoreAdapterBase:
    """What both store adapters hold: the store, its statements, the table it serves
    (``owns_store``: opened for this adapter, so ``close()`` closes it)."""

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


