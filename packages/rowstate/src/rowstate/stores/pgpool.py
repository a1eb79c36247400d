"""The stores' own pools: psycopg_pool's, retrying a failed connection every half second at
most instead of backing off to minutes.

Why: psycopg_pool retries a connection it could not open after 1 s, then doubles the wait
(2, 4, 8, 16 s ...) until ``reconnect_timeout`` (5 min). That is kind to a server that is
down for an hour, and wrong for a cluster's failover: with the leader node killed, Patroni
promotes the standby after its leader key expires (10-20 s with deploy/patroni/patroni.yml),
and by then the pool's next attempt was up to 16 s away. Measured on the failover tests'
cluster (tests/failover/test_rowstate_failover.py): with the new primary writable ~9 s
after the kill, the store's first write came 4.7 to 5.5 s after it (5 rounds), ~23 s after
a longer outage, while callers waited in the checkout; retrying every 0.5 s at most (after
0.1, 0.2, 0.4 s), 0.07 to 0.22 s after it.

The cost is only while no server takes connections: one attempt per missing connection per
half second, each refused at once by a stopped server (or waiting ``connect_timeout`` for
a silent one, in the pool's worker threads, not the caller's), and one warning of the
pool's in the log per attempt. Nothing changes on a call that finds a connection ready:
the pool is psycopg_pool's, with the same checkout and return.

The hook is psycopg_pool's ``_add_connection(attempt, growing)`` (3.1 to 3.3 at least),
which starts each retry series with an ``AttemptWithBackoff`` it is given or makes; the
stores give one whose waits are capped. A psycopg_pool without that hook backs off as it
always did: slower after a failover, never wrong.

The pools also draw their jitter (a connection's expiry, a retry's first wait) from a
generator of their own, not the ``random`` module's: psycopg_pool draws from the global one
in its worker threads, which moves a program's seeded sequence at unforeseeable times, and
made Hypothesis fail a test of ours ("Do not use the `random` module inside strategies")
when a store filled its pool while an example was drawn.

``Pool`` and ``AsyncPool`` are kept side by side by hand, not generated: each is the same
one-method override of its own psycopg_pool class, and unasync would have nothing to share.
"""

from __future__ import annotations

import inspect
import random
from typing import Any

from psycopg_pool import AsyncConnectionPool, ConnectionPool

try:
    from psycopg_pool.base import AttemptWithBackoff
except ImportError:  # pragma: no cover - a psycopg_pool that moved it: the pool's own waits
    AttemptWithBackoff = None  # type: ignore[assignment,misc]

#: seconds before the first retry of a connection that failed, and the longest wait after
FIRST_RETRY = 0.1
LONGEST_RETRY = 0.5

_JITTER = random.Random()  # the pools' own generator (see the module docstring)


def jitter(value: float, min_pc: float, max_pc: float) -> float:
    """psycopg_pool's ``_jitter`` (``value`` moved by a random fraction between ``min_pc``
    and ``max_pc``), drawn from the pools' own generator."""
    return value * (1.0 + ((max_pc - min_pc) * _JITTER.random()) + min_pc)


if AttemptWithBackoff is not None:

    class CappedBackoff(AttemptWithBackoff):
        """psycopg_pool's backoff (doubling, with jitter, given up after
        ``reconnect_timeout``) that starts at :data:`FIRST_RETRY` and never waits longer
        than :data:`LONGEST_RETRY`."""

        INITIAL_DELAY = FIRST_RETRY

        def update_delay(self, now: float) -> None:
            if self.delay == 0.0:  # psycopg_pool's, with the capped waits and own jitter
                self.give_up_at = now + self.timeout
                self.delay = jitter(self.INITIAL_DELAY, -self.DELAY_JITTER, self.DELAY_JITTER)
            else:
                self.delay = min(self.delay * self.DELAY_BACKOFF, LONGEST_RETRY)
            if self.delay + now > self.give_up_at:
                self.delay = max(0.0, self.give_up_at - now)
else:  # pragma: no cover
    CappedBackoff = None  # type: ignore[assignment,misc]


def _hook_fits(pool: type) -> bool:
    """The private hook is there with the parameters it is overridden with: a psycopg_pool
    that changed it gets no override (its own waits), never a call that breaks."""
    hook = getattr(pool, "_add_connection", None)
    try:
        names = list(inspect.signature(hook).parameters) if hook else []
    except (TypeError, ValueError):  # pragma: no cover - not introspectable
        return False
    return CappedBackoff is not None and names == ["self", "attempt", "growing"]


HOOK_FITS = _hook_fits(ConnectionPool) and _hook_fits(AsyncConnectionPool)


class Pool(ConnectionPool[Any]):
    """A :class:`ConnectionPool` whose failed connections are retried with
    :class:`CappedBackoff` and whose jitter is :func:`jitter` (see the module docstring)."""

    _jitter = staticmethod(jitter)

    def _add_connection(self, attempt: Any, growing: bool = False) -> None:
        if attempt is None and HOOK_FITS:
            attempt = CappedBackoff(timeout=self.reconnect_timeout)
        super()._add_connection(attempt, growing)


class AsyncPool(AsyncConnectionPool[Any]):
    """:class:`Pool` for asyncio."""

    _jitter = staticmethod(jitter)

    async def _add_connection(self, attempt: Any, growing: bool = False) -> None:
        if attempt is None and HOOK_FITS:
            attempt = CappedBackoff(timeout=self.reconnect_timeout)
        await super()._add_connection(attempt, growing)


if not HOOK_FITS:  # pragma: no cover - a psycopg_pool whose hook changed: its own pools
    Pool = ConnectionPool  # type: ignore[misc,assignment]
    AsyncPool = AsyncConnectionPool  # type: ignore[misc,assignment]
