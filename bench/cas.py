"""Cases 1-4: one door against the hand-written statements it replaces.

1. ``pure_transition``: A -> B -> A on disjoint rows (binding: version column, no events)
   vs ``UPDATE ... SET state, version = version + 1 WHERE id AND state RETURNING``.
2. ``outbox_transition``: the same with the events table on, vs the hand-written CTE
   (PostgreSQL) / ``BEGIN IMMEDIATE`` transaction (SQLite) writing the row and the event.
3. ``leased_edge``: ``run()`` (claim, no-op act, finalize with the fencing token) vs the
   two hand-written UPDATEs (claim bumping the token; finalize checking it). The act reads
   no row, so the call says ``returning=()``, as the hand-written claim returns one column.
4. ``finalization_path``: the dataset lifecycle's status handler (claim_finalization,
   terminal transition owner-checked from LOADING|CANCELLING clearing the claim and the
   reservation flag, release_finalization in ``finally``) vs its three hand-written UPDATEs;
   ``returning=()``: the handler reads no row, and each hand-written UPDATE returns one
   column.

Each runs on SQLite (file, WAL, synchronous=NORMAL) and PostgreSQL, sync and async, with 1
and 4 workers on disjoint rows. Async SQLite baselines run the sqlite3 calls on a thread
pool of the same size as the library's ``AsyncSQLiteStore``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rowstate import AsyncLifecycle, Binding, Lifecycle

from . import model
from .env import Env, sqlite_connect
from .harness import Result, Settings, Team, compare_async, compare_sync

ROWS_PER_WORKER = 64  # cycling cases: each worker flips its own rows in turn
TARGETS = {  # (case, backend) -> threshold of library / hand-written
    ("pure_transition", "postgresql"): 0.90,
    ("pure_transition", "sqlite"): 0.75,
    ("leased_edge", "postgresql"): 0.90,
    ("leased_edge", "sqlite"): 0.75,
    ("finalization_path", "postgresql"): 0.90,
    ("finalization_path", "sqlite"): 0.75,
    ("outbox_transition", "postgresql"): 0.90,
    ("outbox_transition", "sqlite"): 0.75,
}


class Refused(AssertionError):
    """A write that must apply did not: the benchmark itself is wrong."""


def _all(cur: Any) -> list[Any]:
    rows: list[Any] = cur.fetchall()
    return rows


# -- rows ----------------------------------------------------------------------------------


class Flip:
    """A worker's own rows, each flipped A -> B -> A in turn."""

    def __init__(self, ids: range) -> None:
        self.ids = list(ids)
        self.state = dict.fromkeys(self.ids, "A")
        self.i = 0

    def next(self) -> tuple[int, str, str]:
        key = self.ids[self.i % len(self.ids)]
        self.i += 1
        frm = self.state[key]
        return key, frm, model.OTHER[frm]

    def done(self, key: int, to: str) -> None:
        self.state[key] = to


class Fresh:
    """A worker's own LOADING datasets, consumed one per op and reset between phases."""

    def __init__(self, user: str, reset: Callable[[str, int], None]) -> None:
        self.user = user
        self.reset = reset
        self.i = 0

    def prepare(self, n: int) -> None:
        self.reset(self.user, max(n, self.i))
        self.i = 0

    def next(self) -> tuple[tuple[str, str], str]:
        i = self.i
        self.i += 1
        return (self.user, f"{i:07d}"), f"job-{i}"


# -- the library's side --------------------------------------------------------------------


def _noop_act(lease: Any) -> bool:
    return True


class LibFlip:
    def __init__(self, lc: Lifecycle, rows: Flip) -> None:
        self.lc, self.rows = lc, rows

    def op(self) -> None:
        key, frm, to = self.rows.next()
        if not self.lc.transition(key, to, from_=frm).applied:
            raise Refused(key)
        self.rows.done(key, to)


class ALibFlip(LibFlip):
    async def op(self) -> None:  # type: ignore[override]
        key, frm, to = self.rows.next()
        if not (await self.lc.transition(key, to, from_=frm)).applied:  # type: ignore[misc]
            raise Refused(key)
        self.rows.done(key, to)


