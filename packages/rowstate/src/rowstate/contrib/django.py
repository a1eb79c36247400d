"""The Django door: a store over ``django.db.connections[alias]``, and a binding over an
existing model's table with no model field or mixin.

``DjangoStore(alias)`` runs the engine's statements on Django's own connection of the
calling thread (Django's connections are per thread, as :class:`ThreadConnections` are),
on the driver connection below Django's cursor wrapper (the engine's SQL is written for the
driver's placeholders: :mod:`rowstate.contrib.dbapi`). Its units of work *are* Django
transactions:

* ``lifecycle.atomic()`` inside the app's ``transaction.atomic()`` block is a SAVEPOINT in
  the app's transaction: the app's ORM writes and the unit's moves commit together or not
  at all, and a refused hold or fence undoes only the unit's part;
* outside one, it opens ``transaction.atomic(using=alias)`` itself;
* after-commit callbacks (what a lifecycle publishes in process when its binding has no
  events table) go through ``transaction.on_commit(using=alias)``: they run once the
  outermost block commits, never if it (or the Django savepoint around the unit) rolls back;
* a single move called inside the app's block with no unit open joins the app's
  transaction too (in a savepoint of its own); what it publishes in process is published at
  once, so call it inside ``lifecycle.atomic()`` to have that wait for the commit.

SQLite: rowstate's units start with ``BEGIN IMMEDIATE`` (a deferred transaction that
upgrades to a write fails at once with SQLITE_BUSY, ignoring the timeout); Django's own
``BEGIN`` is deferred unless ``OPTIONS={"transaction_mode": "IMMEDIATE"}`` (Django 5.1+),
so a unit this store opens itself asks for IMMEDIATE for its BEGIN. PostgreSQL: psycopg 3
(Django's ``psycopg`` backend), not psycopg2. Django's ORM is sync, and so is this store:
an asyncio app calls it through ``sync_to_async`` as it calls the ORM.

:func:`binding_for` reads a model's ``_meta`` (``db_table``, the primary key's column and
type, field names to column names): the model keeps plain fields (a ``CharField`` for the
state), so Django's migrations see nothing of rowstate's, and the engine's extra columns
(version, lease, ...) come from ``binding.migration_sql(dialect, existing=...)`` pasted
into a ``RunSQL`` migration of the app.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from django.db import connections, transaction
from django.db.utils import ConnectionDoesNotExist, Error

from ..binding import Binding
from ..errors import UsageError
from ..machine import Machine
from ..protocol import Batch, Door
from ..stores.common import Rows, StatementCounter, _no_script_in_unit, _unit_var
from ..units import Unit, nested
from .dbapi import (
    Callbacks,
    dialect_name,
    joined,
    plain_psycopg_cursor,
    refuse_read_only,
    run_batch,
    sync_raw,
    to_json,
    translate,
)

_DRIVERS = {"sqlite": ("sqlite3",), "postgresql": ("psycopg",)}
_INTEGER_FIELDS = {"AutoField", "BigAutoField", "SmallAutoField", "IntegerField",
                   "BigIntegerField", "SmallIntegerField", "PositiveIntegerField",
                   "PositiveBigIntegerField", "PositiveSmallIntegerField"}


def _driver(wrapper: Any) -> str:
    if wrapper.vendor != "postgresql":
        return "sqlite3"
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return "psycopg" if is_psycopg3 else "psycopg2"


class DjangoStore(StatementCounter):
    """A store over Django's connections of one database alias (see the module)."""

    def __init__(self, alias: str = "default") -> None:
        super().__init__()
        try:
            wrapper = connections[alias]
        except ConnectionDoesNotExist as exc:
            raise UsageError(f"Django has no database {alias!r}") from exc
        self.alias = alias
        self.dialect = dialect_name(wrapper.vendor, _driver(wrapper), _DRIVERS)
        self._to_json = to_json(self.dialect)
        self._unit: ContextVar[Unit | None] = _unit_var(self)
        self._used: list[Any] = []  # the wrappers of every thread that called the store
        self._local = threading.local()
        self._guard = threading.Lock()

    def _connection(self) -> Any:
        """This thread's Django connection of the alias, connected."""
        wrapper = connections[self.alias]
        try:
            wrapper.ensure_connection()
        except Error as exc:
            raise translate(exc) from exc
        if self.dialect == "postgresql":
            plain_psycopg_cursor(wrapper.connection)
        if getattr(self._local, "wrapper", None) is not wrapper:
            self._local.wrapper = wrapper
            with self._guard:
                self._used.append(wrapper)
        return wrapper

    def run(self, batch: Batch) -> Rows:
        unit = self._unit.get()
        if unit is not None:
            return unit.run(batch)
        wrapper = self._connection()
        if wrapper.in_atomic_block:  # the app's transaction: the batch joins it
            with self.atomic() as joined_unit:
                return joined_unit.run(batch)
        return run_batch(self.dialect, sync_raw(self.dialect, wrapper.connection, self), batch)

    @contextlib.contextmanager
    def atomic(self, *, door: Door | None = None, read_only: bool = False) -> Iterator[Unit]:
        """A unit of work (:mod:`rowstate.units`) as a savepoint of the app's
        ``transaction.atomic()`` block, or in a block of its own (see the module);
        ``read_only`` (its own block only): a snapshot that refuses writes."""
        current = self._unit.get()
        if current is not None:
            with nested(current, door) as unit:
                yield unit
            return
        wrapper = self._connection()
        if wrapper.in_atomic_block:
            refuse_read_only(read_only)
            with self._join(wrapper, door) as unit:
                yield unit
            return
        with self._own_block(wrapper, read_only), self._join(wrapper, door) as unit:
            yield unit

    @contextlib.contextmanager
    def _own_block(self, wrapper: Any, read_only: bool) -> Iterator[None]:
        """``transaction.atomic(using=alias)``, begun IMMEDIATE on SQLite (see the module;
        DEFERRED for a read-only snapshot, whatever the settings say)."""
        mode = getattr(wrapper, "transaction_mode", None)
        block = transaction.atomic(using=self.alias)
        if self.dialect == "sqlite":  # a snapshot takes no write lock, a writer at once
            wrapper.transaction_mode = "DEFERRED" if read_only else "IMMEDIATE"
        try:
            block.__enter__()
        except Error as exc:  # Django's BEGIN failed (a locked SQLite file, a lost server)
            raise translate(exc) from exc
        finally:
            if self.dialect == "sqlite":
                wrapper.transaction_mode = mode
        raw = sync_raw(self.dialect, wrapper.connection, self)
        try:
            if read_only:
                raw("PRAGMA query_only = ON" if self.dialect == "sqlite"
                    else "SET TRANSACTION READ ONLY", ())
            try:
                yield
            finally:
                if read_only and self.dialect == "sqlite":
                    raw("PRAGMA query_only = OFF", ())
        except BaseException as exc:
            if not block.__exit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            try:
                block.__exit__(None, None, None)  # Django's COMMIT
            except Error as exc:
                raise translate(exc) from exc

    @contextlib.contextmanager
    def _join(self, wrapper: Any, door: Door | None) -> Iterator[Unit]:
        unit = Unit(self.dialect, sync_raw(self.dialect, wrapper.connection, self), door,
                    self._to_json)
        with joined(self._unit, unit, self._on_commit):
            yield unit

    def _on_commit(self, callbacks: Callbacks) -> None:
        for callback in callbacks:
            transaction.on_commit(callback, using=self.alias)

    def execute_script(self, sql: str) -> None:
        _no_script_in_unit(self._unit)
        wrapper = self._connection()
        if wrapper.in_atomic_block:
            raise UsageError("execute_script cannot run inside transaction.atomic() "
                             "(SQLite's executescript commits first)")
        try:
            if self.dialect == "sqlite":
                wrapper.connection.executescript(sql)
            else:
                wrapper.connection.execute(sql)
        except Exception as exc:
            raise translate(exc) from exc

    def close(self) -> None:
        """Close this alias's Django connection in every thread that called the store
        (a pool of worker threads at shutdown; a request's is closed by Django itself)."""
        with self._guard:
            used, self._used = self._used, []
        for wrapper in used:
            wrapper.inc_thread_sharing()
            try:
                wrapper.close()
            finally:
                wrapper.dec_thread_sharing()
        self._local = threading.local()


def binding_for(model: Any, machine: Machine, state: str = "state",
                **options: Any) -> Binding:
    """A :class:`~rowstate.Binding` over ``model``'s table: its ``db_table``, its primary
    key's column (typed, so an integer key binds as one), and ``state`` and the column
    names in ``options`` read as the model's field names where they are fields (a
    ``ForeignKey`` named ``owner`` is the column ``owner_id``) and as columns otherwise.
    No field, mixin or metaclass is added to the model (see the module)."""
    meta = model._meta
    pk = meta.pk
    types = dict(options.pop("column_types", {}))
    if pk.get_internal_type() in _INTEGER_FIELDS:
        types.setdefault(pk.column, "BIGINT")
    for name in ("owner", "version"):
        if isinstance(options.get(name), str):
            options[name] = _column(meta, options[name])
    for name in ("columns", "payload", "json_columns"):
        if name in options:
            options[name] = tuple(_column(meta, c) for c in options[name])
    return Binding(machine, table=meta.db_table, key=(pk.column,),
                   state=_column(meta, state), column_types=types, **options)


def _column(meta: Any, name: str) -> str:
    from django.core.exceptions import FieldDoesNotExist

    try:
        return str(meta.get_field(name).column)
    except FieldDoesNotExist:
        return name
