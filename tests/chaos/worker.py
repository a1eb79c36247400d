"""One chaos worker: ``python -m chaos.worker SPEC_JSON``.

It runs random operations against the rows of its groups until its deadline, and logs what it
observed, one JSON object per line, appended and flushed line by line (a SIGKILL loses at most
the line being written). What the oracle needs from the log:

``lease``   a lease granted: edge, fencing token, the row's version and ``acting_at`` then
``act``     an act started under a lease, and how it will behave (``raise``/``falsy`` mean the
            lease is given back by ``run``)
``rel``     about to release a lease (so the lease may have been given back)
``fclaim``  a finalization claim granted: token, version, ``fin_at``, holder, scope
``frel``    about to release a finalization claim
``res``     a result: operation, applied, reason, event id (for results that applied)
``exc``     an unexpected exception (an engine bug or a harness bug: the oracle reports it)

Every finalize (by ``run`` or by hand) carries its fencing token in the event data (``tok``),
and every move made under a finalization claim carries that claim (``fh``/``fs``/``ft``), so
the events table alone says which lease or claim each write was made under.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

from chaos.machine import (
    BINDING,
    FINAL_TTL,
    LEASE_TTL,
    LEASED,
    MACHINE,
    PURE,
    PURE_TARGETS,
    edges_from,
    pure_sources,
)
from rowstate import ActFailed as FailedAct
from rowstate import ActiveLease, AsyncLifecycle, Edge, Lifecycle
from rowstate.stores import AsyncPostgresStore, PostgresStore

SCOPES = ("a", "b")


class ActFailed(Exception):
    """What a failing act raises (expected: run() releases the lease and re-raises)."""


def iso(value: Any) -> str | None:
    return None if value is None else value.isoformat()


class Log:
    def __init__(self, path: str, wid: str) -> None:
        self.file: TextIO = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self.wid = wid

    def __call__(self, kind: str, **fields: Any) -> None:
        fields["o"] = kind
        fields["w"] = self.wid
        self.file.write(json.dumps(fields, separators=(",", ":")) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class SyncOverAsync:
    """The async front end (AsyncLifecycle on AsyncPostgresStore) behind the sync calls the
    worker makes, on one event loop: half of the workers drive the engine this way."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = AsyncPostgresStore(dsn, min_size=1, max_size=1)
        self.alc = AsyncLifecycle(self.store, BINDING)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.alc, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.loop.run_until_complete(method(*args, **kwargs))
        return call

    def close(self) -> None:
        self.loop.run_until_complete(self.store.close())
        self.loop.close()