class LibLeased(LibFlip):
    def op(self) -> None:
        key, frm, to = self.rows.next()
        if not self.lc.run(key, model.LEASED_EDGE[frm], _noop_act, returning=()).applied:
            raise Refused(key)
        self.rows.done(key, to)


class ALibLeased(LibFlip):
    async def op(self) -> None:  # type: ignore[override]
        key, frm, to = self.rows.next()
        got = await self.lc.run(key, model.LEASED_EDGE[frm], _noop_act,  # type: ignore[misc]
                                returning=())
        if not got.applied:
            raise Refused(key)
        self.rows.done(key, to)


class LibFinal:
    def __init__(self, lc: Any, rows: Fresh) -> None:
        self.lc, self.rows = lc, rows

    def prepare(self, n: int) -> None:
        self.rows.prepare(n)

    def op(self) -> None:
        key, job = self.rows.next()
        lc = self.lc
        if not lc.claim_finalization(key, job, "complete", returning=()).claimed:
            raise Refused(key)
        try:
            res = lc.transition(key, "SUCCEEDED", from_=("LOADING", "CANCELLING"), owner=job,
                                returning=())
            if not res.applied:
                raise Refused(key)
        finally:
            lc.release_finalization(key, job, "complete")


class ALibFinal(LibFinal):
    async def op(self) -> None:  # type: ignore[override]
        key, job = self.rows.next()
        lc = self.lc
        if not (await lc.claim_finalization(key, job, "complete", returning=())).claimed:
            raise Refused(key)
        try:
            res = await lc.transition(key, "SUCCEEDED", from_=("LOADING", "CANCELLING"),
                                      owner=job, returning=())
            if not res.applied:
                raise Refused(key)
        finally:
            await lc.release_finalization(key, job, "complete")


# -- the hand-written side -----------------------------------------------------------------
# ``step(conn)`` runs on a sqlite3 or a psycopg connection (both have ``execute``);
# ``astep(aconn)`` on a psycopg AsyncConnection.


class BaseFlip:
    def __init__(self, rows: Flip, table: str, pg: bool) -> None:
        self.rows = rows
        self.sql = model.sql(model.CAS, pg=pg, t=table)

    def step(self, conn: Any) -> None:
        key, frm, to = self.rows.next()
        if not _all(conn.execute(self.sql, (to, key, frm))):
            raise Refused(key)
        self.rows.done(key, to)

    async def astep(self, conn: Any) -> None:
        key, frm, to = self.rows.next()
        cur = await conn.execute(self.sql, (to, key, frm))
        if not await cur.fetchall():
            raise Refused(key)
        self.rows.done(key, to)


class BaseOutbox(BaseFlip):
    """The row and its event row: one CTE on PostgreSQL, one transaction on SQLite."""

    def __init__(self, rows: Flip, table: str, events: str, pg: bool) -> None:
        self.rows = rows
        self.pg = pg
        if pg:
            self.sql = model.CAS_EVENT_PG.format(t=table, ev=events)
        else:
            self.sql = model.sql(model.CAS, pg=False, t=table)
            self.event_sql = model.EVENT_SQLITE.format(ev=events)

    def step(self, conn: Any) -> None:
        key, frm, to = self.rows.next()
        machine, row_key, edge = model.AB.name, json.dumps([key]), model.EDGE_INTO[to]
        if self.pg:
            got = _all(conn.execute(self.sql, (to, key, frm, machine, row_key, edge, frm)))
            if not got:
                raise Refused(key)
        else:
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = _all(conn.execute(self.sql, (to, key, frm)))
                if not rows:
                    raise Refused(key)
                conn.execute(self.event_sql, (machine, row_key, edge, frm, to, rows[0][2]))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        self.rows.done(key, to)

    async def astep(self, conn: Any) -> None:
        key, frm, to = self.rows.next()
        machine, row_key, edge = model.AB.name, json.dumps([key]), model.EDGE_INTO[to]
        cur = await conn.execute(self.sql, (to, key, frm, machine, row_key, edge, frm))
        if not await cur.fetchall():
            raise Refused(key)
        self.rows.done(key, to)


