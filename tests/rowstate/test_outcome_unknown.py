"""A call whose COMMIT got no answer raises OutcomeUnknown, and ``resolve`` tells what became
of it (issue 30).

The network is cut for real, by a relay between the store and the shared server
(:mod:`support.cut_link`), at the message that commits: a unit's ``COMMIT`` or the Sync of
a single autocommitted statement (a transition, ``transition_many``, a leased act's
finalize, a finalization claim). Both ways it fails are played: the message reached the
server (it committed: the row moved) and it did not (nothing moved). Both must raise
:class:`~rowstate.OutcomeUnknown`, never a refusal and never a plain result, and
``lifecycle.resolve`` must answer ``applied`` exactly when the row moved; a loss before
anything could commit (a read, a unit's BEGIN) stays a plain ConnectionLostError.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rowstate import (
    ActiveLease,
    AsyncLifecycle,
    ConnectionLostError,
    InvalidTransitionError,
    Lifecycle,
    OutcomeUnknown,
)
from rowstate.stores import AsyncPostgresStore, PostgresStore, pgsettle
from support.cut_link import CutLink, commit, sync
from support.engine import JOBS
from support.services import LOCALHOST

pytestmark = pytest.mark.postgres

TWINS = ["sync", "async"]
REACHED = [pytest.param(True, id="commit-reached"), pytest.param(False, id="commit-lost")]


async def call(got: Any) -> Any:
    """A front end's answer, awaited on the async twin."""
    return await got if inspect.isawaitable(got) else got


@asynccontextmanager
async def relayed(schema: str, twin: str) -> AsyncIterator[tuple[CutLink, Any, Any]]:
    """A lifecycle on JOBS whose every connection goes through a :class:`CutLink`."""
    params = conninfo_to_dict(schema)
    with CutLink(str(params.get("host") or LOCALHOST), int(params.get("port") or 5432)) as link:
        url = make_conninfo(schema, host=LOCALHOST, hostaddr=None, port=link.port,
                            sslmode="disable")
        if twin == "sync":
            store: Any = PostgresStore(url, min_size=1, max_size=2)
            lc: Any = Lifecycle(store, JOBS)
        else:
            store = AsyncPostgresStore(url, min_size=1, max_size=2)
            lc = AsyncLifecycle(store, JOBS)
        try:
            await call(lc.create_schema())
            yield link, store, lc
        finally:
            await call(store.close())


def key() -> str:
    return f"job-{uuid.uuid4().hex[:8]}"


async def transition(lc: Any, store: Any, link: CutLink, k: str, reached: bool) -> Any:
    link.cut_at(sync, deliver=reached)
    return await call(lc.transition(k, "READY", from_="NEW"))


async def transition_many(lc: Any, store: Any, link: CutLink, k: str, reached: bool) -> Any:
    link.cut_at(sync, deliver=reached)
    return await call(lc.transition_many("READY", keys=[k], from_="NEW"))


async def in_a_unit(lc: Any, store: Any, link: CutLink, k: str, reached: bool) -> Any:
    link.cut_at(commit, deliver=reached)
    if isinstance(lc, Lifecycle):
        with store.atomic():
            return lc.transition(k, "READY", from_="NEW")
    async with store.atomic():
        return await lc.transition(k, "READY", from_="NEW")


async def leased_act(lc: Any, store: Any, link: CutLink, k: str, reached: bool) -> Any:
    await call(lc.transition(k, "READY", from_="NEW"))

    def act(lease: ActiveLease) -> str:  # the act done, its finalize is cut
        link.cut_at(sync, deliver=reached)
        return "sent"

    return await call(lc.run(k, "start", act))


# (the call, the move ``resolve`` looks for: to, from_)
MOVES: dict[str, tuple[Callable[..., Any], str, str]] = {
    "transition": (transition, "READY", "NEW"),
    "transition_many": (transition_many, "READY", "NEW"),
    "unit": (in_a_unit, "READY", "NEW"),
    "leased_act": (leased_act, "RUNNING", "READY"),
}


