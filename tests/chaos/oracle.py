"""The oracle: checks one history, property by property, from data alone.

A :class:`History` is what a chaos run leaves behind for one group of rows: the final rows,
the events table (the audit log, in id order) and the workers' log lines. The oracle trusts
the events table and the rows as the truth, and the logs as what the workers *saw*; it never
trusts a result the engine returned without checking it against the events.

How grants and writes are ordered without trusting clocks: a claim does not bump the row's
version, so a grant logged with version ``v`` happened after the row's ``v``-th event and
before its ``v+1``-th. Grants in the same *window* ``v`` are ordered by their tokens. Times
are compared only the way the engine compares them (the database's ``now()`` of one write
against a stored claim time), so a stale takeover is legal exactly when the engine says so.

Lines a SIGKILL lost can only hide a violation, never invent one: every rule below is stated
so that a missing line makes it skip, not fail.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from chaos.machine import BLOCKED, FINAL_TTL, INVARIANT_STATE, LEASE_TTL, MACHINE

Key = tuple[str, int]

PROPERTIES = (
    "legal_edges",
    "replay_final_state",
    "version_counts",
    "fencing_tokens",
    "single_lease_holder",
    "no_zombie_finalize",
    "single_finalization_holder",
    "finalization_blocks",
    "unique_invariant",
    "results_match_events",
    "no_stuck_rows",
    "clean_workers",
)


@dataclass
class History:
    group: str
    rows: dict[Key, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)  # id, key, edge, from, to,
    # data, version, at
    log: list[dict[str, Any]] = field(default_factory=list)
    swept: bool = True  # a sweeper ran after the TTLs: every row must have a stuck record

    @property
    def operations(self) -> int:
        """Engine calls that returned: each leaves exactly one of these lines."""
        return sum(1 for r in self.log
                   if r["o"] == "res" or r["o"] == "fclaim"
                   or (r["o"] == "lease" and r.get("via") == "claim"))


def _time(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def _key(rec: dict[str, Any]) -> Key:
    return (rec["g"], rec["r"])


class Oracle:
    def __init__(self, history: History) -> None:
        self.h = history
        self.events = sorted(history.events, key=lambda e: e["id"])
        self.by_row: dict[Key, list[dict[str, Any]]] = defaultdict(list)
        for e in self.events:
            self.by_row[e["key"]].append(e)
        self.leases: dict[Key, list[dict[str, Any]]] = defaultdict(list)
        self.fclaims: dict[Key, list[dict[str, Any]]] = defaultdict(list)
        # leases that may have been given back early (skip, never accuse, on these)...
        self.lease_released: set[tuple[Key, int]] = set()
        # ...and those that certainly were (a finalize after one of these is a zombie write)
        self.lease_given_back: set[tuple[Key, int]] = set()
        self.frel: set[tuple[Key, str, str]] = set()
        run_results: dict[tuple[Key, int], dict[str, Any]] = {}
        self.run_tokens: dict[int, int] = {}  # event id -> token, from run() results
        for rec in history.log:
            o = rec["o"]
            if o == "lease":
                self.leases[_key(rec)].append(rec)
            elif o == "fclaim":
                self.fclaims[_key(rec)].append(rec)
            elif o == "rel" or (o == "act" and rec["b"] in ("raise", "falsy")):
                # given back for sure: the holder never finalizes after these
                self.lease_given_back.add((_key(rec), rec["tok"]))
                self.lease_released.add((_key(rec), rec["tok"]))
            elif o == "frel":
                self.frel.add((_key(rec), rec["h"], rec["s"]))
            elif o == "res" and rec["op"] in ("run", "sweep") and rec.get("tok") is not None:
                run_results[(_key(rec), rec["tok"])] = rec
                if rec.get("ev") is not None:
                    self.run_tokens[rec["ev"]] = rec["tok"]
        # the act ran but its finalize was refused (INVARIANT...): run() gave the lease back
        # (with last_error) rather than holding the row for the TTL; a run whose result
        # line a SIGKILL lost may have done so too
        for key, recs in self.leases.items():
            for rec in recs:
                if rec.get("via") != "run":
                    continue
                res = run_results.get((key, rec["tok"]))
                if res is None or (not res["ok"] and res["reason"] != "LEASE_LOST"):
                    self.lease_released.add((key, rec["tok"]))

    def check(self) -> dict[str, list[str]]:
        checks: dict[str, Callable[[], Iterable[str]]] = {
            name: getattr(self, name) for name in PROPERTIES
        }
        return {name: list(fn()) for name, fn in checks.items()}

    # -- the events alone ----------------------------------------------------------------

    def legal_edges(self) -> Iterable[str]:
        """Every applied transition is an edge of the machine from the state it left."""
        state: dict[Key, str] = {}
        for e in self.events:
            left = state.get(e["key"], MACHINE.initial)
            try:
                edge = MACHINE.edge(e["edge"])
            except Exception:
                yield f"event {e['id']} {e['key']}: no edge named {e['edge']!r}"
                continue
            if (edge.src, edge.dst) != (e["from"], e["to"]):
                yield (f"event {e['id']} {e['key']}: edge {edge.name} is {edge.src}->{edge.dst},"
                       f" the event says {e['from']}->{e['to']}")
            if e["from"] != left:
                yield (f"event {e['id']} {e['key']}: left {e['from']} but the row was in "
                       f"{left}")
            state[e["key"]] = e["to"]

    def replay_final_state(self) -> Iterable[str]:
        """Replaying the events from the initial state gives each row's final state."""
        for key, row in self.h.rows.items():
            events = self.by_row.get(key, [])
            replayed = events[-1]["to"] if events else MACHINE.initial
            if row["state"] != replayed:
                yield f"{key}: row is {row['state']}, its events replay to {replayed}"
        for key in self.by_row:
            if key not in self.h.rows:
                yield f"{key}: events for a row that does not exist"

    def version_counts(self) -> Iterable[str]:
        """The version column equals the number of applied transitions (events) of the row,
        and the events' versions count 1, 2, 3... in id order."""
        for key, row in self.h.rows.items():
            events = self.by_row.get(key, [])
            if row["version"] != len(events):
                yield f"{key}: version {row['version']} but {len(events)} events"
            versions = [e["version"] for e in events]
            if versions != list(range(1, len(events) + 1)):
                bad = next(i for i, v in enumerate(versions, 1) if v != i)
                yield f"{key}: event versions are not 1..n (position {bad}: {versions[bad-1]})"

    def finalization_blocks(self) -> Iterable[str]:
        """No move enters a blocked state while a finalization claim is live (not stale,
        not released, not cleared by a move into a non-active state)."""
        ttl = timedelta(seconds=FINAL_TTL)
        for e in self.events:
            if e["to"] not in BLOCKED:
                continue
            before = [g for g in self.fclaims.get(e["key"], []) if g["v"] <= e["version"] - 1]
            if not before:
                continue
            g = max(before, key=lambda r: r["tok"])
            if (e["key"], g["h"], g["s"]) in self.frel:
                continue
            if any(g["v"] < x["version"] < e["version"] and x["to"] not in MACHINE.active
                   for x in self.by_row.get(e["key"], [])):
                continue
            if not _time(g["at"]) < _time(e["at"]) - ttl:
                yield (f"event {e['id']} {e['key']}: entered {e['to']} while finalization "
                       f"token {g['tok']} ({g['h']}/{g['s']}) was live")

    def unique_invariant(self) -> Iterable[str]:
        """At most one row in the invariant state at any time (events replayed in id order;
        a write that enters the state waits for the one that leaves it, so ids keep order)."""
        inside: set[Key] = set()
        for e in self.events:
            if e["to"] == INVARIANT_STATE:
                inside.add(e["key"])
            else:
                inside.discard(e["key"])
            if len(inside) > 1:
                yield f"after event {e['id']}: {sorted(inside)} all in {INVARIANT_STATE}"
        final = [k for k, r in self.h.rows.items() if r["state"] == INVARIANT_STATE]
        if len(final) > 1:
            yield f"final rows {sorted(final)} all in {INVARIANT_STATE}"

    # -- grants (logs) against the rows and the events -----------------------------------

    def fencing_tokens(self) -> Iterable[str]:
        """Each fencing token is granted once per row, tokens grow in grant order (a later
        window never holds a smaller token), and the row's counter covers them all."""
        for what, grants, column in (("lease", self.leases, "lease_token"),
                                     ("finalization", self.fclaims, "fin_token")):
            for key, recs in grants.items():
                seen: dict[int, str] = {}
                for rec in recs:
                    tok = rec["tok"]
                    if not isinstance(tok, int) or tok < 1:
                        yield f"{key}: {what} granted with token {tok!r}"
                        continue
                    if tok in seen:
                        yield (f"{key}: {what} token {tok} granted twice "
                               f"({seen[tok]} and {rec['w']})")
                    seen[tok] = rec["w"]
                ordered = sorted(recs, key=lambda r: r["tok"] or 0)
                for a, b in itertools.pairwise(ordered):
                    if b["v"] < a["v"]:
                        yield (f"{key}: {what} token {b['tok']} granted at version {b['v']}, "
                               f"before token {a['tok']} (version {a['v']})")
                row = self.h.rows.get(key)
                top = max((r["tok"] for r in recs if isinstance(r["tok"], int)), default=0)
                if row is not None and row[column] < top:
                    yield f"{key}: {column} is {row[column]} but token {top} was granted"

    def _windows(self, grants: dict[Key, list[dict[str, Any]]],
                 ) -> dict[tuple[Key, int], list[dict[str, Any]]]:
        out: dict[tuple[Key, int], list[dict[str, Any]]] = defaultdict(list)
        for key, recs in grants.items():
            for rec in recs:
                out[(key, rec["v"])].append(rec)
        for recs in out.values():
            recs.sort(key=lambda r: r["tok"])
        return out

    def single_lease_holder(self) -> Iterable[str]:
        """No two holders of a lease at once: a lease is taken over only once it is stale
        (or given back), and no other edge moves a row under a live lease."""
        ttl = timedelta(seconds=LEASE_TTL)
        windows = self._windows(self.leases)
        for (key, _), recs in windows.items():
            for a, b in itertools.pairwise(recs):
                if b["tok"] != a["tok"] + 1 or (key, a["tok"]) in self.lease_released:
                    continue
                if not _time(a["at"]) < _time(b["at"]) - ttl:
                    yield (f"{key}: lease token {b['tok']} ({b['w']}) granted "
                           f"{(_time(b['at']) - _time(a['at'])).total_seconds():.3f}s after "
                           f"token {a['tok']} ({a['w']}), which was live")
        for e in self.events:
            edge = MACHINE.edge(e["edge"]) if e["edge"] in MACHINE._by_name else None
            if edge is None or edge.lease:
                continue  # finalizes: no_zombie_finalize
            recs = windows.get((e["key"], e["version"] - 1))
            if not recs:
                continue
            last = recs[-1]
            if (e["key"], last["tok"]) in self.lease_released:
                continue
            if not _time(last["at"]) < _time(e["at"]) - ttl:
                yield (f"event {e['id']} {e['key']}: {e['edge']} applied while lease token "
                       f"{last['tok']} ({last['w']}) was live")

    def no_zombie_finalize(self) -> Iterable[str]:
        """A side-effecting edge is finalized only by the current holder of its lease: the
        token in the event was granted on this edge in the window right before it, was not
        given back, and was not taken over before the write."""
        windows = self._windows(self.leases)
        by_token = {(k, r["tok"]): r for k, recs in self.leases.items() for r in recs}
        for e in self.events:
            edge = MACHINE.edge(e["edge"]) if e["edge"] in MACHINE._by_name else None
            if edge is None or not edge.lease:
                continue
            data = e["data"] if isinstance(e["data"], dict) else {}
            tok = data.get("tok", self.run_tokens.get(e["id"]))
            if tok is None:
                if data.get("via") == "run":
                    continue  # run() wrote its data before the act; the result line is lost
                yield f"event {e['id']} {e['key']}: {edge.name} finalized without a token"
                continue
            grant = by_token.get((e["key"], tok))
            if grant is None:
                yield f"event {e['id']} {e['key']}: finalized with token {tok}, never granted"
                continue
            if grant["e"] != edge.name:
                yield (f"event {e['id']} {e['key']}: {edge.name} finalized with token {tok}, "
                       f"granted for {grant['e']}")
            if grant["v"] != e["version"] - 1:
                yield (f"event {e['id']} {e['key']}: token {tok} granted at version "
                       f"{grant['v']}, finalized as version {e['version']}: the row moved "
                       "under the lease")
            if (e["key"], tok) in self.lease_given_back:
                yield f"event {e['id']} {e['key']}: token {tok} finalized after its release"
            later = [r for r in windows.get((e["key"], e["version"] - 1), [])
                     if r["tok"] > tok]
            if later:
                yield (f"event {e['id']} {e['key']}: token {tok} ({grant['w']}) finalized "
                       f"after its lease was taken over by token {later[0]['tok']} "
                       f"({later[0]['w']})")

    def single_finalization_holder(self) -> Iterable[str]:
        """A finalization claim changes hands only when it is stale, released by its holder,
        or cleared by a move into a non-active state; a move made as the finalizer happens
        while the claim is still that finalizer's."""
        ttl = timedelta(seconds=FINAL_TTL)
        for key, recs in self.fclaims.items():
            ordered = sorted(recs, key=lambda r: r["tok"])
            events = self.by_row.get(key, [])
            for a, b in itertools.pairwise(ordered):
                if b["tok"] != a["tok"] + 1 or (a["h"], a["s"]) == (b["h"], b["s"]):
                    continue
                if (key, a["h"], a["s"]) in self.frel:
                    continue
                cleared = any(a["v"] < e["version"] <= b["v"]
                              and e["to"] not in MACHINE.active for e in events)
                if cleared or _time(a["at"]) < _time(b["at"]) - ttl:
                    continue
                yield (f"{key}: finalization token {b['tok']} ({b['h']}/{b['s']}) granted "
                       f"{(_time(b['at']) - _time(a['at'])).total_seconds():.3f}s after token "
                       f"{a['tok']} ({a['h']}/{a['s']}), which was live")
        by_token = {(k, r["tok"]): r for k, recs in self.fclaims.items() for r in recs}
        for e in self.events:
            data = e["data"] if isinstance(e["data"], dict) else {}
            if "fh" not in data:
                continue
            key, ft = e["key"], data.get("ft")
            grant = by_token.get((key, ft))
            if grant is None or (grant["h"], grant["s"]) != (data["fh"], data["fs"]):
                yield (f"event {e['id']} {key}: moved as finalizer {data['fh']}/{data['fs']} "
                       f"with token {ft}, which was not granted to it")
                continue
            if grant["v"] > e["version"] - 1:
                yield f"event {e['id']} {key}: claim token {ft} granted after the move"
            taken = [r for r in self.fclaims[key] if r["tok"] > ft
                     and r["v"] <= e["version"] - 1 and (r["h"], r["s"]) != (grant["h"],
                                                                            grant["s"])]
            if taken:
                yield (f"event {e['id']} {key}: moved as finalizer {grant['h']} after its "
                       f"claim went to {taken[0]['h']}/{taken[0]['s']} (token "
                       f"{taken[0]['tok']})")
            cleared = [x for x in self.by_row.get(key, [])
                       if grant["v"] < x["version"] < e["version"]
                       and x["to"] not in MACHINE.active]
            if cleared:
                yield (f"event {e['id']} {key}: moved as finalizer {grant['h']} although "
                       f"event {cleared[0]['id']} had cleared its claim")

    def results_match_events(self) -> Iterable[str]:
        """A result that says "applied" names an event that exists, of that row, into the
        state the result reports; a refused result names none."""
        by_id = {e["id"]: e for e in self.events}
        for rec in self.h.log:
            if rec["o"] != "res":
                continue
            ev = rec.get("ev")
            if not rec["ok"]:
                if ev is not None:
                    yield f"{_key(rec)}: refused {rec['op']} names event {ev}"
                continue
            if rec["op"] in ("t", "fmove", "run", "finalize", "sweep") and ev is None:
                yield f"{_key(rec)}: {rec['op']} applied without an event"
                continue
            if ev is None:
                continue
            e = by_id.get(ev)
            if e is None:
                yield f"{_key(rec)}: {rec['op']} applied as event {ev}, which is not stored"
            elif e["key"] != _key(rec) or e["to"] != rec.get("to", e["to"]):
                yield (f"{_key(rec)}: {rec['op']} says it moved to {rec.get('to')}, "
                       f"event {ev} is {e['key']} -> {e['to']}")

    def no_stuck_rows(self) -> Iterable[str]:
        """Once every TTL has passed, a newcomer can take each row's finalization claim and
        move the row."""
        if not self.h.swept:
            return
        stuck = {_key(r): r for r in self.h.log if r["o"] == "stuck"}
        for key in self.h.rows:
            rec = stuck.get(key)
            if rec is None:
                yield f"{key}: the sweeper never reached this row"
            elif not rec["fclaim"]:
                yield (f"{key}: finalization claim not takeable after its TTL "
                       f"({rec['fclaim_reason']})")
            elif not rec["moved"]:
                yield f"{key}: stuck in {rec['state']}: tried {rec['tried']}, none applied"

    def clean_workers(self) -> Iterable[str]:
        """No worker met an exception other than the ones its acts raise on purpose."""
        for rec in self.h.log:
            if rec["o"] == "exc":
                yield f"{rec['w']} on {rec.get('g')}/{rec.get('r')}: {rec['error']}"


    def coverage(self) -> dict[str, int]:
        """How much of what the properties guard actually happened in this history."""
        out: dict[str, int] = defaultdict(int)
        out["events"] = len(self.events)
        for (key, _), recs in self._windows(self.leases).items():
            for a, b in itertools.pairwise(recs):
                if b["tok"] == a["tok"] + 1 and (key, a["tok"]) not in self.lease_released:
                    out["stale_lease_takeovers"] += 1
        for recs in self.fclaims.values():
            ordered = sorted(recs, key=lambda r: r["tok"])
            for a, b in itertools.pairwise(ordered):
                if b["tok"] == a["tok"] + 1 and (a["h"], a["s"]) != (b["h"], b["s"]):
                    out["finalization_handovers"] += 1
        for rec in self.h.log:
            if rec["o"] == "res" and not rec["ok"] and rec["reason"]:
                out[f"refused_{rec['op']}_{rec['reason']}"] += 1
        return dict(out)


def check(history: History) -> dict[str, list[str]]:
    return Oracle(history).check()
