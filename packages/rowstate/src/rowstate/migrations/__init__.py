"""State renames with live rows: ``rename_state``, ``retire_state``, ``check_rows``.

A release that renames a state (or drops one) changes the machine; the rows in the table
still hold the old name. These move them, each in one set-based write with an event per
row (see :mod:`rowstate.migrations.renames` for the statement, its all-or-nothing refusal
while a lease is live, and what a rename does not do), and count what is left
(:mod:`rowstate.stale`). The worked example, a release in three steps on a table of a
million rows, is in docs/engine.md, "Renaming a state with live rows".

**One function for both front ends.** Each function takes a :class:`~rowstate.Lifecycle`
or an :class:`~rowstate.AsyncLifecycle` and hands its core operation to ``lc.do``: on the
sync twin that runs it and returns the result, on the async twin it returns the coroutine
to await. The operation is written once either way; two thin wrappers per function
(``rename_state`` / ``arename_state``) would double the public names for no behaviour of
their own, and the overloads below give each twin its exact type.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, overload

from ..stale import StaleStates, count_stale
from .renames import KEY_NOT_ASCII, RenameResult, Renames

if TYPE_CHECKING:  # types only: the front ends are what callers pass in
    from ..lifecycle import AsyncLifecycle, Lifecycle

__all__ = ["KEY_NOT_ASCII", "RenameResult", "StaleStates", "check_rows", "rename_state",
           "retire_state"]


def _renames(lc: Lifecycle | AsyncLifecycle) -> Renames:
    return Renames(lc.binding, lc.core.dialect, lc.core.clock)


@overload
def rename_state(lc: Lifecycle, old: str, new: str, *, by: str | None = None,
                 note: str | None = None) -> RenameResult: ...
@overload
def rename_state(lc: AsyncLifecycle, old: str, new: str, *, by: str | None = None,
                 note: str | None = None) -> Coroutine[Any, Any, RenameResult]: ...
def rename_state(lc: Lifecycle | AsyncLifecycle, old: str, new: str, *,
                 by: str | None = None, note: str | None = None) -> Any:
    """Every row in ``old`` (a name the machine no longer has) moved to ``new`` (one of its
    states), one event per row (edge ``rename``, actor ``by``, note "renamed from OLD to
    NEW" unless ``note`` is given); refused, nothing written, while any of them holds a live lease.
    Bad names raise :class:`~rowstate.errors.ValidationError` before any I/O."""
    op = _renames(lc).move(old, new, edge="rename", by=by, note=note,
                           said=f"renamed from {old} to {new}")
    return lc.do(op)


@overload
def retire_state(lc: Lifecycle, old: str, *, into: str, by: str | None = None,
                 note: str | None = None) -> RenameResult: ...
@overload
def retire_state(lc: AsyncLifecycle, old: str, *, into: str, by: str | None = None,
                 note: str | None = None) -> Coroutine[Any, Any, RenameResult]: ...
def retire_state(lc: Lifecycle | AsyncLifecycle, old: str, *, into: str,
                 by: str | None = None, note: str | None = None) -> Any:
    """The rows of a state the machine dropped moved ``into`` one of its states: the
    rename's statement and refusals, its events' edge ``retire`` and their note "retired
    OLD into INTO" unless ``note`` is given."""
    op = _renames(lc).move(old, into, edge="retire", by=by, note=note,
                           said=f"retired {old} into {into}")
    return lc.do(op)


@overload
def check_rows(lc: Lifecycle) -> StaleStates: ...
@overload
def check_rows(lc: AsyncLifecycle) -> Coroutine[Any, Any, StaleStates]: ...
def check_rows(lc: Lifecycle | AsyncLifecycle) -> Any:
    """The rows whose state the machine no longer has, counted per state (one GROUP BY;
    an aliased old name counts, and says what it reads as)."""
    return lc.do(count_stale(lc.binding, lc.core.dialect))
