"""Helpers of the engine's functional tests: one test body, four backends.

:class:`Backend` is what the ``backend`` fixture (tests/rowstate/conftest.py) yields: a database
(an SQLite file, or a fresh schema of a real PostgreSQL database) and a front end (the sync
:class:`~rowstate.Lifecycle` or the :class:`~rowstate.AsyncLifecycle`). ``make()`` returns a
lifecycle whose methods block whichever twin it wraps, so a test body reads the same on all
four combinations; the async twin's coroutines really run, on the test's own event loop, and
``.aio`` reaches the twin itself (to ``gather`` its coroutines).

Where a test runs: on every backend by default; :func:`on` narrows it. Two narrowings have
names of their own:

* ``@conformance``: the test also runs on the contrib stores by default, because the store
  itself takes part in what it checks (units, holds and fences, commit hooks, error
  translation, races). The contrib stores run every other backend test under ``-m contrib``
  (``make contrib``); the module's docstring says why each of its conformance tests is one.
* ``@refused_before_io``: every call it checks is refused before any statement exists (the
  value rules of :mod:`rowstate.values`, the binding's and the machine's checks, made by the
  core both twins drive), so no store and no twin can change the verdict. It runs on one
  backend, inside :meth:`Backend.no_io`, which proves "before any I/O" where running it on
  four backends only repeated it.

The machines below are small on purpose: each feature of the engine has a field to test.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rowstate import (
    NOW,
    AsyncLifecycle,
    AsyncRelay,
    Binding,
    Derived,
    Edge,
    FinalizationClaim,
    Lease,
    Lifecycle,
    Machine,
    Notice,
    Relay,
    TimedEdge,
    Unique,
)
from rowstate.dialects import Dialect, Postgres, SQLite
from rowstate.ext import Batch
from rowstate.stores import AsyncPostgresStore, AsyncSQLiteStore, PostgresStore, SQLiteStore

ROOT = Path(__file__).resolve().parents[2]  # the repository

# A weekly run: the engine's own test machine, shaped like the pub scheduler's (a derived
# legacy status, leased edges, a one-at-a-time invariant, a timer and a notice), so the
# engine's tests exercise every feature; pubsched's machine (pubsched.machine) is the app's.
RUN = Machine(
    "pub_run",
    states=["DRAFT", "COLLECTING", "CLOSED", "ASSIGNED", "APPROVED", "SENT"],
    initial="DRAFT",
    active=["COLLECTING", "CLOSED", "ASSIGNED", "APPROVED"],
    edges=[
        Edge("open", "DRAFT", "COLLECTING", label="open form"),
        Edge("extend", "COLLECTING", "COLLECTING", label="extend deadline"),
        Edge("close", "COLLECTING", "CLOSED", lease="close", label="close form"),
        Edge("reopen", "CLOSED", "COLLECTING", label="reopen"),
        Edge("generate", "CLOSED", "ASSIGNED", lease="generate", label="generate"),
        Edge("regenerate", "ASSIGNED", "ASSIGNED", lease="generate",
             label="regenerate in place"),
        Edge("reopen_after_generate", "ASSIGNED", "COLLECTING",
             label="reopen after generate"),
        Edge("approve", "ASSIGNED", "APPROVED", label="operator approves"),
        Edge("unapprove", "APPROVED", "ASSIGNED", label="un-approve"),
        Edge("send", "APPROVED", "SENT", lease="send", label="send schedule email"),
    ],
    notes={"SENT": "terminal: never re-sends.\nAPPROVED and SENT write the\n"
                   "legacy status column THROUGH."},
)

RUNS = Binding(
    RUN,
    table="pub_schedule_runs",
    key=("week_of",),
    state="v2_state",
    derived=Derived("status", {"pending": "DRAFT", "approved": "APPROVED", "sent": "SENT"}),
    version="version",
    lease=Lease(at="acting_at", kind="acting_kind", token="acting_token", error="last_error",
                ttl=300),
    on_enter={"APPROVED": {"status": "approved"}, "SENT": {"status": "sent", "sent_at": NOW}},
    columns=("autopilot",),
    invariants=(Unique("COLLECTING"),),
    timers=(TimedEdge("close", due="deadline_at", guards={"autopilot": 1}),),
    notices=(Notice("collecting_alert", ("COLLECTING",), due="deadline_at",
                    claim="collecting_alert_at"),),
    column_types={"autopilot": "INTEGER NOT NULL DEFAULT 0",
                  "status": "TEXT NOT NULL DEFAULT 'pending'"},
)


BACKENDS = [("sqlite", "sync"), ("sqlite", "async"), ("postgres", "sync"), ("postgres", "async")]

# The contrib stores (rowstate.contrib) as more backends: (door, db, mode). They carry the
# ``contrib`` marker; tests/rowstate/conftest.py runs them by default for the tests marked
# ``conformance`` and marks them ``slow`` for every other test (``-m contrib`` runs them all).
CONTRIB_BACKENDS = [("sqlalchemy", "sqlite", "sync"), ("sqlalchemy", "sqlite", "async"),
                    ("sqlalchemy", "postgres", "sync"), ("sqlalchemy", "postgres", "async"),
                    ("django", "sqlite", "sync"), ("django", "postgres", "sync")]


def backend_params(*only: str) -> list[Any]:
    """``pytest.param``s of the ``backend`` fixture (ids like ``postgres-async``, or
    ``sqlalchemy-postgres-async`` for a contrib store), PostgreSQL ones marked ``postgres``;
    ``only`` keeps the named ids (a database, a mode or a door names every one of it)."""
    params = []
    for door, db, mode in [("native", db, mode) for db, mode in BACKENDS] + CONTRIB_BACKENDS:
        name = f"{db}-{mode}" if door == "native" else f"{door}-{db}-{mode}"
        if only and not {name, db, mode, door} & set(only):
            continue
        marks = [pytest.mark.postgres] if db == "postgres" else []
        if door != "native":
            marks.append(pytest.mark.contrib)
        params.append(pytest.param((db, mode, door), id=name, marks=marks))
    return params


def on(*only: str) -> pytest.MarkDecorator:
    """Run a test on some backends only: ``@on("postgres")``, ``@on("async")``."""
    return pytest.mark.parametrize("backend", backend_params(*only), indirect=True)


# See the module docstring: a test the contrib stores run by default...
conformance = pytest.mark.conformance
# ...and a test of refusals made before any I/O, on one backend (the cheapest: a SQLite file
# and no event loop), its calls inside ``backend.no_io()``.
refused_before_io = on("sqlite-sync")

# -- machines ------------------------------------------------------------------------------

# A job: pure edges, one multi-from target (FAILED), two lease kinds leaving READY, an owner,
# a finalization claim, payload columns, a JSON column and entry writes.
JOB = Machine(
    "job",
    states=["NEW", "READY", "RUNNING", "DONE", "FAILED"],
    initial="NEW",
    active=["READY", "RUNNING"],
    edges=[
        Edge("prepare", "NEW", "READY"),
        Edge("start", "READY", "RUNNING", lease="start"),
        Edge("ping", "READY", "READY", lease="ping"),
        Edge("cancel", "READY", "FAILED"),
        Edge("finish", "RUNNING", "DONE"),
        Edge("crash", "RUNNING", "FAILED"),
        Edge("retry", "FAILED", "READY"),
    ],
)

JOBS = Binding(
    JOB,
    table="jobs",
    key=("id",),
    owner="owner",
    version="version",
    lease=Lease(at="lease_at", kind="lease_kind", token="lease_token", holder="lease_holder",
                error="last_error", ttl=60),
    finalization=FinalizationClaim(holder="fin_holder", scope="fin_scope", at="fin_at",
                                   token="fin_token", ttl=120),
    on_enter={
        "DONE": {"finished_at": NOW, "meta.reserved": False, "status": "done"},
        "FAILED": {"status": "failed"},
    },
    payload=("result", "attempts"),
    json_columns=("meta",),
    columns=("status", "priority"),
    column_types={"priority": "INTEGER", "attempts": "INTEGER"},
)

# A ticket: durable timers (a pure one and a leased one) and a once-per-row notice.
TICKET = Machine(
    "ticket",
    states=["OPEN", "EXPIRED", "ESCALATED", "CLOSED"],
    initial="OPEN",
    edges=[
        Edge("expire", "OPEN", "EXPIRED"),
        Edge("escalate", "OPEN", "ESCALATED", lease="escalate"),
        Edge("close", "OPEN", "CLOSED"),
    ],
)

TICKETS = Binding(
    TICKET,
    table="tickets",
    key=("id",),
    version="version",
    lease=Lease(at="lease_at", kind="lease_kind", token="lease_token", error="last_error"),
    columns=("autopilot",),
    timers=(TimedEdge("expire", due="expires_at", guards={"autopilot": 1}),
            TimedEdge("escalate", due="escalate_at")),
    notices=(Notice("remind", ("OPEN",), due="remind_at", claim="reminded_at"),),
    column_types={"autopilot": "INTEGER NOT NULL DEFAULT 1"},
)

# A one-row-at-a-time invariant with an injected conflict, outside the pub run's machine.
SLOT = Machine("slot", states=["IDLE", "LIVE"], initial="IDLE",
               edges=[Edge("go", "IDLE", "LIVE"), Edge("stop", "LIVE", "IDLE")])
SLOTS = Binding(SLOT, table="slots", key=("id",), version="version",
                invariants=(Unique("LIVE"),))


# Composite keys, a per-group invariant and a JSON payload column.
SEAT = Machine("seat", states=["FREE", "HELD", "TAKEN"], initial="FREE",
               edges=[Edge("hold", "FREE", "HELD"), Edge("take", "HELD", "TAKEN", lease="pay"),
                      Edge("free", "HELD", "FREE")])
SEATS = Binding(SEAT, table="seats", key=("venue", "seat"), version="version",
                lease=Lease(at="lease_at", kind="lease_kind", token="lease_token"),
                columns=("zone",), payload=("booking",), json_columns=("booking",),
                invariants=(Unique("HELD", per=("zone",)),),
                column_types={"seat": "INTEGER"})


# -- time ----------------------------------------------------------------------------------


class Clock:
    """An injectable clock: ``Lifecycle(store, binding, clock=Clock())``."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 5, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


