"""Writers that commit rows through a multi-host URL while a test fails the cluster over,
and the ledger that tells, afterwards, what a client was told and what the database kept.

Plain psycopg 3, one autocommit INSERT per row: each row is its own transaction, so a
client's view of it is exactly one of

- acknowledged: the INSERT returned (the COMMIT succeeded); it must survive a failover in
  synchronous mode;
- outcome unknown: the connection broke after the statement was sent, so the client cannot
  tell whether it committed (the row may or may not be there: never count it as lost);
- refused: the server answered with an error (nothing was written).

Between failures a writer reconnects with the multi-host URL as fast as libpq lets it, so the
first acknowledgement after a kill measures how long writes were impossible.
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
import uuid
from dataclasses import dataclass, field

import psycopg
from psycopg import sql


@dataclass(frozen=True)
class Ack:
    """One acknowledged row: which server wrote it, and when (client and server clocks)."""

    id: int
    port: int
    at: float  # time.monotonic() when the client got the answer
    txn_at: dt.datetime  # the server's now(): its transaction's start
    clock_at: dt.datetime  # the server's clock_timestamp() while inserting


@dataclass
class Ledger:
    """What the writers were told, appended to by their threads (list.append is atomic)."""

    acked: list[Ack] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Writers:
    """``count`` threads inserting into a table of their own until :meth:`stop`."""

    def __init__(self, url: str, *, count: int = 4, pause: float = 0.0) -> None:
        self.url = url
        self.table = f"failover_{uuid.uuid4().hex[:12]}"
        self.ledger = Ledger()
        self._count = count
        self._pause = pause
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def create_table(self) -> None:
        with psycopg.connect(self.url, connect_timeout=5, autocommit=True) as conn:
            conn.execute(sql.SQL(
                "CREATE TABLE {} (id bigint PRIMARY KEY, writer int NOT NULL,"
                " port int NOT NULL DEFAULT inet_server_port(),"
                " txn_at timestamptz NOT NULL DEFAULT now(),"
                " clock_at timestamptz NOT NULL DEFAULT clock_timestamp())"
            ).format(sql.Identifier(self.table)))

    def start(self) -> None:
        self.create_table()
        for number in range(self._count):
            thread = threading.Thread(target=self._run, args=(number,), daemon=True,
                                      name=f"writer-{number}")
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=30)
            assert not thread.is_alive(), f"{thread.name} did not stop"

    def acks_since(self, since: float) -> list[Ack]:
        return [ack for ack in list(self.ledger.acked) if ack.at > since]

    def wait_for_ack(self, *, since: float, not_port: int, timeout: float) -> Ack | None:
        """The first row acknowledged after ``since`` by a server other than ``not_port``
        (the new primary), waiting up to ``timeout`` seconds for one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [ack for ack in self.acks_since(since) if ack.port != not_port]
            if found:
                return min(found, key=lambda ack: ack.at)
            time.sleep(0.05)
        return None

    def stored(self) -> dict[int, int]:
        """id -> the port of the server that wrote it, for every row the table holds now."""
        with psycopg.connect(self.url, connect_timeout=5, autocommit=True) as conn:
            rows = conn.execute(sql.SQL("SELECT id, port FROM {}").format(
                sql.Identifier(self.table))).fetchall()
        return {int(row_id): int(port) for row_id, port in rows}

    def _run(self, number: int) -> None:
        insert = sql.SQL("INSERT INTO {} (id, writer) VALUES (%s, %s)"
                         " RETURNING port, txn_at, clock_at").format(sql.Identifier(self.table))
        conn: psycopg.Connection[tuple[int, dt.datetime, dt.datetime]] | None = None
        try:
            while not self._stopping.is_set():
                if conn is None:
                    try:
                        conn = psycopg.connect(self.url, connect_timeout=2, autocommit=True)
                    except psycopg.Error:
                        time.sleep(0.05)
                        continue
                row_id = next(self._ids)
                try:
                    row = conn.execute(insert, (row_id, number)).fetchone()
                except psycopg.OperationalError as exc:  # the answer never came
                    self.ledger.unknown.append(row_id)
                    self.ledger.errors.append(f"{row_id}: {type(exc).__name__}: {exc}")
                    conn.close()
                    conn = None
                    continue
                except psycopg.Error as exc:  # the server said no: nothing written
                    self.ledger.refused.append(row_id)
                    self.ledger.errors.append(f"{row_id}: {type(exc).__name__}: {exc}")
                    conn.close()
                    conn = None
                    continue
                assert row is not None
                self.ledger.acked.append(Ack(row_id, row[0], time.monotonic(), row[1], row[2]))
                if self._pause:
                    time.sleep(self._pause)
        finally:
            if conn is not None:
                conn.close()
