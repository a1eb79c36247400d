"""Shared pieces of the concurrency and crash proofs (``tests/rowstate/``: test_races.py,
test_crash.py).

* ``race_binding(ttl)``: a small machine ``A <-> B``, ``A -> C`` under a ``work`` lease and
  ``A -> D`` under an ``audit`` lease, on table ``race_rows`` with a version column, a fencing
  token and an events table (the outbox) -- every extra the engine can use.
* independent readers (plain psycopg / sqlite3, not the engine) used to check what the engine
  wrote: a row, the events of a row, a checksum of a whole database;
* :class:`Child`: a worker *process* (this file run as a script) that opens its own store and
  obeys one-line commands on stdin, answering JSON lines on stdout. Tests start and kill only
  these children, by pid.

Run as a script: ``python races.py MODE URL TTL`` (see :func:`main`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import rowstate
import rowstate.stores
from rowstate import Binding, Edge, Lease, Lifecycle, Machine
from rowstate.ext import Batch

HERE = Path(__file__).resolve()
TABLE = "race_rows"
EVENTS = "race_events"

RACE_MACHINE = Machine(
    "race",
    states=["A", "B", "C", "D"],
    initial="A",
    active=["A", "B"],
    edges=[
        Edge("flip", "A", "B"),
        Edge("flop", "B", "A"),
        Edge("work", "A", "C", lease="work"),
        Edge("audit", "A", "D", lease="audit"),
        Edge("undo_c", "C", "A"),
        Edge("undo_d", "D", "A"),
    ],
)


def race_binding(ttl: float = 60.0) -> Binding:
    return Binding(
        RACE_MACHINE,
        table=TABLE,
        key=("id",),
        state="state",
        version="version",
        lease=Lease(at="acting_at", kind="acting_kind", token="acting_token",
                    holder="acting_holder", error="last_error", ttl=ttl),
        events=EVENTS,
        column_types={"state": "TEXT NOT NULL DEFAULT 'A'"},
    )


# -- stores and tables ---------------------------------------------------------------------


def sqlite_url(path: Path | str) -> str:
    return f"sqlite:///{path}"


def open_store(url: str, **options: Any) -> rowstate.Store:
    return rowstate.connect(url, **options)


def with_app_name(dsn: str, name: str) -> str:
    """``dsn`` tagged with ``application_name`` (to find its backends in pg_stat_activity)."""
    return make_conninfo(dsn, application_name=name)


def dbname_of(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


def create_rows(url: str, binding: Binding, keys: list[str]) -> None:
    """The schema of ``binding`` and one row in state A per key."""
    store = open_store(url)
    try:
        Lifecycle(store, binding).create_schema()
        p = "?" if store.dialect == "sqlite" else "%s"
        store.run(Batch(tuple(
            (f"INSERT INTO {binding.table} (id, state) VALUES ({p}, 'A')", [k]) for k in keys
        ), transaction=True))
    finally:
        store.close()


@contextlib.contextmanager
def raw(url: str) -> Iterator[Any]:
    """A plain driver connection (autocommit), independent of the engine."""
    if url.startswith("sqlite:"):
        conn: Any = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None, timeout=30)
    else:
        conn = psycopg.connect(url, autocommit=True)
    try:
        yield conn
    finally:
        conn.close()


def read_row(url: str, key: str) -> dict[str, Any]:
    with raw(url) as conn:
        p = "?" if url.startswith("sqlite:") else "%s"
        cur = conn.execute(
            f"SELECT state, version, acting_at, acting_kind, acting_token, acting_holder, "
            f"last_error FROM {TABLE} WHERE id = {p}", [key])
        names = [d[0] for d in cur.description]
        row = cur.fetchone()
    assert row is not None, f"row {key!r} vanished"
    return dict(zip(names, row, strict=True))


def read_events(url: str, key: str | None = None) -> list[dict[str, Any]]:
    """Events in id order, of one row (``key``) or all."""
    with raw(url) as conn:
        p = "?" if url.startswith("sqlite:") else "%s"
        where, params = ("WHERE row_key = " + p, [json.dumps([key])]) if key else ("", [])
        cur = conn.execute(
            f"SELECT id, row_key, edge, from_state, to_state, version FROM {EVENTS} "
            f"{where} ORDER BY id", params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def checksum(url: str, tables: tuple[str, ...], conn: Any = None) -> str:
    """A digest of every row of ``tables`` (ordered), to prove nothing was written; read
    on ``conn`` (a :func:`raw` connection) when given."""
    if conn is None:
        with raw(url) as own:
            return checksum(url, tables, own)
    digest = hashlib.sha256()
    for table in tables:
        cur = conn.execute(f"SELECT * FROM {table}")
        rows = sorted(repr(tuple(r)) for r in cur.fetchall())
        digest.update(f"{table}:{len(rows)}\n".encode())
        for r in rows:
            digest.update(r.encode() + b"\n")
    return digest.hexdigest()


def db_seconds_since(url: str, column: str, key: str) -> float:
    """Seconds between ``column`` of row ``key`` and the database's clock now."""
    with raw(url) as conn:
        if url.startswith("sqlite:"):
            row = conn.execute(
                f"SELECT (julianday('now') - julianday({column})) * 86400.0 FROM {TABLE} "
                "WHERE id = ?", [key]).fetchone()
        else:
            row = conn.execute(
                f"SELECT extract(epoch FROM clock_timestamp() - {column})::float8 FROM {TABLE} "
                "WHERE id = %s", [key]).fetchone()
    assert row is not None and row[0] is not None, f"{column} of {key!r} is NULL"
    return float(row[0])


