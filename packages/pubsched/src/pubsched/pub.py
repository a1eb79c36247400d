"""One pub: its database (a rowstate store), what its schema has, its two lifecycles (the
week's run and the cover request), its settings, its mailer.

Every domain function takes a :class:`Pub` and the instant it acts at (``now``): the clock
is passed in, never read deep inside, so a rehearsal, a script or a test can run a week on
any dates (:func:`utc`). Application SQL goes through units of work (``pub.atomic()``), one
placeholder style on both databases (``%s``), rows back as dicts; a stored instant is read
back with :func:`pubsched.db.instants.instant`.

The rest of the ground floor has a module each: verdicts and errors
(:mod:`pubsched.verdicts`), the settings (:mod:`pubsched.config`), the context an action
runs in (:mod:`pubsched.context`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import rowstate

from . import context
from .config import Config
from .db.level import SchemaLevel, read_level
from .deliveries.machine import MAILS
from .machine import COVERS, RUNS
from .mail.mailer import Mailer, mailer_for
from .verdicts import BadInput


class Pub:
    """The pub's database and services; thin, so that the CLI and the web share it."""

    def __init__(self, store: rowstate.Store, config: Config | None = None, *,
                 mailer: Mailer | None = None, schema: SchemaLevel | None = None) -> None:
        self.store = store
        self.config = config or Config()
        # what the schema has, read once here (:mod:`pubsched.db.level`): domain code reads
        # ``pub.schema.covers``, never the catalogue, and never on every tick
        self.schema = schema if schema is not None else read_level(store)
        self.runs = rowstate.Lifecycle(store, RUNS)
        # the unit this pub has open in this thread or task (:meth:`query` reads in it)
        self._open: ContextVar[rowstate.Unit | None] = ContextVar(f"pub_unit_{id(self)}",
                                                                   default=None)
        self.covers = rowstate.Lifecycle(store, COVERS)
        self.mail = rowstate.Lifecycle(store, MAILS)  # every email owed (pubsched.deliveries)
        self.mailer = mailer if mailer is not None else mailer_for(self.config.mail)

    @property
    def dialect(self) -> str:
        return str(self.store.dialect)

    @contextmanager
    def atomic(self) -> Iterator[rowstate.Unit]:
        """A unit of work on the pub's database (hold/fence default to the runs). Inside
        :meth:`fenced` it first runs the fence (which may refuse by raising: the unit
        then rolls back), so what it commits obeys what the fence checked under its lock.
        Opened inside another unit of this pub, it is a savepoint of that one."""
        with self.store.atomic(door=self.runs) as tx:
            check = context.fence()
            if check is not None:
                check(tx)
            with self._reading_in(tx):
                yield tx

    def fenced(self, check: context.Fence | None) -> contextlib.AbstractContextManager[None]:
        """Every unit of work opened in this block (this thread or task) runs ``check``
        first; ``None`` lifts the fence (:func:`pubsched.context.fenced`)."""
        return context.fenced(check)

    def acting_as(self, by: str | None) -> contextlib.AbstractContextManager[None]:
        """``with pub.acting_as("cli:ann"):`` (:func:`pubsched.context.acting_as`)."""
        return context.acting_as(by)

    @property
    def actor(self) -> str | None:
        """Who is moving weeks here and now (None: nobody said)."""
        return context.actor()

    @contextmanager
    def reading(self) -> Iterator[rowstate.Unit]:
        """A read-only unit that :meth:`query` reads in (one snapshot, one BEGIN for a
        page's many reads, no write lock); inside another unit of this pub, that one."""
        current = self._open.get()
        if current is not None:
            yield current
            return
        with self.store.atomic(door=self.runs, read_only=True) as tx, self._reading_in(tx):
            yield tx

    @contextmanager
    def _reading_in(self, tx: rowstate.Unit) -> Iterator[None]:
        """``tx`` is the unit :meth:`query` reads in, for this block (this thread, task)."""
        token = self._open.set(tx)
        try:
            yield
        finally:
            self._open.reset(token)

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
              ) -> list[dict[str, Any]]:
        """The rows of one read: inside a unit of this pub (this thread or task), read in
        that unit (its snapshot, no savepoint); else in a read-only unit of its own, which
        takes no write lock (SQLite) and refuses a write (both): a write goes through
        :meth:`atomic`. Under a rush of tenders every write lock taken is a wait, so a
        read must not take one."""
        tx = self._open.get()
        if tx is not None:
            return tx.execute(sql, params)
        with self.store.atomic(door=self.runs, read_only=True) as tx:
            return tx.execute(sql, params)

    def close(self) -> None:
        self.store.close()


def utc(now: datetime | None) -> datetime:
    """The instant an action acts at: the caller's, or the real clock (aware, UTC)."""
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise BadInput(f"times are aware (ISO with an offset or Z), got {now.isoformat()}")
    return now.astimezone(UTC)
