"""The decisions, without I/O.

Every operation is a generator: it yields a :class:`~rowstate.compiler.Batch` of statements
(or a :class:`Call` to run the caller's side effect) and receives the rows back. The sync
and the async front ends only drive these generators (:mod:`rowstate.drive`), so the rules
live here once and the twins cannot disagree. Input is checked before the first yield: a bad
key, an unknown field or an edge the machine lacks raises before anything reaches the
database.

The operations are split by job: :mod:`~rowstate.base` (inputs, checks, the
compare-and-set, transitions, reads), :mod:`~rowstate.leases`,
:mod:`~rowstate.finalization`, :mod:`~rowstate.timers`, :mod:`~rowstate.rows` (create,
ensure, queries), :mod:`~rowstate.holds` (holds, fences, enabled edges) and
:mod:`~rowstate.bulk` (set-based moves).
"""

from __future__ import annotations

from .base import MAX_DATA_BYTES, ActiveLease, Call, CoreBase, Op, Outcome, default_holder
from .bulk import BulkOps
from .finalization import FinalizationOps
from .holds import HoldOps
from .timers import TimerOps

__all__ = ["MAX_DATA_BYTES", "ActiveLease", "Call", "Core", "CoreBase", "Op", "Outcome",
           "default_holder"]


class Core(TimerOps, HoldOps, BulkOps, FinalizationOps):
    """Every operation of one binding in one dialect."""