class BaseLeased(BaseFlip):
    """Claim (bumping the fencing token), the act, finalize presenting the token; an act
    that raises releases the lease, as ``run()`` does."""

    TTL = 300.0

    def __init__(self, rows: Flip, table: str, pg: bool) -> None:
        self.rows = rows
        self.claim = model.sql(model.LEASE_CLAIM, pg=pg, t=table)
        self.finalize = model.sql(model.LEASE_FINALIZE, pg=pg, t=table)
        self.release = (f"UPDATE {table} SET acting_at = NULL, acting_kind = NULL "
                        f"WHERE id = {'%s' if pg else '?'}")

    def step(self, conn: Any) -> None:
        key, frm, to = self.rows.next()
        got = _all(conn.execute(self.claim, ("work", key, frm, "work", self.TTL)))
        if not got:
            raise Refused(key)
        token = got[0][0]
        try:
            _noop_act(None)
        except BaseException:
            conn.execute(self.release, (key,))
            raise
        if not _all(conn.execute(self.finalize, (to, key, frm, "work", token))):
            raise Refused(key)
        self.rows.done(key, to)

    async def astep(self, conn: Any) -> None:
        key, frm, to = self.rows.next()
        cur = await conn.execute(self.claim, ("work", key, frm, "work", self.TTL))
        got = await cur.fetchall()
        if not got:
            raise Refused(key)
        token = got[0][0]
        try:
            _noop_act(None)
        except BaseException:
            await conn.execute(self.release, (key,))
            raise
        cur = await conn.execute(self.finalize, (to, key, frm, "work", token))
        if not await cur.fetchall():
            raise Refused(key)
        self.rows.done(key, to)


class BaseFinal:
    TTL = 300.0

    def __init__(self, rows: Fresh, table: str, pg: bool) -> None:
        self.rows = rows
        self.claim = model.sql(model.FCLAIM, pg=pg, t=table)
        self.terminal = model.sql(model.FTERMINAL, pg=pg, t=table)
        self.release = model.sql(model.FRELEASE, pg=pg, t=table)

    def prepare(self, n: int) -> None:
        self.rows.prepare(n)

    def step(self, conn: Any) -> None:
        (user, ds), job = self.rows.next()
        scope = "complete"
        if not _all(conn.execute(self.claim, (job, scope, user, ds, job, scope, self.TTL))):
            raise Refused(ds)
        try:
            if not _all(conn.execute(self.terminal, (user, ds, job))):
                raise Refused(ds)
        finally:
            _all(conn.execute(self.release, (user, ds, job, scope)))

    async def astep(self, conn: Any) -> None:
        (user, ds), job = self.rows.next()
        scope = "complete"
        cur = await conn.execute(self.claim, (job, scope, user, ds, job, scope, self.TTL))
        if not await cur.fetchall():
            raise Refused(ds)
        try:
            cur = await conn.execute(self.terminal, (user, ds, job))
            if not await cur.fetchall():
                raise Refused(ds)
        finally:
            cur = await conn.execute(self.release, (user, ds, job, scope))
            await cur.fetchall()


class SyncBase:
    def __init__(self, conn: Any, body: Any) -> None:
        self.conn, self.body = conn, body
        if hasattr(body, "prepare"):
            self.prepare = body.prepare

    def op(self) -> None:
        self.body.step(self.conn)


class AsyncPgBase(SyncBase):
    async def op(self) -> None:  # type: ignore[override]
        await self.body.astep(self.conn)


class SqliteThreads:
    """The async SQLite baseline's executor: a pool like AsyncSQLiteStore's, one sqlite3
    connection per pool thread."""

    def __init__(self, path: str, workers: int) -> None:
        self.path = path
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="bench-sqlite")
        self.local = threading.local()
        self.conns: list[sqlite3.Connection] = []

    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = sqlite_connect(self.path)
            self.conns.append(conn)
        return conn

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        for c in self.conns:
            c.close()


class _HopRows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    async def fetchall(self) -> list[Any]:
        return self.rows


class _HopConn:
    """An async face over the thread pool: each statement is one executor hop (as each
    batch is one hop in AsyncSQLiteStore), so both sides pay the same number of hops."""

    def __init__(self, threads: SqliteThreads) -> None:
        self.threads = threads

    def _run(self, sql: str, params: Any) -> list[Any]:
        return _all(self.threads.conn().execute(sql, params))

    async def execute(self, sql: str, params: Any) -> _HopRows:
        loop = asyncio.get_running_loop()
        return _HopRows(await loop.run_in_executor(self.threads.pool, self._run, sql, params))


