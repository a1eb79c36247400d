"""A call's input, checked before any I/O: the key, the owner, event data, the from-states
of a move and the columns a caller asks back (``returning=``).

Every operation starts here, so a bad key, an unknown column or an edge the machine lacks
raises before its first yield. The answers that depend only on the (frozen) machine are
remembered in the context's memos; only an answer that passed every check is remembered.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, TypeGuard

from ..errors import InvalidTransitionError, ValidationError
from ..values import check_by, check_json, check_note, check_scalar
from .context import Context


def plain_from(from_: object) -> TypeGuard[str | tuple[str, ...] | None]:
    """Is ``from_`` a shape a plain move is remembered by (None, a state, a tuple)?"""
    return from_ is None or type(from_) is str or type(from_) is tuple


class Inputs:
    """The checks of a call's arguments, and the values dict every statement binds from."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.binding = context.binding
        self.machine = context.machine
        self.key_values = context.binding.key_values

    def values(self, key: object) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The checked key, and the values a statement on its row binds (key, clock)."""
        kv = self.key_values(key)
        if len(kv) == 1:  # the common single-column key, without a zip
            values: dict[str, Any] = {"k0": kv[0]}
        else:
            values = dict(zip(self.context.key_slots, kv, strict=True))
        if self.context.fills_now:
            values["now"] = self.context.now_value()
        return kv, values

    def owner(self, owner: object) -> Any:
        if owner is None:
            return None
        if self.binding.owner is None:
            raise ValidationError(f"{self.binding.table}: the binding has no owner column")
        if isinstance(owner, bool) or not isinstance(owner, str | int):
            raise ValidationError(f"owner must be a str or int, got {owner!r}")
        check_scalar(owner, "owner", ValidationError)
        return owner

    def holder(self, holder: object) -> str:
        """A lease holder a caller names: a non-empty string both databases store alike
        (a caller naming none gets the default holder, this host and process)."""
        if not isinstance(holder, str) or not holder:
            raise ValidationError(f"a lease holder is a non-empty string, got {holder!r}")
        check_scalar(holder, "holder", ValidationError)
        return holder

    def data(self, data: Any) -> str | None:
        """The event data's JSON text, by the JSON rules of docs/values.md (both databases
        store it alike; jsonb would refuse a nested NUL only at the write)."""
        if data is None:
            return None
        return check_json(data, "event data")

    def target(self, to: str) -> str:
        """``to`` by its current name: an old name the machine keeps as an alias
        (``Machine(aliases=)``) is read as the state it names. Every operation that takes a
        target reads it here, once, before its plan is looked up or compiled; without
        aliases it costs one attribute read."""
        aliases = self.machine.aliases
        if aliases and type(to) is str:
            return aliases.get(to, to)
        return to

    # who moved the row and why (docs/values.md): checked like every other value
    by = staticmethod(check_by)
    note = staticmethod(check_note)

    def froms(self, to: str, from_: Iterable[str] | str | None) -> tuple[str, ...]:
        """From-states of a *pure* move to ``to``: side-effecting edges go through run().

        Memoised per (to, from_) when both are hashable: the answer (or the error) depends
        only on the machine, and only an answer that passed every check is remembered."""
        memo = self.context.froms_memo
        memo_key: tuple[str, Any] | None = None
        if from_ is None or isinstance(from_, str | tuple):
            memo_key = (to, from_)
            try:
                hit = memo.get(memo_key)
            except TypeError:  # an unhashable state inside a tuple: checked below
                memo_key, hit = None, None
            if hit is not None:
                return hit
        froms = self._froms_checked(to, from_)
        if memo_key is not None:
            memo[memo_key] = froms
        return froms

    def _froms_checked(self, to: str, from_: Iterable[str] | str | None) -> tuple[str, ...]:
        machine = self.machine
        froms = machine.resolve(to, from_)
        pure = tuple(s for s in froms
                     if any(not e.lease for e in machine.edges_between(s, to)))
        if from_ is None:
            if not pure:
                raise InvalidTransitionError(
                    f"{machine.name}: every edge into {to!r} is side-effecting; use run()",
                    to_state=to,
                )
            return pure
        if len(pure) != len(froms):
            bad = [s for s in froms if s not in pure]
            raise InvalidTransitionError(
                f"{machine.name}: {bad[0]} -> {to} is side-effecting; use run()",
                from_state=bad[0], to_state=to,
            )
        return froms

    def returning(self, returning: Iterable[str] | None,
                  *needs: str | None) -> tuple[str, ...] | None:
        """The columns a caller asks the written row for (``returning=``), with the key,
        the state and what the engine itself reads (``needs``), in column order; None:
        every column. Checked before any I/O; remembered per request."""
        if returning is None:
            return None
        memo = self.context.returning_memo
        try:  # the hot path: the same tuple again
            return memo[(returning, needs)]
        except (KeyError, TypeError):  # not seen yet, or a list (checked, not remembered)
            pass
        if isinstance(returning, str):
            raise ValidationError(f"returning= is a list of column names, got {returning!r}")
        names = tuple(returning)
        if not all(isinstance(n, str) for n in names):
            raise ValidationError(f"returning= is a list of column names, got {returning!r}")
        columns = self.context.columns
        unknown = [n for n in names if n not in columns]
        if unknown:
            raise ValidationError(f"{self.binding.table}: returning= names unknown column(s) "
                                  f"{unknown}")
        b = self.binding
        wanted = {*names, *b.key, b.state_ref.column, *(n for n in needs if n)}
        cols = tuple(c for c in columns if c in wanted)
        with contextlib.suppress(TypeError):
            memo[(returning, needs)] = cols
        return cols
