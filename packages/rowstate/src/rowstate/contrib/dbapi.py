"""The engine's statements on a driver connection that another library manages (a
SQLAlchemy pool's, Django's): what the contrib stores share.

The engine's SQL is written for the driver (``?`` for sqlite3 and aiosqlite, ``%s`` for
psycopg 3), so it runs on the driver connection itself, below the other library's cursor
wrappers (Django's SQLite wrapper rewrites ``%s`` to ``?``; SQLAlchemy's ``text()`` has
placeholders of its own): one statement is one round trip, exactly as in our own stores.
A driver's error is translated by the stores' own translators (:func:`sqlite_error`,
psycopg's ``_translate``), not by copies of them.

Here are the pieces both contrib stores compose: a ``raw`` per dialect (one statement, its
rows, its error translated), a batch run on one connection (:func:`run_batch`), and a unit
*joined* into the owner's open transaction (:func:`joined`): a SAVEPOINT in it, released
when the unit ends well, rolled back to on an exception or a refused hold or fence; its
after-commit callbacks are handed to ``on_kept``, which queues them for the owner's COMMIT.

Twins kept by hand: :func:`run_batch` / :func:`arun_batch` and :func:`joined` /
:func:`ajoined` are ten lines each, side by side; generating them would need a module pair
of their own for forty lines. No psycopg name is imported at module level: a SQLite-only
program loads no PostgreSQL driver.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from ..dialects import canonical_time
from ..errors import RowstateError, StoreError, UsageError
from ..protocol import Batch
from ..stores.common import Raw, Rows, StatementCounter
from ..stores.sqlite import _sqlite_error as sqlite_error
from ..stores.sqlite import _sqlite_raw, _with_now
from ..units import AsyncUnit, Unit

AsyncRaw = Callable[[str, Any], Awaitable[tuple[list[Any], Any]]]
Callbacks = list[Callable[[], Any]]

#: the savepoint a joined unit lives in (its own nested units take rowstate_spN)
JOINED = "rowstate_joined"


def dialect_name(name: str, driver: str, drivers: Mapping[str, tuple[str, ...]]) -> str:
    """``name`` ("sqlite" / "postgresql") when its ``driver`` is one the engine's SQL is
    written for, else a :class:`UsageError` saying which ones are."""
    if name not in drivers:
        raise UsageError(f"rowstate runs on SQLite and PostgreSQL, not on {name!r}")
    if driver not in drivers[name]:
        raise UsageError(f"rowstate's {name} statements are written for the driver "
                         f"{' or '.join(drivers[name])}, not {driver!r}")
    return name


def to_json(dialect: str) -> Callable[[Any], Any]:
    """How a unit binds a dict or list: JSON text on SQLite, psycopg's Jsonb on PostgreSQL."""
    if dialect == "sqlite":
        return json.dumps
    from psycopg.types.json import Jsonb  # only a PostgreSQL store loads the driver

    return Jsonb


def translate(exc: BaseException) -> Exception:
    """A driver's error as the engine's (see :mod:`rowstate.stores`); a wrapper's error
    (SQLAlchemy's ``DBAPIError``, Django's ``DatabaseError``) is read through the driver
    error it carries (``.orig``, ``__cause__``)."""
    if isinstance(exc, RowstateError):
        return exc
    orig = getattr(exc, "orig", None) or exc.__cause__ or exc
    if isinstance(orig, RecursionError) and "psycopg" in sys.modules:
        from ..stores.pgwire import _translate  # psycopg decoding a too-deep jsonb value

        return _translate(orig)
    if isinstance(orig, sqlite3.Error | OverflowError | UnicodeEncodeError):
        return sqlite_error(orig)
    module = type(orig).__module__
    if module.startswith("psycopg"):
        from ..stores.pgwire import _translate

        return _translate(orig)  # type: ignore[arg-type]
    return StoreError(str(orig))


def sync_raw(dialect: str, conn: Any, counter: StatementCounter) -> Raw:
    """One statement on a sqlite3 or psycopg connection (the stores' own ``raw``)."""
    if dialect == "sqlite":
        return _sqlite_raw(conn, counter)
    from ..stores.pgwire import _pg_raw

    return _pg_raw(conn, counter)


def plain_psycopg_cursor(conn: Any) -> None:
    """Make the engine's statements on ``conn`` run on a cursor of psycopg's own, with
    psycopg's JSON loaders: Django's connections hand out client-side-binding cursors and
    load ``jsonb`` as text (its ``JSONField`` decodes itself), while the engine reads a
    JSON column's value as the value. Seeds the stores' cursor cache (``pgwire._cursor``)."""
    import psycopg
    from psycopg.types.json import JsonbLoader, JsonLoader

    from ..stores.pgwire import _cursors

    current = _cursors.get(conn)
    if current is not None and not current.closed:
        return
    cur = psycopg.Cursor(conn)
    cur.adapters.register_loader("jsonb", JsonbLoader)
    cur.adapters.register_loader("json", JsonLoader)
    _cursors[conn] = cur