@pytest.mark.parametrize("reached", REACHED)
@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("move", list(MOVES))
async def test_a_commit_without_an_answer_is_outcome_unknown_and_resolves(
        engine_pg_schema: str, twin: str, move: str, reached: bool) -> None:
    run, to, from_ = MOVES[move]
    async with relayed(engine_pg_schema, twin) as (link, store, lc):
        k = key()
        await call(lc.create(k))
        before = (await call(lc.get(k)))["version"]
        with pytest.raises(OutcomeUnknown) as info:
            await run(lc, store, link, k, reached)
        assert link.cuts == 1
        assert isinstance(info.value, ConnectionLostError)  # what run() and apps catch
        assert isinstance(info.value.__cause__, psycopg.OperationalError)

        got = await call(lc.resolve(k, to, from_=from_, since=before))
        assert got.applied is reached
        assert bool(got) is reached
        assert got.state == (to if reached else from_)
        assert (got.event is not None) is reached
        if reached:
            assert (got.event.from_state, got.event.to_state) == (from_, to)
        # the same answer without ``since``: the row's last event
        assert (await call(lc.resolve(k, to, from_=from_))).applied is reached
        # and a retry of the move, idempotent by its from-state, agrees
        if move != "leased_act":
            again = await call(lc.transition(k, to, from_=from_))
            assert again.applied is not reached
            assert again.state == to


@pytest.mark.parametrize("reached", REACHED)
@pytest.mark.parametrize("twin", TWINS)
async def test_a_finalization_claim_without_an_answer_is_outcome_unknown(
        engine_pg_schema: str, twin: str, reached: bool) -> None:
    async with relayed(engine_pg_schema, twin) as (link, _, lc):
        k = key()
        await call(lc.create(k))
        await call(lc.transition(k, "READY", from_="NEW"))
        link.cut_at(sync, deliver=reached)
        with pytest.raises(OutcomeUnknown):
            await call(lc.claim_finalization(k, "worker-1", "publish"))
        row = await call(lc.get(k))  # a claim is resolved by reading the row
        assert (row["fin_holder"] == "worker-1") is reached


@pytest.mark.parametrize("twin", TWINS)
async def test_a_loss_before_anything_could_commit_stays_connection_lost(
        engine_pg_schema: str, twin: str) -> None:
    """A read (its Sync), and a unit cut at its BEGIN: nothing was in flight that commits,
    so the answer is a plain ConnectionLostError, and nothing moved."""
    async with relayed(engine_pg_schema, twin) as (link, store, lc):
        k = key()
        await call(lc.create(k))
        link.cut_at(sync, deliver=True)
        with pytest.raises(ConnectionLostError) as read:
            await call(lc.get(k))
        assert type(read.value) is ConnectionLostError

        link.cut_at(lambda kind, body: kind == b"Q" and body.startswith(b"BEGIN"),
                    deliver=True)
        with pytest.raises(ConnectionLostError) as begun:
            await in_a_unit_plain(lc, store, k)
        assert type(begun.value) is ConnectionLostError
        assert link.cuts == 2
        assert (await call(lc.get(k)))["state"] == "NEW"


async def in_a_unit_plain(lc: Any, store: Any, k: str) -> Any:
    if isinstance(lc, Lifecycle):
        with store.atomic():
            return lc.transition(k, "READY", from_="NEW")
    async with store.atomic():
        return await lc.transition(k, "READY", from_="NEW")


async def test_resolve_checks_its_input_before_any_io(engine_pg_schema: str) -> None:
    async with relayed(engine_pg_schema, "sync") as (_link, _store, lc):
        with pytest.raises(InvalidTransitionError):  # NEW -> DONE: no such edge
            lc.resolve("x", "DONE", from_="NEW")
        assert lc.resolve("no-such-row", "READY", from_="NEW").applied is False


def test_the_lost_session_is_ended_before_the_error_is_raised(engine_pg_schema: str) -> None:
    """What makes ``resolve`` exact at once: the store ends the session whose COMMIT lost
    its answer (it might still be committing, or holding the row's lock) and waits for it.
    A session is named by its pid AND the client port its server saw, so a pid alone (a
    restarted server's, another client's behind a proxy) is never ended."""
    conn = psycopg.connect(engine_pg_schema, autocommit=True)
    other = psycopg.connect(engine_pg_schema, autocommit=True)
    try:
        pgsettle.remember(conn)
        pgsettle.remember(other)
        lost = pgsettle.session(conn)
        assert lost is not None and lost.pid == conn.info.backend_pid
        wrong_port = lost._replace(client_port=lost.client_port + 1)
        pgsettle.settle(engine_pg_schema, wrong_port)
        assert conn.execute("SELECT 1").fetchone() == (1,)  # left alone
        pgsettle.settle(engine_pg_schema, lost)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
        assert other.execute("SELECT 1").fetchone() == (1,)
        with psycopg.connect(engine_pg_schema) as check:  # gone when settle returned
            assert check.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                 (lost.pid,)).fetchone() == (0,)
    finally:
        conn.close()
        other.close()