class Worker:
    def __init__(self, lc: Any, log: Log, rng: random.Random, wid: str,
                 keys: list[tuple[str, int]], sleepy: float) -> None:
        self.lc = lc
        self.log = log
        self.rng = rng
        self.wid = wid
        self.keys = keys
        self.sleepy = sleepy  # scales the probability of acts/holders that outlive a TTL
        self.key: tuple[str, int] | None = None

    # -- helpers -------------------------------------------------------------------------

    def state(self, key: tuple[str, int]) -> str | None:
        return self.lc.state(key)

    def res(self, op: str, key: tuple[str, int], result: Any, **extra: Any) -> None:
        ok = bool(result)
        event = getattr(result, "event", None)
        self.log("res", op=op, g=key[0], r=key[1], ok=ok,
                 reason=getattr(result, "reason", None),
                 ev=None if event is None else event.id,
                 to=getattr(result, "state", None), **extra)

    def long_sleep(self, ttl: float) -> None:
        time.sleep(ttl + self.rng.uniform(0.05, 0.5))

    # -- operations ----------------------------------------------------------------------

    def op_transition(self, key: tuple[str, int], state: str | None) -> None:
        rng = self.rng
        if state is not None:
            choices = [e for e in edges_from(state) if not e.lease]
            edge = rng.choice(choices) if choices else rng.choice(PURE)
            to = edge.dst
            sources = pure_sources(to)
            pick = rng.random()
            from_: Any
            if pick < 0.3:
                from_ = None
            elif pick < 0.7:
                from_ = edge.src
            else:
                from_ = rng.sample(sources, rng.randint(1, len(sources)))
        else:
            to = rng.choice(PURE_TARGETS)
            sources = pure_sources(to)
            from_ = None if rng.random() < 0.3 else rng.sample(sources,
                                                              rng.randint(1, len(sources)))
        result = self.lc.transition(key, to, from_=from_, data={"w": self.wid})
        self.res("t", key, result)

    def leased_edge(self, state: str | None) -> Edge:
        choices = [e for e in edges_from(state) if e.lease]
        return self.rng.choice(choices) if choices else self.rng.choice(LEASED)

    def act(self, behaviour: str, data: dict[str, Any], key: tuple[str, int],
            ) -> Callable[[ActiveLease], Any]:
        def act(lease: ActiveLease) -> Any:
            row = lease.row
            self.log("lease", g=key[0], r=key[1], e=lease.edge.name, tok=lease.token,
                     v=row["version"], at=iso(row["acting_at"]), via="run")
            data["tok"] = lease.token  # serialised at finalize: the event names its lease
            self.log("act", g=key[0], r=key[1], tok=lease.token, b=behaviour)
            if behaviour == "raise":
                raise ActFailed(f"act of {self.wid} failed on purpose")
            if behaviour == "falsy":  # fails without raising
                return FailedAct("act returned 0")
            if behaviour == "stale":
                self.long_sleep(LEASE_TTL)
            elif behaviour == "nap":
                time.sleep(self.rng.uniform(0.0, LEASE_TTL / 3))
            return {"by": self.wid}
        return act

    def op_run(self, key: tuple[str, int], state: str | None) -> None:
        rng = self.rng
        edge = self.leased_edge(state)
        r = rng.random()
        stale = 0.04 * self.sleepy
        behaviour = ("stale" if r < stale else "raise" if r < stale + 0.1 else
                     "falsy" if r < stale + 0.17 else "nap" if r < stale + 0.22 else "ok")
        data: dict[str, Any] = {"w": self.wid, "via": "run"}
        # "n2" vetoes entering SENT (an entry guard): checked at the claim and the finalize
        payload = {"note": rng.choice(["n1", "n2"])} if rng.random() < 0.3 else None
        try:
            result = self.lc.run(key, edge.name, self.act(behaviour, data, key),
                                 holder=self.wid, payload=payload, data=data)
        except ActFailed:
            self.log("res", op="run", g=key[0], r=key[1], ok=False, reason="RAISED",
                     ev=None, to=None, e=edge.name)
            return
        self.res("run", key, result, e=edge.name, tok=data.get("tok"))

    def op_claim(self, key: tuple[str, int], state: str | None) -> None:
        rng = self.rng
        edge = self.leased_edge(state)
        claim = self.lc.claim(key, edge.name, holder=self.wid)
        if not claim.claimed:
            self.log("res", op="claim", g=key[0], r=key[1], ok=False, reason=claim.reason,
                     ev=None, to=claim.state, e=edge.name)
            return
        assert claim.row is not None
        self.log("lease", g=key[0], r=key[1], e=edge.name, tok=claim.token,
                 v=claim.row["version"], at=iso(claim.row["acting_at"]), via="claim")
        r = rng.random()
        if r < 0.04 * self.sleepy:
            self.long_sleep(LEASE_TTL)
        elif r < 0.1:
            time.sleep(rng.uniform(0.0, LEASE_TTL / 3))
        r = rng.random()
        if r < 0.7:
            result = self.lc.finalize(key, claim, data={"w": self.wid, "tok": claim.token})
            self.res("finalize", key, result, e=edge.name, tok=claim.token)
        elif r < 0.9:
            self.log("rel", g=key[0], r=key[1], tok=claim.token)
            rel = self.lc.release(key, claim, error="given back")
            self.res("release", key, rel, tok=claim.token)
        else:
            self.log("res", op="abandon", g=key[0], r=key[1], ok=True, reason=None, ev=None,
                     to=None, tok=claim.token)

    def op_finalization(self, key: tuple[str, int]) -> None:
        rng = self.rng
        scope = rng.choice(SCOPES)
        got = self.lc.claim_finalization(key, self.wid, scope)
        if not got.claimed:
            self.log("res", op="fclaim", g=key[0], r=key[1], ok=False, reason=got.reason,
                     ev=None, to=None, h=got.holder, s=got.scope)
            return
        assert got.row is not None
        self.log("fclaim", g=key[0], r=key[1], tok=got.token, v=got.row["version"],
                 at=iso(got.row["fin_at"]), h=self.wid, s=scope)
        token = got.token
        for _ in range(rng.randint(1, 3)):
            r = rng.random()
            if r < 0.015 * self.sleepy:
                time.sleep(FINAL_TTL + rng.uniform(0.02, 0.2))
            elif r < 0.06:
                time.sleep(rng.uniform(0.0, FINAL_TTL / 4))
            r = rng.random()
            if r < 0.55:
                # a move made as the finalizer: guarded on holding the claim
                state = got.row["state"] if rng.random() < 0.2 else self.state(key)
                choices = [e for e in edges_from(state) if not e.lease] or list(PURE)
                edge = rng.choice(choices)
                guards = {"fin_holder": self.wid, "fin_scope": scope}
                result = self.lc.transition(
                    key, edge.dst, from_=edge.src, guards=guards,
                    data={"w": self.wid, "fh": self.wid, "fs": scope, "ft": token})
                self.res("fmove", key, result, ft=token)
                if result.applied and edge.dst not in MACHINE.active:
                    return  # the claim is cleared with that move
            elif r < 0.75:
                self.log("frel", g=key[0], r=key[1], tok=token, h=self.wid, s=scope)
                rel = self.lc.release_finalization(key, self.wid, scope)
                self.res("frelease", key, rel, ft=token)
                return
            elif r < 0.9:
                again = self.lc.claim_finalization(key, self.wid, scope)
                if not again.claimed:
                    self.log("res", op="fclaim", g=key[0], r=key[1], ok=False,
                             reason=again.reason, ev=None, to=None, h=again.holder,
                             s=again.scope)
                    return
                assert again.row is not None
                token = again.token
                self.log("fclaim", g=key[0], r=key[1], tok=token, v=again.row["version"],
                         at=iso(again.row["fin_at"]), h=self.wid, s=scope)
            else:
                self.log("res", op="fabandon", g=key[0], r=key[1], ok=True, reason=None,
                         ev=None, to=None, ft=token)
                return

    def op_stray_release(self, key: tuple[str, int]) -> None:
        """A release by someone who may not hold anything: must change nothing then."""
        scope = self.rng.choice(SCOPES)
        self.log("frel", g=key[0], r=key[1], tok=None, h=self.wid, s=scope)
        rel = self.lc.release_finalization(key, self.wid, scope)
        self.res("frelease", key, rel)

    def op_dry_run(self, key: tuple[str, int]) -> None:
        to = self.rng.choice(PURE_TARGETS)
        check = self.lc.can_transition(key, to)
        self.log("res", op="can", g=key[0], r=key[1], ok=bool(check), reason=None, ev=None,
                 to=check.state)

    def step(self) -> None:
        """One operation on a random row: mostly informed by a read of the row's state
        (most writes then race rather than miss), sometimes blind."""
        rng = self.rng
        key = self.key = rng.choice(self.keys)
        state = self.state(key) if rng.random() < 0.85 else None
        leased = state is None or any(e.lease for e in edges_from(state))
        r = rng.random()
        if r < 0.3 or (r < 0.6 and not leased):
            self.op_transition(key, state)
        elif r < 0.45:
            self.op_run(key, state)
        elif r < 0.6:
            self.op_claim(key, state)
        elif r < 0.9:
            self.op_finalization(key)
        elif r < 0.95:
            self.op_stray_release(key)
        else:
            self.op_dry_run(key)


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    wid = spec["wid"]
    log = Log(spec["log"], wid)
    front: Any
    if spec.get("mode") == "async":
        front = SyncOverAsync(spec["dsn"])
        close = front.close
    else:
        store = PostgresStore(spec["dsn"], min_size=1, max_size=1)
        front = Lifecycle(store, BINDING)
        close = store.close
    rng = random.Random(spec["seed"])
    keys = [(g, r) for g in spec["groups"] for r in range(spec["rows"])]
    worker = Worker(front, log, rng, wid, keys, spec.get("sleepy", 1.0))
    log("start", pid=os.getpid(), mode=spec.get("mode", "sync"))
    ops = 0
    try:
        while time.time() < spec["deadline"] and ops < spec["max_ops"]:
            ops += 1
            try:
                worker.step()
            except Exception as exc:
                # InvalidTransitionError would be a harness bug (it picks edges from the
                # machine); anything else an engine bug: the oracle reports both
                g, r = worker.key or (None, None)
                log("exc", g=g, r=r, kind=type(exc).__name__, error=repr(exc),
                    tb=traceback.format_exc(limit=8))
        log("done", ops=ops)
    finally:
        close()
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
