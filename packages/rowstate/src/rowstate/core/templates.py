"""Templates: a statement with its constants already in place.

A lane's write (:mod:`rowstate.core.lane`), the read that explains its refusal, a plain
claim and a finalization claim are bound from a :class:`Template`: one list copy with the
call's own values (key, clock, owner, fence, holder) written in where they go, instead of a
values dict and a lookup per parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..compiler import Statement
from ..conditions import Const
from ..outbox import row_key

# what a dynamic parameter of a lane reads (a key column's index is >= 0)
_NOW, _OWNER, _FENCE, _ROW_KEY, _EV_OWNER, _HOLDER = -1, -2, -3, -4, -5, -6
_DYNAMIC = {"now": _NOW, "owner": _OWNER, "fence": _FENCE, "row_key": _ROW_KEY,
            "ev_owner": _EV_OWNER, "holder": _HOLDER}
_NAMED = -10  # and below: the template's own named slots


class Template:
    """A statement with its constants in place: binding it copies one list and writes in
    the call's own values (key, clock, owner, fence, holder) where they go."""

    __slots__ = ("dynamic", "keys_only", "now_value", "one_key_at", "params", "sql")

    def __init__(self, sql: str, params: list[Any], dynamic: tuple[tuple[int, int], ...],
                 now_value: Callable[[], Any]) -> None:
        self.sql, self.params, self.dynamic, self.now_value = sql, params, dynamic, now_value
        # a read by key: its parameters are the key itself
        self.keys_only = dynamic == tuple((i, i) for i in range(len(params)))
        # a plain move on a one-column key: the key is its only value (the hottest bind)
        self.one_key_at = dynamic[0][0] if len(dynamic) == 1 and dynamic[0][1] == 0 else -1

    @classmethod
    def of(cls, stmt: Statement, static: dict[str, Any], now_value: Callable[[], Any],
           clock: bool = False, named: tuple[str, ...] = ()) -> Template | None:
        """None when the statement names a value a template does not fill (a guard's, a
        JSON slot the dialects adapt): the general path. Without a caller's ``clock`` the
        "now" parameter is a constant (SQLite's store fills it in). ``named``: the call's
        own slots beyond the usual ones, given to :meth:`bind` in this order."""
        params: list[Any] = []
        dynamic: list[tuple[int, int]] = []
        for pos, p in enumerate(stmt.params):
            if isinstance(p, Const):
                params.append(p.value)
            elif p.json:
                return None
            elif p.name == "now" and not clock:
                params.append(now_value())
            elif p.name in named:
                params.append(None)
                dynamic.append((pos, _NAMED - named.index(p.name)))
            elif p.name in _DYNAMIC:  # before the constants: ev_owner's is a default
                params.append(None)
                dynamic.append((pos, _DYNAMIC[p.name]))
            elif p.name in static:
                params.append(static[p.name])
            elif p.name.startswith("k") and p.name[1:].isdigit():
                params.append(None)
                dynamic.append((pos, int(p.name[1:])))
            else:
                return None
        return cls(stmt.sql, params, tuple(dynamic), now_value)

    def bind(self, kv: tuple[Any, ...], owner: Any = None, fence: Any = None,
             holder: Any = None, named: tuple[Any, ...] = ()) -> list[Any]:
        if self.keys_only:
            return list(kv)
        params = self.params.copy()
        if self.one_key_at >= 0:
            params[self.one_key_at] = kv[0]
            return params
        for pos, what in self.dynamic:
            if what >= 0:
                params[pos] = kv[what]
            elif what == _NOW:
                params[pos] = self.now_value()
            elif what == _OWNER:
                params[pos] = owner
            elif what == _FENCE:
                params[pos] = fence
            elif what == _ROW_KEY:
                params[pos] = row_key(kv)
            elif what == _HOLDER:
                params[pos] = holder
            elif what <= _NAMED:
                params[pos] = named[_NAMED - what]
            else:
                params[pos] = None if owner is None else str(owner)
        return params