def async_raw(dialect: str, conn: Any, counter: StatementCounter) -> AsyncRaw:
    """One statement on an aiosqlite or psycopg async connection."""
    if dialect != "sqlite":
        from ..stores.pgwire import _apg_raw

        raw: AsyncRaw = _apg_raw(conn, counter)
        return raw

    async def aiosqlite_raw(sql: str, params: Any) -> tuple[list[Any], Any]:
        try:
            cur = await conn.execute(sql, _with_now(params) if params else ())
            rows = list(await cur.fetchall())
        except (sqlite3.Error, OverflowError, UnicodeEncodeError) as exc:
            raise sqlite_error(exc) from exc
        counter.statements += 1
        desc = cur.description
        return rows, [d[0] for d in desc] if desc else None

    return aiosqlite_raw


def _begin(dialect: str) -> str:
    return "BEGIN IMMEDIATE" if dialect == "sqlite" else "BEGIN"


def _stamped(dialect: str, batch: Batch) -> list[tuple[str, Any]]:
    """The batch's statements with SQLite's clock read once for all of them (as
    :class:`~rowstate.stores.SQLiteStore` does: one write, one instant)."""
    if dialect != "sqlite":
        return list(batch.statements)
    now = canonical_time(datetime.now(UTC))
    return [(sql, _with_now(params, now)) for sql, params in batch.statements]


def run_batch(dialect: str, raw: Raw, batch: Batch) -> Rows:
    """A batch on an autocommit connection: one transaction when it says so; the read
    explaining a refusal (``otherwise``) inside it."""
    try:
        return _run_batch(dialect, raw, batch)
    except RecursionError as exc:  # see translate
        raise translate(exc) from exc


def _run_batch(dialect: str, raw: Raw, batch: Batch) -> Rows:
    statements = _stamped(dialect, batch)
    if batch.transaction:
        raw(_begin(dialect), ())
    try:
        out = [raw(sql, params)[0] for sql, params in statements]
        if batch.otherwise is not None and not out[-1]:
            out.append(raw(*batch.otherwise)[0])
        if batch.transaction:
            raw("COMMIT", ())
    except BaseException:
        if batch.transaction:
            with contextlib.suppress(Exception):
                raw("ROLLBACK", ())
        raise
    return out


async def arun_batch(dialect: str, raw: AsyncRaw, batch: Batch) -> Rows:
    """:func:`run_batch` on an async connection."""
    try:
        return await _arun_batch(dialect, raw, batch)
    except RecursionError as exc:  # see translate
        raise translate(exc) from exc


async def _arun_batch(dialect: str, raw: AsyncRaw, batch: Batch) -> Rows:
    statements = _stamped(dialect, batch)
    if batch.transaction:
        await raw(_begin(dialect), ())
    try:
        out = [(await raw(sql, params))[0] for sql, params in statements]
        if batch.otherwise is not None and not out[-1]:
            out.append((await raw(*batch.otherwise))[0])
        if batch.transaction:
            await raw("COMMIT", ())
    except BaseException:
        if batch.transaction:
            with contextlib.suppress(Exception):
                await raw("ROLLBACK", ())
        raise
    return out


def refuse_read_only(read_only: bool) -> None:
    if read_only:
        raise UsageError("a unit joined into the caller's transaction is the caller's: "
                         "make that transaction read-only, not the unit")


@contextlib.contextmanager
def joined(var: ContextVar[Any], unit: Unit,
           on_kept: Callable[[Callbacks], None]) -> Iterator[Unit]:
    """The unit as a savepoint of the owner's open transaction, the store's current unit
    meanwhile; its after-commit callbacks go to ``on_kept`` once the savepoint is kept."""
    raw = unit._raw
    raw(f"SAVEPOINT {JOINED}", ())
    token = var.set(unit)
    kept = False
    try:
        yield unit
        if unit.refused is None:
            raw(f"RELEASE SAVEPOINT {JOINED}", ())
            kept = True
        else:
            raw(f"ROLLBACK TO SAVEPOINT {JOINED}", ())
            raw(f"RELEASE SAVEPOINT {JOINED}", ())
    except BaseException:
        with contextlib.suppress(Exception):
            raw(f"ROLLBACK TO SAVEPOINT {JOINED}", ())
            raw(f"RELEASE SAVEPOINT {JOINED}", ())
        raise
    finally:
        var.reset(token)
        unit.closed = True
    if kept and unit._after_commit:
        on_kept(list(unit._after_commit))


@contextlib.asynccontextmanager
async def ajoined(var: ContextVar[Any], unit: AsyncUnit,
                  on_kept: Callable[[Callbacks], None]) -> AsyncIterator[AsyncUnit]:
    """:func:`joined` on an async connection."""
    raw = unit._raw
    await raw(f"SAVEPOINT {JOINED}", ())
    token = var.set(unit)
    kept = False
    try:
        yield unit
        if unit.refused is None:
            await raw(f"RELEASE SAVEPOINT {JOINED}", ())
            kept = True
        else:
            await raw(f"ROLLBACK TO SAVEPOINT {JOINED}", ())
            await raw(f"RELEASE SAVEPOINT {JOINED}", ())
    except BaseException:
        with contextlib.suppress(Exception):
            await raw(f"ROLLBACK TO SAVEPOINT {JOINED}", ())
            await raw(f"RELEASE SAVEPOINT {JOINED}", ())
        raise
    finally:
        var.reset(token)
        unit.closed = True
    if kept and unit._after_commit:
        on_kept(list(unit._after_commit))
