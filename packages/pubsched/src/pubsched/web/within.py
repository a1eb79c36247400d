"""Reads of the database that answer within a deadline, for ``/healthz`` and ``/metrics``:
a database that does not answer in time is "down", said at once, never a hang.

Why a deadline of our own: the machines that ask (Docker's health check, 5 s; Prometheus'
scrape, 10 s; a load balancer) give up on a slow answer and learn nothing. A PostgreSQL
that is stopped (SIGSTOP, a frozen VM) or cut off behind a network that still holds the
TCP session accepts the bytes and never answers: a read on a pooled connection blocks
forever, and a new connection waits for the pool's 30 s. The driver has no client-side
deadline for a read, and ``statement_timeout`` is kept by the server, which is what is
not answering. So the read runs in a thread of its own and the caller waits at most
:data:`DEADLINE` seconds for it.

One read in flight per :class:`Deadline`, on one worker thread of its own that lives as
long as the process: a caller that comes while a read runs waits for that same read (two
scrapes in one second share its answer), so a database that never answers holds that one
thread, not one more per probe; and the same thread reads every time, so a store that
keeps a connection per thread (SQLite) opens one, not one per probe. The thread is a
daemon, so a read stuck forever never holds the process's exit. On PostgreSQL each read
also runs under a ``statement_timeout`` (:func:`bounded`): a server that answers but keeps
a read waiting on a lock (a migration's ``ALTER TABLE``) frees the thread instead of
holding it.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Generic, TypeVar

from starlette.concurrency import run_in_threadpool

from ..pub import Pub

T = TypeVar("T")

#: seconds a caller waits for the database: an answer within 2 s, with room to write it
DEADLINE = 1.5
#: the server's limit on one read of these (PostgreSQL), below the deadline
STATEMENT_TIMEOUT_MS = 1000


class Deadline(Generic[T]):
    """``read`` run on a worker thread of its own, at most one at a time; each caller
    waits for the one in flight at most ``seconds``, then gets :class:`TimeoutError`. A
    read that raised raises its error in every caller that waited for it."""

    def __init__(self, read: Callable[[], T], seconds: float = DEADLINE, *,
                 name: str = "pubsched-deadline") -> None:
        self.read = read
        self.seconds = seconds
        self.name = name
        self._lock = threading.Lock()
        self._flight: Future[T] | None = None
        self._asked: queue.SimpleQueue[Future[T]] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None

    def _current(self) -> Future[T]:
        """The read in flight, or a new one handed to the worker now (which is free: a
        new read is asked for only once the last one is done)."""
        with self._lock:
            if self._flight is None or self._flight.done():
                flight: Future[T] = Future()
                flight.set_running_or_notify_cancel()  # running: no waiter can cancel it
                self._flight = flight
                self._asked.put(flight)
                if self._worker is None:
                    self._worker = threading.Thread(target=self._work, name=self.name,
                                                    daemon=True)
                    self._worker.start()
            return self._flight

    def _work(self) -> None:
        while True:
            flight = self._asked.get()
            try:
                flight.set_result(self.read())
            except BaseException as exc:  # handed to the callers, who decide what it means
                flight.set_exception(exc)

    def __call__(self) -> T:
        """The answer, from a thread (a scrape's); :class:`TimeoutError` after the
        deadline."""
        return self._current().result(timeout=self.seconds)

    async def answer(self) -> T:
        """The answer, from the event loop (a request's): waited for in a worker thread,
        which the deadline frees; :class:`TimeoutError` after it."""
        return await run_in_threadpool(self)


@contextlib.contextmanager
def bounded(pub: Pub) -> Iterator[None]:
    """A read-only unit that :meth:`Pub.query` reads in, limited on PostgreSQL to
    :data:`STATEMENT_TIMEOUT_MS` per statement (``SET LOCAL``: this unit only, never the
    pooled connection's later users)."""
    with pub.reading() as tx:
        if pub.dialect == "postgresql":
            tx.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
        yield


def database_answers(pub: Pub) -> bool:
    """``SELECT 1`` in a bounded unit: True, or the database's error raised."""
    with bounded(pub):
        pub.query("SELECT 1 AS ok")
    return True


__all__ = ["DEADLINE", "Deadline", "bounded", "database_answers"]
