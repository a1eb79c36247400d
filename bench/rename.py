"""Part of the ``growth`` case: a state renamed on a table of 1,000,000 rows (``--quick``:
100,000), on PostgreSQL and SQLite.

The rows are spread over four states, a quarter each (250,000 in the renamed state); none
holds a lease. The library's side is :func:`rowstate.migrations.rename_state` (its
statement locks the rows of the old name, checks that none holds a live lease, moves them
and writes an event per row); the hand-written side is what one would write without it,
in the same run: ``UPDATE ... SET state`` and ``INSERT INTO events SELECT ...`` in one
statement (PostgreSQL's CTE) or one transaction (SQLite), writing the same event rows.
The two sides take turns renaming the state back and forth (B -> B2 -> B ...), the order
alternating per round; PostgreSQL's table is vacuumed after every rename, outside the
timing, so neither side pays for the other's dead rows.

ratio = library rows/s / hand-written rows/s (the median of the per-round ratios).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from rowstate import Binding, Edge, Lease, Lifecycle, Machine
from rowstate.migrations import rename_state
from rowstate.protocol import Batch

from .env import Env
from .harness import Result, Settings

TARGET = 0.80  # the set-based move's goal (bulk_transition): the lease check costs < 20%
EVENTS = ("machine, row_key, edge, from_state, to_state, owner, data, version, created_at, "
          "actor, note")


def machine(renamed: str) -> Machine:
    return Machine("ren", states=["A", renamed, "C", "D"], initial="A",
                   edges=[Edge("ab", "A", renamed), Edge("bc", renamed, "C"),
                          Edge("cd", "C", "D"), Edge("work", renamed, renamed, lease="w")])


def binding(renamed: str) -> Binding:
    return Binding(machine(renamed), table="rename_rows", key="id", version="version",
                   lease=Lease(at="lease_at", kind="lease_kind", token="lease_token"),
                   events="rename_events", column_types={"id": "BIGINT"})


def _populate(backend: str, conn: Any, size: int) -> None:
    states = "CASE x % 4 WHEN 0 THEN 'A' WHEN 1 THEN 'B' WHEN 2 THEN 'C' ELSE 'D' END"
    if backend == "postgresql":
        pg_states = states.replace("%", "%%")  # psycopg's placeholders
        conn.execute(f"INSERT INTO rename_rows (id, state, version) SELECT x, {pg_states}, 1 "
                     "FROM generate_series(1, %s) AS g(x)", (size,))
        conn.execute("VACUUM ANALYZE rename_rows")
        return
    conn.execute("BEGIN")
    conn.execute(f"WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g "
                 f"WHERE x < ?) INSERT INTO rename_rows (id, state, version) "
                 f"SELECT x, {states}, 1 FROM g", (size,))
    conn.execute("COMMIT")


def _handwritten(backend: str, store: Any) -> Callable[[str, str], int]:
    """The same rows moved and the same event rows written, without the lease check."""
    if backend == "postgresql":
        sql = ("WITH upd AS (UPDATE rename_rows SET state = %s, version = version + 1 "
               "WHERE state = %s RETURNING id, version), "
               f"ev AS (INSERT INTO rename_events ({EVENTS}) SELECT 'ren', "
               "'[' || upd.id || ']', 'rename', %s, %s, NULL, NULL, upd.version, now(), NULL, %s "
               "FROM upd RETURNING 1) SELECT count(*) FROM ev")

        def move(src: str, dst: str) -> int:
            note = f"renamed from {src} to {dst}"
            rows = store.run(Batch(((sql, [dst, src, src, dst, note]),)))
            return int(rows[0][0][0])
        return move
    ev = (f"INSERT INTO rename_events ({EVENTS}) SELECT 'ren', '[' || id || ']', 'rename', "
          "?, ?, NULL, NULL, version + 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), NULL, ? "
          "FROM rename_rows WHERE state = ?")
    up = "UPDATE rename_rows SET state = ?, version = version + 1 WHERE state = ?"

    def smove(src: str, dst: str) -> int:
        note = f"renamed from {src} to {dst}"
        rows = store.run(Batch(((ev, [src, dst, note, src]), (up, [dst, src]),
                                ("SELECT changes()", [])), transaction=True))
        return int(rows[-1][0][0])
    return smove


def run(env: Env, settings: Settings, backends: list[str],
        report: Callable[[Result], None]) -> None:
    size = 100_000 if settings.quick else 1_000_000
    rounds = 2 if settings.quick else 5
    for backend in backends:
        _run_one(env, backend, size, rounds, report)


def _run_one(env: Env, backend: str, size: int, rounds: int,
             report: Callable[[Result], None]) -> None:
    store = env.store(backend, 1)
    conn = env.connect(backend)
    try:
        named = {"B": Lifecycle(store, binding("B")), "B2": Lifecycle(store, binding("B2"))}
        conn.execute("DROP TABLE IF EXISTS rename_rows")
        conn.execute("DROP TABLE IF EXISTS rename_events")
        store.execute_script(named["B"].schema_sql())
        t0 = time.perf_counter()
        _populate(backend, conn, size)
        populate_s = time.perf_counter() - t0
        hand = _handwritten(backend, store)
        current = "B"
        times: dict[str, list[float]] = {"library": [], "hand": []}

        def library(src: str, dst: str) -> int:
            got = rename_state(named[dst], src, dst)  # the machine that calls it dst
            assert got.applied, got
            return got.moved

        for r in range(rounds):
            sides = [("library", library), ("hand", hand)]
            for name, side in sides if r % 2 == 0 else sides[::-1]:
                other = "B2" if current == "B" else "B"
                t0 = time.perf_counter()
                moved = side(current, other)
                times[name].append(time.perf_counter() - t0)
                assert moved == size // 4, (name, moved)
                current = other
                if backend == "postgresql":
                    conn.execute("VACUUM ANALYZE rename_rows")
        rows = size // 4
        lib_s, hand_s = statistics.median(times["library"]), statistics.median(times["hand"])
        ratios = [h / lib for lib, h in zip(times["library"], times["hand"], strict=True)]
        detail: dict[str, Any] = {
            "rows_in_table": size, "rows_renamed": rows,
            "library_s": [round(t, 2) for t in times["library"]],
            "hand_s": [round(t, 2) for t in times["hand"]],
            "populate_s": round(populate_s, 1),
            "median_round_ratio": round(statistics.median(ratios), 3),
            "note": f"{rows:,} of {size:,} rows renamed: library {lib_s:.2f} s, "
                    f"hand-written {hand_s:.2f} s",
        }
        report(Result("growth", backend, f"rename_{size // 1000}k", 1, rows / lib_s,
                      rows / hand_s, f">= {TARGET:.2f}", TARGET, detail=detail))
    finally:
        conn.close()
        store.close()
