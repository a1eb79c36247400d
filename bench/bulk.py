"""``bulk_transition``: ``transition_many`` at 1,000 rows per call against the limit, a
hand-written set-based statement that moves the same rows and writes the same event rows;
with the per-row speed of a hand-written one-row loop (UPDATE + event per row) for scale.

``ratio`` = library rows/s / hand-written set-based rows/s (goal >= 0.80); ``detail`` has
the one-row loop's rows/s and the library's speed-up over it. Both sides move the same
1,000 rows back and forth (A -> B, then B -> A), in alternating rounds, on one connection.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from rowstate import Binding, Edge, Lifecycle, Machine

from .harness import Result, Settings

ROWS = 1000
FLIP = Machine("bulk", states=["A", "B"], initial="A",
               edges=[Edge("ab", "A", "B"), Edge("ba", "B", "A")])
BULK = Binding(FLIP, table="bulk_rows", key="id", version="version", events="bulk_events",
               column_types={"id": "BIGINT"})
EVENTS = ("machine, row_key, edge, from_state, to_state, owner, data, version, created_at")


def _handwritten_set(backend: str, store: Any) -> Callable[[list[int], str, str, str], int]:
    from rowstate.protocol import Batch

    if backend == "postgresql":
        sql = ("WITH upd AS (UPDATE bulk_rows SET state = %s, version = version + 1 "
               "WHERE id = ANY(%s) AND state = %s RETURNING id, version), "
               f"ev AS (INSERT INTO bulk_events ({EVENTS}) SELECT 'bulk', "
               "'[' || upd.id || ']', %s, %s, %s, NULL, NULL, upd.version, now() FROM upd "
               "RETURNING id) SELECT count(*) FROM upd")

        def move(ids: list[int], src: str, dst: str, edge: str) -> int:
            rows = store.run(Batch(((sql, [dst, ids, src, edge, src, dst]),)))
            return int(rows[0][0][0])
        return move
    keys = "(SELECT value FROM json_each(?))"
    ev = (f"INSERT INTO bulk_events ({EVENTS}) SELECT 'bulk', '[' || id || ']', ?, ?, ?, "
          "NULL, NULL, version + 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM bulk_rows "
          f"WHERE id IN {keys} AND state = ?")
    up = (f"UPDATE bulk_rows SET state = ?, version = version + 1 WHERE id IN {keys} "
          "AND state = ? RETURNING id")

    def smove(ids: list[int], src: str, dst: str, edge: str) -> int:
        text = json.dumps(ids)
        rows = store.run(Batch(((ev, [edge, src, dst, text, src]), (up, [dst, text, src])),
                               transaction=True))
        return len(rows[1])
    return smove


def _handwritten_loop(backend: str, store: Any) -> Callable[[list[int], str, str, str], int]:
    from rowstate.protocol import Batch

    p = "%s" if backend == "postgresql" else "?"
    now = "now()" if backend == "postgresql" else "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    sql = (f"UPDATE bulk_rows SET state = {p}, version = version + 1 WHERE id = {p} "
           f"AND state = {p} RETURNING version")
    ev = (f"INSERT INTO bulk_events ({EVENTS}) VALUES ('bulk', {p}, {p}, {p}, {p}, NULL, "
          f"NULL, {p}, {now})")

    def move(ids: list[int], src: str, dst: str, edge: str) -> int:
        done = 0
        for i in ids:
            got = store.run(Batch(((sql, [dst, i, src]),), transaction=False))
            if got[0]:
                store.run(Batch(((ev, [f"[{i}]", edge, src, dst, got[0][0][0]]),)))
                done += 1
        return done
    return move


def _rate(move: Callable[[list[int], str, str, str], int], ids: list[int],
          state: list[str], calls: int) -> float:
    started = time.perf_counter()
    moved = 0
    for _ in range(calls):
        src = state[0]
        dst, edge = ("B", "ab") if src == "A" else ("A", "ba")
        moved += move(ids, src, dst, edge)
        state[0] = dst
    elapsed = time.perf_counter() - started
    assert moved == len(ids) * calls, f"moved {moved} of {len(ids) * calls}"
    return moved / elapsed


def run(env: Any, settings: Settings, backends: list[str],
        report: Callable[[Result], None]) -> None:
    rounds = 3 if settings.quick else 9
    calls = 2 if settings.quick else 6
    for backend in backends:
        store = env.store(backend, 1)
        lc = Lifecycle(store, BULK)
        lc.create_schema()
        ids = list(range(1, ROWS + 1))
        for i in ids:
            lc.ensure(i)
        state = [lc.state(1) or "A"]

        def library(keys: list[int], src: str, dst: str, edge: str,
                    lc: Lifecycle = lc) -> int:
            return len(lc.transition_many(dst, keys=keys, from_=src).applied)

        hand = _handwritten_set(backend, store)
        loop = _handwritten_loop(backend, store)
        lib_rates, hand_rates = [], []
        for _ in range(rounds):
            lib_rates.append(_rate(library, ids, state, calls))
            hand_rates.append(_rate(hand, ids, state, calls))
        loop_rate = _rate(loop, ids[:200], state, 1)  # last: it leaves the rows mixed
        lib, base = statistics.median(lib_rates), statistics.median(hand_rates)
        report(Result(
            "bulk_transition", backend, "sync", 1, lib, base, ">= 0.80", 0.80,
            detail={"rows_per_call": ROWS, "handwritten_one_row_loop_rows_s": round(loop_rate),
                    "library_over_one_row_loop": round(lib / loop_rate, 1),
                    "median_round_ratio": round(statistics.median(
                        a / b for a, b in zip(lib_rates, hand_rates, strict=True)), 3)}))
        store.close()