class AsyncSqliteBase(SyncBase):
    def __init__(self, threads: SqliteThreads, body: Any) -> None:
        super().__init__(None, body)
        self.threads = threads
        self.hop = _HopConn(threads)

    def _step(self) -> None:
        self.body.step(self.threads.conn())

    async def op(self) -> None:  # type: ignore[override]
        if isinstance(self.body, BaseOutbox):
            # a transaction needs one connection throughout: one hop, as the library's
            # BEGIN IMMEDIATE batch is
            await asyncio.get_running_loop().run_in_executor(self.threads.pool, self._step)
        else:
            await self.body.astep(self.hop)


# -- tables and rows -----------------------------------------------------------------------


class Tables:
    """Creates the tables with the library's own DDL and hands out disjoint rows."""

    def __init__(self, env: Env, backend: str) -> None:
        self.env, self.backend = env, backend
        self.pg = backend == "postgresql"
        self.p = "%s" if self.pg else "?"
        self.admin = env.connect(backend)
        self.next_id = 1
        self.pure = model.ab_binding("bench_pure")
        self.outbox = model.ab_binding("bench_outbox", events="bench_events")
        self.leased = model.leased_binding("bench_leased")
        self.dataset = model.dataset_binding("bench_dataset")
        self.users = 0
        for b in (self.pure, self.outbox, self.leased, self.dataset):
            script = b.schema_sql(backend)
            if self.pg:
                self.admin.execute(script)
            else:
                self.admin.executescript(script)

    def close(self) -> None:
        self.admin.close()

    def flip_rows(self, b: Binding, count: int) -> range:
        lo = self.next_id
        self.next_id += count
        hi = lo + count - 1
        self.admin.execute(self._series(b.table, "id, state, version", "x, 'A', 0", lo, hi))
        return range(lo, hi + 1)

    def dataset_rows(self, count: int) -> str:
        """A new user's ``count`` datasets, LOADING with job ``job-<i>``."""
        self.users += 1
        user = f"u{self.users}"
        pad = "lpad(x::text, 7, '0')" if self.pg else "printf('%07d', x)"
        dr = "'{\"isJobRunning\": true}'" + ("::jsonb" if self.pg else "")
        cols = '"userId", "datasetId", "dataloadingStatus", "jobId", "__DR"'
        values = f"'{user}', {pad}, 'LOADING', 'job-' || x, {dr}"
        self.admin.execute(self._series("bench_dataset", cols, values, 0, count - 1))
        return user

    def reset_datasets(self, user: str, n: int) -> None:
        p = self.p
        dr = "'{\"isJobRunning\": true}'"
        self.admin.execute(
            f'UPDATE bench_dataset SET "dataloadingStatus" = \'LOADING\', "__DR" = {dr}, '
            '"finalizingJobId" = NULL, "finalizingScope" = NULL, "finalizingClaimTime" = NULL '
            f'WHERE "userId" = {p} AND "datasetId" < {p} '
            "AND \"dataloadingStatus\" <> 'LOADING'", (user, f"{n:07d}"))

    def _series(self, table: str, cols: str, values: str, lo: int, hi: int) -> str:
        if self.pg:
            return (f"INSERT INTO {table} ({cols}) SELECT {values} "
                    f"FROM generate_series({lo}, {hi}) AS g(x)")
        return (f"INSERT INTO {table} ({cols}) WITH RECURSIVE g(x) AS (SELECT {lo} "
                f"UNION ALL SELECT x + 1 FROM g WHERE x < {hi}) SELECT {values} FROM g")


# -- running one variant -------------------------------------------------------------------

CASES = ("pure_transition", "outbox_transition", "leased_edge", "finalization_path")


