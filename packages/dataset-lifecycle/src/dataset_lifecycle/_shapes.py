"""The condition tree as a plain ``{field: value}`` shape, and back from a row.

The adapter path (:mod:`._adapter`) sends each check the rowstate core builds as the plain
shape a :class:`~._types.PersistenceAdapter` understands when the check *is* one, and
otherwise pins it to the values observed on a row just read; these are those translations,
pure functions of the tree and the row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rowstate import ValidationError
from rowstate.ext import (
    And,
    Check,
    In,
    IsNull,
    Node,
    Not,
    Older,
    Or,
    Ref,
    RowView,
    Same,
    Slot,
    Value,
    evaluate,
    lookup,
    set_path,
)

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
    the engine's rule: :func:`rowstate.ext.set_path`)."""
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


