"""Helpers of the inspector's tests (``rowstate inspect`` / ``rowstate stuck``): an
application's binding module, written to a folder as a user would have it, and a database
holding one row of each kind of stuck, made through the engine with a clock an hour in the
past (the command cannot be handed a clock: stale facts are old times written earlier).

The rows of :data:`APP`'s ``JOBS`` after :func:`seed`:

====  ==========================================================================
1     READY, a LIVE lease (claimed now), its ``expire`` timer an hour overdue: the timer
      is held back by the lease, so fire_due would not fire it (not stuck)
2     READY, a lease claimed an hour ago: EXPIRED (ttl 60 s)
3     READY, no lease, its ``expire`` timer an hour overdue: an OVERDUE timer
4     NEW, a finalization claim taken an hour ago: past its TTL (120 s)
5     NEW, made now: nothing stuck, its event fresh
====  ==========================================================================

Rows 1-4 were created an hour ago, so their events (never relayed) are an hour old; row
5's event is new. ``JOBS`` says a relay delivers its events (``relayed=True``), so those
are stuck; ``JOBS_UNRELAYED`` is the same table with its events kept as history only (no
relay: the default), so they are not. ``SEATS`` has a two-column key (venue, INTEGER seat),
and no lease, timer, claim or events table: nothing of it can be stuck.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rowstate import Lifecycle, connect

APP = '''\
"""A user's bindings, as ``rowstate inspect`` imports them (MODULE:BINDING)."""

from dataclasses import replace

from rowstate import Binding, Edge, FinalizationClaim, Lease, Machine, TimedEdge

JOB = Machine(
    "cli_job",
    states=["NEW", "READY", "RUNNING", "DONE"],
    initial="NEW",
    active=["READY", "RUNNING"],
    edges=[
        Edge("prepare", "NEW", "READY"),
        Edge("start", "READY", "RUNNING", lease="start"),
        Edge("finish", "RUNNING", "DONE"),
        Edge("expire", "READY", "DONE"),
    ],
)
JOBS = Binding(
    JOB,
    table="cli_jobs",
    key=("id",),
    version="version",
    lease=Lease(at="lease_at", kind="lease_kind", token="lease_token",
                holder="lease_holder", error="last_error", ttl=60),
    finalization=FinalizationClaim(holder="fin_holder", scope="fin_scope", at="fin_at",
                                   ttl=120),
    timers=(TimedEdge("expire", due="expires_at"),),
    payload=("label",),
    column_types={"id": "INTEGER"},
    relayed=True,
)
JOBS_UNRELAYED = replace(JOBS, relayed=False)

SEAT = Machine("cli_seat", states=["FREE", "HELD"], initial="FREE",
               edges=[Edge("hold", "FREE", "HELD"), Edge("free", "HELD", "FREE")])
SEATS = Binding(SEAT, table="cli_seats", key=("venue", "seat"), version="version",
                column_types={"seat": "INTEGER"}, events=None)
'''

HOUR = timedelta(hours=1)


def write_app(folder: Path, name: str = "cliapp") -> str:
    """The binding module in ``folder``; returns its module name."""
    (folder / f"{name}.py").write_text(APP)
    return name


def app_module(folder: Path) -> Any:
    """The module :data:`APP` (written to ``folder`` and imported from it, once a
    process: every test writes the same text)."""
    import importlib

    write_app(folder)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return importlib.import_module("cliapp")


def seed(url: str, app: Any) -> datetime:
    """The rows of the module's table (above); returns the past clock's instant."""
    past = datetime.now(UTC) - HOUR
    past = past.replace(microsecond=past.microsecond // 1000 * 1000)  # SQLite keeps ms
    store = connect(url)
    try:
        then = Lifecycle(store, app.JOBS, clock=lambda: past)
        now = Lifecycle(store, app.JOBS)
        then.create_schema()
        Lifecycle(store, app.SEATS).create_schema()
        for key in (1, 2, 3):
            then.create(key, expires_at=past if key != 2 else None)
            then.transition(key, "READY", by="ann", note="ready to run")
        then.create(4)
        assert now.claim(1, "start", holder="worker-live").claimed
        assert then.claim(2, "start", holder="worker-dead").claimed
        assert then.claim_finalization(4, "finalizer", "purge").claimed
        now.create(5, label="fresh")
        seats = Lifecycle(store, app.SEATS)
        seats.create(("v1", 3))
        seats.transition(("v1", 3), "HELD")
    finally:
        store.close()
    return past


def tables(url: str, app: Any) -> list[Any]:
    """Everything the seed wrote (the rows and the events), to show a command wrote
    nothing."""
    store = connect(url)
    try:
        lc = Lifecycle(store, app.JOBS)
        rows = [lc.get(k) for k in (1, 2, 3, 4, 5)]
        return rows + [lc.history(k) for k in (1, 2, 3, 4, 5)]
    finally:
        store.close()


def rowstate(*args: str, cwd: Path, module: bool = False) -> subprocess.CompletedProcess[str]:
    """The real command: the console script next to this Python (or ``python -m``)."""
    script = Path(sys.executable).with_name("rowstate")
    command = [sys.executable, "-m", "rowstate"] if module else [str(script)]
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)