def _variant(tables: Tables, case: str, workers: int, cap: int, asyncio_: bool,
             ) -> tuple[Binding, list[Any], list[Any]]:
    """The binding, and per worker the library's rows and the baseline's body."""
    pg = tables.pg
    lib_rows: list[Any] = []
    bodies: list[Any] = []
    if case == "finalization_path":
        for _ in range(workers):
            lib_rows.append(Fresh(tables.dataset_rows(cap), tables.reset_datasets))
            bodies.append(BaseFinal(Fresh(tables.dataset_rows(cap), tables.reset_datasets),
                                    "bench_dataset", pg))
        return tables.dataset, lib_rows, bodies
    binding = {"pure_transition": tables.pure, "outbox_transition": tables.outbox,
               "leased_edge": tables.leased}[case]
    for _ in range(workers):
        lib_rows.append(Flip(tables.flip_rows(binding, ROWS_PER_WORKER)))
        rows = Flip(tables.flip_rows(binding, ROWS_PER_WORKER))
        if case == "pure_transition":
            bodies.append(BaseFlip(rows, binding.table, pg))
        elif case == "outbox_transition":
            bodies.append(BaseOutbox(rows, binding.table, "bench_events", pg))
        else:
            bodies.append(BaseLeased(rows, binding.table, pg))
    return binding, lib_rows, bodies


def _lib_worker(case: str, lc: Any, rows: Any, asyncio_: bool) -> Any:
    if case == "finalization_path":
        return (ALibFinal if asyncio_ else LibFinal)(lc, rows)
    if case == "leased_edge":
        return (ALibLeased if asyncio_ else LibLeased)(lc, rows)
    return (ALibFlip if asyncio_ else LibFlip)(lc, rows)


def run_sync(env: Env, tables: Tables, settings: Settings, team: Team, case: str,
             workers: int, cap: int) -> tuple[float, float, dict[str, Any]]:
    binding, lib_rows, bodies = _variant(tables, case, workers, cap, False)
    store = env.store(tables.backend, workers)
    conns = [env.connect(tables.backend) for _ in range(workers)]
    try:
        lc = Lifecycle(store, binding)
        lib = [_lib_worker(case, lc, rows, False) for rows in lib_rows]
        base = [SyncBase(c, body) for c, body in zip(conns, bodies, strict=True)]
        return compare_sync(settings, team, lib, base, cap=cap)
    finally:
        for c in conns:
            c.close()
        store.close()


async def run_async(env: Env, tables: Tables, settings: Settings, case: str, workers: int,
                    cap: int) -> tuple[float, float, dict[str, Any]]:
    binding, lib_rows, bodies = _variant(tables, case, workers, cap, True)
    store = env.astore(tables.backend, workers)
    conns: list[Any] = []
    threads: SqliteThreads | None = None
    try:
        lc = AsyncLifecycle(store, binding)
        lib = [_lib_worker(case, lc, rows, True) for rows in lib_rows]
        base: list[Any]
        if tables.pg:
            conns = [await env.aconnect() for _ in range(workers)]
            base = [AsyncPgBase(c, body) for c, body in zip(conns, bodies, strict=True)]
        else:
            threads = SqliteThreads(env.sqlite_path, workers)
            base = [AsyncSqliteBase(threads, body) for body in bodies]
        return await compare_async(settings, lib, base, cap=cap)
    finally:
        for c in conns:
            await c.close()
        if threads is not None:
            threads.close()
        await store.close()


def run(env: Env, settings: Settings, backends: list[str], cases: set[str],
        report: Callable[[Result], None]) -> None:
    cap = 3000 if settings.quick else 20000  # datasets per worker a phase may consume
    teams = {w: Team(w) for w in (1, 4)}
    try:
        for case in CASES:
            if case not in cases:
                continue
            for backend in backends:
                tables = Tables(env, backend)
                try:
                    for mode in ("sync", "async"):
                        for workers in (1, 4):
                            if mode == "sync":
                                lib_s, base_s, detail = run_sync(
                                    env, tables, settings, teams[workers], case, workers, cap)
                            else:
                                lib_s, base_s, detail = asyncio.run(run_async(
                                    env, tables, settings, case, workers, cap))
                            threshold = TARGETS.get((case, backend))
                            report(Result(case, backend, mode, workers, lib_s, base_s,
                                          f">= {threshold:.2f}" if threshold else None,
                                          threshold, detail=detail))
                finally:
                    tables.close()
    finally:
        for t in teams.values():
            t.close()
