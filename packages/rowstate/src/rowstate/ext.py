"""The extension protocol: what code that composes the engine's operations builds on.

An application needs :mod:`rowstate` (machines, bindings, the lifecycle, results, errors).
A library that composes core operations of its own (dataset_lifecycle's persistence
adapter, the contrib stores, docs/extending.md's example) needs more of the engine's
inside, and this module is that inside, named once and kept stable like the application
surface:

* the core and its drivers: :class:`Core` (what ``lifecycle.core`` is), :data:`Op`, the
  requests an operation yields (:class:`Batch`, :class:`Call`) and :func:`drive` /
  :func:`adrive`, which run one on a store or a unit of work;
* the statements: :class:`Compiler`, :class:`Statement`, :class:`Set`, the dialects
  (:class:`Dialect`, :class:`SQLite`, :class:`Postgres`) and the checks of identifiers and
  values they rely on (:func:`check_ident`, :func:`check_scalar`, :func:`canonical_time`);
* the condition tree, one tree with two readers: :func:`render` for SQL (on a dialect) and
  :func:`evaluate` for Python (on a :class:`RowView`), with :func:`failing` and
  :func:`lookup` / :func:`set_path` for JSON paths.

Keeping these out of ``rowstate.__all__`` keeps an application's surface small (a test pins
both lists: tests/rowstate/test_surface.py); keeping them here, rather than in the private
modules they live in, lets those modules move without breaking an extension.
"""

from __future__ import annotations

from .compiler import Compiler, Set, Statement
from .conditions import (
    And,
    Check,
    Const,
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
    SqlOut,
    Value,
    evaluate,
    failing,
    lookup,
    render,
    set_path,
)
from .core import Core
from .dialects import Dialect, Postgres, SQLite, canonical_time, check_ident
from .protocol import Batch, Call, Door, Op, adrive, drive
from .values import check_scalar

__all__ = [
    "And",
    "Batch",
    "Call",
    "Check",
    "Compiler",
    "Const",
    "Core",
    "Dialect",
    "Door",
    "In",
    "IsNull",
    "Node",
    "Not",
    "Older",
    "Op",
    "Or",
    "Postgres",
    "Ref",
    "RowView",
    "SQLite",
    "Same",
    "Set",
    "Slot",
    "SqlOut",
    "Statement",
    "Value",
    "adrive",
    "canonical_time",
    "check_ident",
    "check_scalar",
    "drive",
    "evaluate",
    "failing",
    "lookup",
    "render",
    "set_path",
]