# -- the facade ----------------------------------------------------------------------------


class Blocking:
    """An async object whose coroutine methods run to completion on one event loop."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.aio = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.aio, name)
        if inspect.iscoroutinefunction(attr):

            @functools.wraps(attr)
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._loop.run_until_complete(attr(*args, **kwargs))

            return call
        return attr


class Backend:
    """One database and one front end; see the module docstring."""

    def __init__(self, db: str, mode: str, where: str, door: str = "native") -> None:
        self.db, self.mode, self.where, self.door = db, mode, where, door
        self.loop: asyncio.AbstractEventLoop | None = (
            asyncio.new_event_loop() if mode == "async" else None
        )
        self.dialect: Dialect = Postgres() if db == "postgres" else SQLite()
        self.store: Any
        self.contrib: Any = None  # support.contrib_stores.ContribStore
        if door != "native":
            from support.contrib_stores import ContribStore

            self.contrib = ContribStore(door, db, mode, where)
            self.store = self.contrib.store
        elif db == "sqlite":
            self.store = AsyncSQLiteStore(where) if self.is_async else SQLiteStore(where)
        else:
            cls = AsyncPostgresStore if self.is_async else PostgresStore
            self.store = cls(where, min_size=1, max_size=8)
        self._schemas: set[str] = set()

    def __repr__(self) -> str:
        door = "" if self.door == "native" else f"{self.door}-"
        return f"<Backend {door}{self.db}-{self.mode}>"

    @property
    def is_async(self) -> bool:
        return self.mode == "async"

    @property
    def is_pg(self) -> bool:
        return self.db == "postgres"

    @property
    def statements(self) -> int:
        return int(self.store.statements)

    @contextlib.contextmanager
    def no_io(self) -> Iterator[None]:
        """Fail the test if a call in the block reaches the database: each of the store's
        doors (a batch, a unit of work, a script) is replaced meanwhile by one that records
        the call and raises. A statement counts when it is handed to the store, before its
        driver could refuse it (the store's own ``statements`` counts those that ran)."""
        reached: list[str] = []

        def refuse(door: str) -> Callable[..., Any]:
            def refused(*args: Any, **kwargs: Any) -> Any:
                reached.append(door)
                raise AssertionError(f"store.{door}() was called inside no_io()")

            return refused

        doors = ("run", "atomic", "execute_script")
        for door in doors:
            setattr(self.store, door, refuse(door))
        try:
            yield
        finally:
            for door in doors:
                delattr(self.store, door)
        assert reached == [], f"the database was reached: {reached}"

    # -- running -------------------------------------------------------------------------

    def wait(self, awaitable: Any) -> Any:
        """Run a coroutine on this backend's loop (async mode only)."""
        assert self.loop is not None, "a sync backend has no event loop"
        return self.loop.run_until_complete(awaitable)

    def blocking(self, target: Any) -> Any:
        return Blocking(target, self.loop) if self.loop is not None else target

    @staticmethod
    def raw(lc: Any) -> Any:
        """The twin itself: from inside an act, ``raw(lc).claim(...)`` is a blocking call
        (sync) or a coroutine that the async driver awaits as the act's result (async)."""
        return lc.aio if isinstance(lc, Blocking) else lc

    def make(self, binding: Binding, *, clock: Callable[[], datetime] | None = None,
             publishers: Sequence[Callable[..., Any]] = ()) -> Any:
        """A lifecycle on this backend (its table created on first use)."""
        cls: Any = AsyncLifecycle if self.is_async else Lifecycle
        lc = self.blocking(cls(self.store, binding, clock=clock, publishers=publishers))
        ddl = lc.schema_sql()
        if ddl not in self._schemas:
            lc.create_schema()
            self._schemas.add(ddl)
        return lc

    def relay(self, publishers: Sequence[Callable[..., Any]], **kw: Any) -> Any:
        cls: Any = AsyncRelay if self.is_async else Relay
        return self.blocking(cls(self.store, publishers, **kw))

    def at_once(self, n: int, lc: Any, method: str, **kwargs: Any) -> list[Any]:
        """Call ``lc.<method>(**kwargs)`` ``n`` times at once: threads released by a barrier
        (sync), or coroutines gathered on the loop (async)."""
        if self.is_async:
            target = lc.aio

            async def all_at_once() -> list[Any]:
                return list(await asyncio.gather(
                    *(getattr(target, method)(**kwargs) for _ in range(n))))

            return list(self.wait(all_at_once()))
        barrier = threading.Barrier(n)

        def one() -> Any:
            barrier.wait(timeout=30)
            return getattr(lc, method)(**kwargs)

        with ThreadPoolExecutor(n) as pool:
            futures = [pool.submit(one) for _ in range(n)]
            return [f.result(timeout=60) for f in futures]

    # -- raw SQL (seeding rows, looking behind the engine's back) -------------------------

    def adapt(self, value: Any) -> Any:
        if isinstance(value, datetime) and isinstance(self.dialect, Postgres):
            return value
        return self.dialect.payload_value(value)

    def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement written with ``?`` placeholders; returns its rows."""
        if self.is_pg:
            sql = sql.replace("?", "%s")
        batch = Batch(((sql, [self.adapt(p) for p in params]),))
        rows: list[list[tuple[Any, ...]]] = self.blocking(self.store).run(batch)
        return rows[0]

    def seed(self, binding: Binding, **columns: Any) -> None:
        """Insert one row with these columns."""
        d = self.dialect
        names = ", ".join(d.quote(c) for c in columns)
        marks = ", ".join("?" for _ in columns)
        self.execute(f"INSERT INTO {d.table(binding.table_parts)} ({names}) VALUES ({marks})",
                     *columns.values())

    def update(self, binding: Binding, key: Any, **columns: Any) -> None:
        """Write columns directly (a service writing behind the engine's back)."""
        d = self.dialect
        sets = ", ".join(f"{d.quote(c)} = ?" for c in columns)
        self.execute(f"UPDATE {d.table(binding.table_parts)} SET {sets} "
                     f"WHERE {d.quote(binding.key[0])} = ?", *columns.values(), key)

    def rows(self, binding: Binding) -> list[tuple[Any, ...]]:
        """Every row of the binding's table, every known column, sorted by key."""
        d = self.dialect
        cols = ", ".join(d.quote(c) for c in sorted(binding.known))
        keys = ", ".join(d.quote(k) for k in binding.key)
        return self.execute(f"SELECT {cols} FROM {d.table(binding.table_parts)} ORDER BY {keys}")

    def count(self, table: str, where: str = "1 = 1", *params: Any) -> int:
        got = self.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}", *params)
        return int(got[0][0])

    # -- reading values back ---------------------------------------------------------------

    @staticmethod
    def json(value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    def time(self, value: Any) -> datetime | None:
        return self.dialect.parse_time(value)

    # -- teardown ------------------------------------------------------------------------

    def close(self) -> None:
        if self.loop is None:
            self.contrib.close(None) if self.contrib is not None else self.store.close()
            return
        try:
            if self.contrib is not None:
                self.contrib.close(self.wait)
            else:
                self.wait(self.store.close())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()


def events_of(backend: Backend, machine: str) -> list[tuple[Any, ...]]:
    """The raw event rows of one machine, in id order."""
    return backend.execute(
        "SELECT id, row_key, edge, from_state, to_state, owner, data, version "
        "FROM rowstate_events WHERE machine = ? ORDER BY id", machine)


def as_dict(row: Mapping[str, Any] | None) -> dict[str, Any]:
    assert row is not None
    return dict(row)
