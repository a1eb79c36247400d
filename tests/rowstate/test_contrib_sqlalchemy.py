"""The SQLAlchemy door (rowstate.contrib.sqlalchemy) where it differs from every store: a
unit joined into the caller's Session or Connection transaction, on SQLite files and a real
PostgreSQL, sync and async. (The engine's behaviour on these stores is the four-backend
suite's: tests/rowstate/conftest.py runs it on them as more backends.)"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import Engine, String, create_engine, func, insert, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from rowstate import AsyncLifecycle, Lifecycle
from rowstate.contrib.dbapi import translate
from rowstate.contrib.sqlalchemy import AsyncSQLAlchemyStore, SQLAlchemyStore
from rowstate.errors import (
    ConnectionLostError,
    InvariantViolation,
    StoreError,
    UnitRefusedError,
    UsageError,
)
from support.contrib_stores import sqlalchemy_engine
from support.engine import RUNS

# the pub run published in process (no events table), so the moment of publication shows
RUNS_IN_PROCESS = dataclasses.replace(RUNS, events=None)
W1, W2 = "2026-01-05", "2026-01-12"


class Base(DeclarativeBase):
    pass


class Submission(Base):
    """The application's own table, written through the ORM."""

    __tablename__ = "sa_submissions"
    id: Mapped[int] = mapped_column(primary_key=True)
    week: Mapped[str] = mapped_column(String(10))
    who: Mapped[str] = mapped_column(String(20))


DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _where(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"{tmp_path}/sa.db"
    return str(request.getfixturevalue("engine_pg_schema"))


@pytest.fixture(params=DATABASES)
def engine(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Engine]:
    made = sqlalchemy_engine(request.param, "sync", _where(request, tmp_path))
    Base.metadata.create_all(made)
    try:
        yield made
    finally:
        made.dispose()


@pytest.fixture(params=DATABASES)
async def async_engine(request: pytest.FixtureRequest,
                       tmp_path: Any) -> AsyncIterator[AsyncEngine]:
    made = sqlalchemy_engine(request.param, "async", _where(request, tmp_path))
    async with made.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    try:
        yield made
    finally:
        await made.dispose()


def _runs(engine: Engine, seen: list[Any]) -> Lifecycle:
    """The pub runs; each publication records the event and the row's state as another
    connection reads it at that moment (committed, or not yet)."""
    runs: Lifecycle

    def publish(event: Any) -> None:
        seen.append((event.to_state, runs.state(event.key[0])))

    runs = Lifecycle(SQLAlchemyStore(engine), RUNS_IN_PROCESS, publishers=[publish])
    runs.create_schema()
    return runs


def _version(runs: Lifecycle) -> int:
    row = runs.get(W1)
    assert row is not None
    return int(row["version"])


def _who(engine: Engine) -> list[str]:
    with Session(engine) as session:
        return list(session.scalars(select(Submission.who).order_by(Submission.who)))


# -- a Session's transaction --------------------------------------------------------------


def test_orm_writes_and_a_move_commit_together_and_publish_after_the_commit(
        engine: Engine) -> None:
    seen: list[Any] = []
    runs = _runs(engine, seen)
    runs.create(W1)
    seen.clear()
    with Session(engine) as session:
        session.add(Submission(week=W1, who="ann"))
        with runs.atomic(session=session):
            moved = runs.transition(W1, "COLLECTING", by="ann", note="form opened")
            assert moved.applied and moved.event is not None and moved.event.by == "ann"
        session.add(Submission(week=W1, who="bob"))
        session.flush()
        assert seen == []  # nothing is published before the caller commits
        assert runs.state(W1) == "DRAFT" and _who(engine) == []  # nor visible elsewhere
        session.commit()
    # published after the COMMIT: another connection already read the new state
    assert seen == [("COLLECTING", "COLLECTING")]
    assert _who(engine) == ["ann", "bob"]


def test_a_rollback_of_the_caller_undoes_both_and_publishes_nothing(engine: Engine) -> None:
    seen: list[Any] = []
    runs = _runs(engine, seen)
    runs.create(W1)
    seen.clear()
    with Session(engine) as session:
        session.add(Submission(week=W1, who="ann"))
        with runs.atomic(session=session):
            assert runs.transition(W1, "COLLECTING").applied
        session.rollback()
        # the session goes on: a later transaction commits, publishing only its own move
        with runs.atomic(session=session):
            assert runs.transition(W1, "COLLECTING").applied
        session.commit()
    assert seen == [("COLLECTING", "COLLECTING")]
    assert _who(engine) == [] and runs.state(W1) == "COLLECTING"

    version = _version(runs)
    with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
        session.add(Submission(week=W1, who="cy"))
        with runs.atomic(session=session):
            assert runs.transition(W1, "COLLECTING", from_="COLLECTING").applied  # extend
        raise RuntimeError("the app fails after the move")
    assert _version(runs) == version and _who(engine) == []
    assert seen == [("COLLECTING", "COLLECTING")]


def test_a_callers_savepoint_rolled_back_takes_the_units_publication_with_it(
        engine: Engine) -> None:
    seen: list[Any] = []
    runs = _runs(engine, seen)
    runs.create(W1)
    runs.create(W2)
    seen.clear()
    with Session(engine) as session, session.begin():
        with session.begin_nested() as outer:
            # an inner savepoint, released into the outer one
            with session.begin_nested(), runs.atomic(session=session):
                assert runs.transition(W1, "COLLECTING").applied
            outer.rollback()  # the move is undone: its publication must go too
        # a savepoint kept: its unit publishes
        with session.begin_nested(), runs.atomic(session=session):
            assert runs.transition(W2, "COLLECTING").applied
    assert seen == [("COLLECTING", "COLLECTING")]
    assert (runs.state(W1), runs.state(W2)) == ("DRAFT", "COLLECTING")


def test_a_refusal_inside_does_not_poison_the_callers_transaction(engine: Engine) -> None:
    runs = _runs(engine, [])
    runs.create(W1)
    runs.create(W2)
    assert runs.transition(W1, "COLLECTING").applied  # one COLLECTING run at a time
    with Session(engine) as session, session.begin():
        session.add(Submission(week=W2, who="ann"))
        session.flush()
        with runs.atomic(session=session):
            # a refused UNIQUE invariant: on PostgreSQL a failed statement would abort the
            # caller's whole transaction but for the unit's savepoints
            assert runs.transition(W2, "COLLECTING").reason == "INVARIANT"
        with runs.atomic(session=session) as tx:
            tx.execute("INSERT INTO sa_submissions (week, who) VALUES (%s, %s)", [W2, "bob"])
            assert tx.hold(W2, "COLLECTING").reason == "STATE_MISMATCH"
            with pytest.raises(UnitRefusedError):
                tx.execute("SELECT 1")
        # the refused unit rolled back to its savepoint: bob is gone, ann stays
        session.add(Submission(week=W2, who="cy"))
    assert _who(engine) == ["ann", "cy"]
    assert runs.state(W2) == "DRAFT"


def test_a_database_error_inside_is_translated_and_the_caller_goes_on(engine: Engine) -> None:
    runs = _runs(engine, [])
    runs.create(W1)
    with Session(engine) as session, session.begin():
        session.add(Submission(id=1, week=W1, who="ann"))
        session.flush()
        with pytest.raises(InvariantViolation), runs.atomic(session=session) as tx:
            assert runs.transition(W1, "COLLECTING").applied
            tx.execute("INSERT INTO sa_submissions (id, week, who) VALUES (1, %s, 'dup')",
                       [W1])
        session.add(Submission(id=2, week=W1, who="bob"))
    assert _who(engine) == ["ann", "bob"]
    assert runs.state(W1) == "DRAFT"  # the move went with the unit's savepoint


# -- a Core connection's transaction ------------------------------------------------------


def test_a_connection_joins_the_same_way(engine: Engine) -> None:
    seen: list[Any] = []
    runs = _runs(engine, seen)
    runs.create(W1)
    seen.clear()
    with engine.begin() as conn:
        conn.execute(insert(Submission).values(week=W1, who="ann"))
        with runs.atomic(connection=conn) as tx:
            assert runs.transition(W1, "COLLECTING").applied
            assert tx.execute("SELECT count(*) AS n FROM sa_submissions") == [{"n": 1}]
        assert seen == []
    assert seen == [("COLLECTING", "COLLECTING")]
    version = _version(runs)
    with pytest.raises(KeyError), engine.begin() as conn:
        conn.execute(insert(Submission).values(week=W1, who="bob"))
        with runs.atomic(connection=conn):
            assert runs.transition(W1, "COLLECTING", from_="COLLECTING").applied  # extend
        raise KeyError("rolled back")
    assert _version(runs) == version and _who(engine) == ["ann"]
    assert seen == [("COLLECTING", "COLLECTING")]
    with engine.connect() as conn:  # a connection not yet in a transaction: it begins one
        with runs.atomic(connection=conn):
            assert runs.transition(W1, "COLLECTING", from_="COLLECTING").applied
        conn.commit()
    assert _version(runs) == version + 1


def test_threads_each_in_their_own_session_move_the_row_once(engine: Engine) -> None:
    """Eight sessions at once each write a submission and try the same move: one applies,
    the seven refusals leave their sessions' own writes to commit."""
    seen: list[Any] = []
    runs = _runs(engine, seen)
    runs.create(W1)
    seen.clear()
    barrier = threading.Barrier(8)

    def one(i: int) -> bool:
        barrier.wait(timeout=30)
        with Session(engine) as session, session.begin():
            session.add(Submission(week=W1, who=f"t{i}"))
            with runs.atomic(session=session):
                return runs.transition(W1, "COLLECTING", from_="DRAFT").applied

    with ThreadPoolExecutor(8) as pool:
        applied = list(pool.map(one, range(8)))
    assert applied.count(True) == 1
    assert len(_who(engine)) == 8
    assert seen == [("COLLECTING", "COLLECTING")]  # one move, published once


# -- what the store refuses, and how errors reach the caller -------------------------------


def test_the_store_refuses_what_it_cannot_speak(engine: Engine, tmp_path: Any) -> None:
    for url in ("mssql+pyodbc://", "postgresql+pg8000://"):
        with pytest.raises(UsageError, match=r"mssql|pg8000"):
            SQLAlchemyStore(create_engine(url, module=sqlite3))
    with pytest.raises(UsageError, match="AsyncEngine"):
        SQLAlchemyStore(sqlalchemy_engine("sqlite", "async", f"{tmp_path}/a.db"))  # type: ignore[arg-type]
    runs = _runs(engine, [])
    with engine.connect() as conn, Session(engine) as session:
        with pytest.raises(UsageError, match="not both"), runs.atomic(connection=conn,
                                                                      session=session):
            pass
        with pytest.raises(UsageError, match="read-only"), runs.store.atomic(
                connection=conn, read_only=True):
            pass


NOWHERE = "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2"


def test_connection_errors_arrive_translated(tmp_path: Any) -> None:
    with pytest.raises(ConnectionLostError) as caught:
        Lifecycle(SQLAlchemyStore(create_engine(NOWHERE)), RUNS).get(W1)
    assert caught.value.__cause__ is not None  # the driver's error
    (tmp_path / "a_directory.db").mkdir()
    with pytest.raises(StoreError):
        Lifecycle(SQLAlchemyStore(create_engine(f"sqlite:///{tmp_path}/a_directory.db")),
                  RUNS).get(W1)


async def test_sqlalchemys_own_errors_are_read_through_the_driver_error_they_carry() -> None:
    engine = create_async_engine(NOWHERE)
    try:
        with pytest.raises(ConnectionLostError) as caught:
            await AsyncLifecycle(AsyncSQLAlchemyStore(engine), RUNS).get(W1)
        assert isinstance(caught.value.__cause__, DBAPIError)  # the driver's in .orig
    finally:
        await engine.dispose()
    wrapped = IntegrityError("INSERT ...", {}, sqlite3.IntegrityError("UNIQUE constraint failed"))
    assert isinstance(translate(wrapped), InvariantViolation)


# -- the async engine ---------------------------------------------------------------------


async def test_an_async_session_commits_with_the_move_and_publishes_after(
        async_engine: AsyncEngine) -> None:
    published = asyncio.Event()
    seen: list[Any] = []
    runs: AsyncLifecycle

    async def publish(event: Any) -> None:
        seen.append((event.to_state, await runs.state(event.key[0])))
        published.set()

    runs = AsyncLifecycle(AsyncSQLAlchemyStore(async_engine), RUNS_IN_PROCESS,
                          publishers=[publish])
    await runs.create_schema()
    await runs.create(W1)
    await asyncio.wait_for(published.wait(), 10)
    published.clear()
    seen.clear()

    async with AsyncSession(async_engine) as session:
        session.add(Submission(week=W1, who="ann"))
        async with runs.atomic(session=session):
            assert (await runs.transition(W1, "COLLECTING")).applied
        await session.rollback()
    async with AsyncSession(async_engine) as session:
        session.add(Submission(week=W1, who="bob"))
        async with runs.atomic(session=session):
            assert (await runs.transition(W1, "COLLECTING")).applied
        assert seen == [] and await runs.state(W1) == "DRAFT"
        await session.commit()
    await asyncio.wait_for(published.wait(), 10)
    assert seen == [("COLLECTING", "COLLECTING")]
    async with AsyncSession(async_engine) as session:
        count = await session.scalar(select(func.count()).select_from(Submission))
        assert count == 1  # bob; ann's transaction rolled back with its move
    assert seen == [("COLLECTING", "COLLECTING")]  # the rolled-back move never published


SQLITE_ONLY = """
import sys
from sqlalchemy import create_engine
import rowstate
import rowstate.ext
from rowstate.contrib.sqlalchemy import SQLAlchemyStore
store = SQLAlchemyStore(create_engine("sqlite:///" + sys.argv[1]))
assert store.run(rowstate.ext.Batch((("SELECT 1", []),))) == [[(1,)]]
with store.atomic() as tx:
    assert tx.execute("SELECT 2 AS n") == [{"n": 2}]
print(",".join(sorted(m for m in ("psycopg", "psycopg_pool") if m in sys.modules)))
"""


def test_a_sqlite_engine_loads_no_postgresql_driver(tmp_path: Any) -> None:
    out = subprocess.run([sys.executable, "-c", SQLITE_ONLY, f"{tmp_path}/only.db"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_store_of_rowstate_own_refuses_to_join_a_callers_transaction(tmp_path: Any) -> None:
    """``connection=``/``session=`` name a transaction only the contrib stores can join:
    elsewhere a clear UsageError, not a TypeError from deep inside the store."""
    import rowstate
    from rowstate import Binding, Edge, Lifecycle, Machine, UsageError

    machine = Machine("j", states=["A", "B"], initial="A", edges=[Edge("go", "A", "B")])
    store = rowstate.connect(f"sqlite:///{tmp_path}/own.db")
    try:
        lc = Lifecycle(store, Binding(machine, table="j", key=("id",)))
        with pytest.raises(UsageError, match="cannot join"), lc.atomic(connection=object()):
            pass
    finally:
        store.close()