def wait_past_ttl(url: str, key: str, ttl: float, margin: float = 0.25) -> None:
    """Sleep until the lease of ``key`` is older than ``ttl`` by the database's clock."""
    age = db_seconds_since(url, "acting_at", key)
    if age < ttl + margin:
        time.sleep(ttl + margin - age)


def backends(admin_dsn: str, dbname: str, app: str, *, waiting_on_lock: bool = False,
             ) -> list[int]:
    """Server pids of the connections to ``dbname`` tagged ``application_name = app``."""
    sql = ("SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s"
           + (" AND wait_event_type = 'Lock'" if waiting_on_lock else ""))
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        return [r[0] for r in conn.execute(sql, [dbname, app]).fetchall()]


def terminate(admin_dsn: str, pids: list[int], timeout: float = 10.0) -> None:
    """pg_terminate_backend each pid, and wait until the server has let them go."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", [pid])
        until = time.monotonic() + timeout
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                           [pids]).fetchone() != (0,):
            assert time.monotonic() < until, f"backends {pids} did not go away"
            time.sleep(0.02)


# -- child processes -----------------------------------------------------------------------


class Child:
    """A worker process running :func:`main`; commands go in on stdin, JSON comes out."""

    def __init__(self, mode: str, url: str, ttl: float, *extra: str) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE), mode, url, repr(ttl), *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._err: list[str] = []
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._drain, daemon=True),
        ]
        for t in self._threads:
            t.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @staticmethod
    def _pump(stream: Any, into: queue.Queue[str | None]) -> None:
        for line in stream:
            into.put(line.rstrip("\n"))
        into.put(None)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._err.append(line)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, timeout: float = 30.0) -> Any:
        """The next JSON message; fails with the child's stderr if it died or stalled."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"child {self.pid} said nothing in {timeout}s; "
                                 f"stderr: {''.join(self._err)[-2000:]}") from None
        if line is None:
            self.proc.wait(timeout=10)
            for t in self._threads:
                t.join(timeout=5)
            raise AssertionError(f"child {self.pid} exited ({self.proc.returncode}); "
                                 f"stderr: {''.join(self._err)[-2000:]}")
        return json.loads(line)

    def kill(self) -> None:
        """SIGKILL this child (by its own pid) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.close()

    def close(self) -> None:
        """Reap the child (killing it if it does not end in time) and close its pipes."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        for t in self._threads:
            t.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    @property
    def stderr(self) -> str:
        return "".join(self._err)


def _result(res: Any) -> dict[str, Any]:
    out = {"applied": bool(res), "reason": getattr(res, "reason", None)}
    for name in ("state", "token", "acted"):
        if hasattr(res, name):
            out[name] = getattr(res, name)
    return out


def main(argv: list[str]) -> None:  # pragma: no cover - runs in child processes
    """Worker modes (each opens its own store, prints ``{"ready": pid}`` first):

    ``serve``  lines ``flip KEY`` / ``work KEY MARKS_FILE`` / ``quit``: one move each,
               answered with the result; ``work`` is ``run()`` whose act appends a line to
               MARKS_FILE (so the parent can count acts across processes).
    ``hold``   line ``KEY EDGE``: ``run()`` whose act prints ``{"acting": token}`` and then
               sleeps until it is killed.
    ``zombie`` line ``KEY``: claim ``work`` and print it; on ``go``: finalize and release
               with that claim and print both; on ``again``: finalize once more.
    ``zombie_run`` line ``KEY``: ``run()`` of ``work`` whose act prints ``{"acting": token}``
               and waits for ``go`` before it succeeds; print the run's result.
    ``run``    line ``KEY EDGE``: ``run()`` with an act that succeeds; print the result.
    """
    mode, url, ttl = argv[0], argv[1], float(argv[2])
    store = open_store(url)
    lc = Lifecycle(store, race_binding(ttl))

    def say(obj: Any) -> None:
        print(json.dumps(obj, default=str), flush=True)

    try:
        lc.get("warm-up")  # connect before the race starts
        say({"ready": os.getpid()})
        for line in sys.stdin:
            words = line.split()
            if not words or words[0] == "quit":
                break
            if mode == "serve":
                if words[0] == "flip":
                    say(_result(lc.transition(words[1], "B", from_="A")))
                elif words[0] == "work":
                    marks = words[2]

                    def act(lease: Any, marks: str = marks) -> bool:
                        with open(marks, "a") as f:
                            f.write(f"{lease.key[0]} {os.getpid()} {lease.token}\n")
                        time.sleep(0.05)
                        return True

                    say(_result(lc.run(words[1], "work", act)))
            elif mode == "hold":
                def hold(lease: Any) -> bool:
                    say({"acting": lease.token})
                    time.sleep(600)
                    return True

                say(_result(lc.run(words[0], words[1], hold)))
            elif mode == "zombie_run":
                def wait_for_go(lease: Any) -> bool:
                    say({"acting": lease.token})
                    return sys.stdin.readline().strip() == "go"

                say(_result(lc.run(words[0], "work", wait_for_go)))
            elif mode == "run":
                say(_result(lc.run(words[0], words[1], lambda lease: True)))
            elif mode == "zombie":
                claim = lc.claim(words[0], "work", holder=f"zombie:{os.getpid()}")
                say({"claimed": claim.claimed, "token": claim.token, "reason": claim.reason})
                for cmd in sys.stdin:
                    if cmd.strip() == "go":
                        fin = lc.finalize(words[0], claim)
                        rel = lc.release(words[0], claim, error="zombie")
                        say({"finalize": _result(fin), "release": _result(rel)})
                    elif cmd.strip() == "again":
                        say({"finalize": _result(lc.finalize(words[0], claim))})
                    else:
                        break
                break
    finally:
        store.close()


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
