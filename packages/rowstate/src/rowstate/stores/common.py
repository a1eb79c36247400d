"""What every store shares: the statement counter, per-thread connections, the unit's
context variable and the refusal of a script inside a unit. The unit of work's flow
(BEGIN, COMMIT or ROLLBACK, the after-commit callbacks) that both twins of every store run
is written once with the units (``rowstate._async.units``, the sync twin generated from it
by ``scripts/unasync.py``). No driver is imported here."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Generic, Protocol, TypeVar

from ..errors import UnitRefusedError
from ..protocol import Rows as Rows  # the stores' name for a batch's rows


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class StatementCounter:
    """Counts statements sent to the database: the proof of "one round trip"."""

    def __init__(self) -> None:
        self.statements = 0


class ThreadConnections(Generic[C]):
    """One connection per calling thread, opened on first use (and again once ``usable``
    says it no longer is); ``close()`` closes every one it opened."""

    def __init__(self, open_: Callable[[], C],
                 usable: Callable[[C], bool] | None = None) -> None:
        self._open: Callable[[], C] = open_
        self._usable: Callable[[C], bool] | None = usable
        self._local = threading.local()
        self._opened: list[C] = []
        self._guard = threading.Lock()

    def get(self) -> C:
        conn: C | None = getattr(self._local, "conn", None)
        if conn is None or (self._usable is not None and not self._usable(conn)):
            conn = self._open()
            self._local.conn = conn
            with self._guard:
                if self._usable is not None:  # forget the ones that went bad
                    self._opened = [c for c in self._opened if self._usable(c)]
                self._opened.append(conn)
        return conn

    def opened(self) -> list[C]:
        with self._guard:
            return list(self._opened)

    def close(self) -> None:
        with self._guard:
            conns, self._opened = self._opened, []
        for conn in conns:
            conn.close()
        self._local = threading.local()


# -- units of work (rowstate.units): the flow both twins of every store share -------------

Raw = Callable[[str, Any], tuple[list[Any], Any]]


def _unit_var(store: object) -> ContextVar[Any]:
    return ContextVar(f"rowstate-unit-{id(store)}", default=None)


def _no_script_in_unit(var: ContextVar[Any]) -> None:
    if var.get() is not None:
        raise UnitRefusedError("execute_script cannot run inside a unit of work (SQLite's "
                               "executescript commits first)", reason="SCRIPT_IN_UNIT")
