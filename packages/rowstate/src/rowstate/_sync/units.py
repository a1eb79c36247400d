# Generated from rowstate/_async/units.py by scripts/unasync.py: do not edit.
# Edit the source, then run `make unasync` (`make twins` checks).
"""The unit of work (:mod:`rowstate.units`), written once: ``_async/units.py`` (asyncio)
is the source, and ``_sync/units.py`` is generated from it by ``scripts/unasync.py``.
What they share is :mod:`rowstate.unitbase`.

Here too is the flow every store runs a unit in (:func:`unit_scope`: BEGIN, COMMIT or
ROLLBACK, then the after-commit callbacks; :func:`nested`: a unit opened inside one), so
that the stores, which differ in how they reach a connection, share it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from ..protocol import Batch, Door, drive
from ..results import HoldResult
from ..unitbase import (
    Params,
    Raw,
    Rows,
    UnitBase,
    as_dicts,
    bound_params,
    call_back,
)


class Unit(UnitBase):
    """One open transaction. ``raw(sql, params)`` runs a statement on the unit's
    connection and returns ``(rows, column names or None)``, errors already translated."""

    def __init__(self, dialect: str, raw: Raw, door: Door | None = None,
                 to_json: Callable[[Any], Any] = json.dumps) -> None:
        super().__init__(dialect, door, to_json)
        self._raw = raw

    def run(self, batch: Batch) -> Rows:
        """An engine batch, inside this transaction (a savepoint where it must be)."""
        self._usable()
        statements = batch.statements
        if not self._isolated(statements, batch.transaction):
            out = [self._raw(sql, params)[0] for sql, params in statements]
        else:
            with self._savepoint():
                out = [self._raw(sql, params)[0] for sql, params in statements]
        if batch.otherwise is not None and not out[-1]:  # the read explaining a refusal
            out.append(self._raw(*batch.otherwise)[0])
        return out

    def execute(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        """Run the application's own statement; its rows (if any) as dicts."""
        self._usable()
        bound = bound_params(params, self.dialect, self.to_json)
        rows, columns = self._raw(self._sql(sql), bound)
        return as_dicts(columns, rows) if columns else []

    @contextlib.contextmanager
    def _savepoint(self) -> Iterator[None]:
        name = self._next_savepoint()
        self._raw(f"SAVEPOINT {name}", ())
        try:
            yield
        except BaseException:
            self._raw(f"ROLLBACK TO SAVEPOINT {name}", ())
            self._raw(f"RELEASE SAVEPOINT {name}", ())
            raise
        self._raw(f"RELEASE SAVEPOINT {name}", ())

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[Unit]:
        """A nested unit: an exception inside rolls back only what was done inside."""
        self._usable()
        with self._savepoint():
            yield self

    def hold(self, key: object, states: str | Sequence[str], *,
             exclusive: bool = False, lifecycle: Door | None = None) -> HoldResult:
        """Lock the row and check it is in one of ``states`` with no live lease (see
        :mod:`rowstate.units`); ``exclusive``: no other unit may hold it meanwhile.
        Refused: a :class:`~rowstate.results.HoldResult` saying why, and this unit can no
        longer commit."""
        self._usable()
        got = drive(self, self._door(lifecycle).core.hold(key, states,
                                                          exclusive=exclusive))
        if not got.held:
            self._refuse(got.reason)
        return got

    def fence(self, lease: object, *, lifecycle: Door | None = None) -> HoldResult:
        """Check that ``lease`` (a claim, or the object ``run()`` hands its act) still
        holds the row: its token is still the row's, and the row is locked against a
        takeover until the unit ends. Refused (``LEASE_LOST``): the unit cannot commit."""
        self._usable()
        got = drive(self, self._door(lifecycle).core.fence(lease))
        if not got.held:
            self._refuse(got.reason)
        return got


# -- the flow of a unit, as every store runs it ---------------------------------------------


@contextlib.contextmanager
def nested(unit: Unit, door: Door | None) -> Iterator[Unit]:
    """A unit opened while one is open on the same store: a savepoint of it."""
    previous = unit.door
    if door is not None:
        unit.door = door
    try:
        with unit.savepoint():
            yield unit
    finally:
        unit.door = previous


@contextlib.contextmanager
def unit_scope(var: ContextVar[Any], unit: Unit,
               begin: str) -> Iterator[Unit]:
    """BEGIN, make the unit the store's current one, COMMIT (ROLLBACK on an exception or
    after a refused hold/fence), then the after-commit callbacks."""
    raw = unit._raw
    raw(begin, ())
    token = var.set(unit)
    committed = False
    try:
        yield unit
        if unit.refused is None:
            raw("COMMIT", ())
            committed = True
        else:
            raw("ROLLBACK", ())
    except BaseException:
        with contextlib.suppress(Exception):
            raw("ROLLBACK", ())
        raise
    finally:
        var.reset(token)
        unit.closed = True
    if committed:
        for callback in unit._after_commit:
            call_back(callback)
