"""Running a compare-and-set, and explaining a refused one.

A compiled :class:`~rowstate.compiler.CasPlan` comes in three row shapes (the fast
``UPDATE ... RETURNING``; PostgreSQL's one statement with the row before and after; SQLite's
transaction of event and update, with a read first when the move may start from several
states): :meth:`Cas.run` reads each into one
:class:`Outcome`. A refusal is explained by the Python reader of the very checks the write
was conditioned on (:meth:`Cas.explain`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ..compiler import CasPlan
from ..conditions import Check, RowView, failing
from ..errors import InvariantViolation
from ..protocol import Batch, Op
from ..results import Reason
from .context import Context


class Outcome(NamedTuple):
    """What a compare-and-set saw: the row before, the row after (None if refused)."""

    cur: dict[str, Any] | None
    new: dict[str, Any] | None
    event_id: int | None
    now: Any
    invariant: bool = False


class Cas:
    """The compare-and-set of a plan, its guessing form, and the verdict of a refusal."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.dialect = context.dialect
        self.columns = context.columns
        self.state_of = context.state_of

    def run(self, plan: CasPlan, values: dict[str, Any]) -> Op[Outcome]:
        # SQLite from one known state reads the row only on a miss, in the same transaction
        explain = self.context.read if plan.pre is None and not plan.fast else None
        try:
            rows = yield plan.batch(self.dialect, values, explain)
        except InvariantViolation:
            refused = yield from self.read_refused(values)
            return refused._replace(invariant=True)
        cols = self.columns
        n = len(cols)
        if plan.fast:
            cols = plan.columns
            n = len(cols)
            if not rows[0]:
                return (yield from self.read_refused(values))
            row = rows[0][0]
            if len(row) == n:  # zip's strict check done once, by len()
                return Outcome(None, dict(zip(cols, row, strict=False)), None, None)
            return Outcome(None, dict(zip(cols, row[:n], strict=True)), row[n], None)
        if self.dialect.writable_ctes:
            # one row: the row before, the row after, event, now
            if not rows[0]:
                return Outcome(None, None, None, None)
            row = rows[0][0]
            ki = self.context.key_index
            before = dict(zip(cols, row[:n], strict=True)) if row[ki] is not None else None
            after = (dict(zip(cols, row[n:2 * n], strict=True))
                     if row[n + ki] is not None else None)
            return Outcome(before, after, row[2 * n], row[2 * n + 1])
        # SQLite's transaction: [read], event, update; with an event row, the update
        # returns its id and the write's time after the row's columns
        if plan.pre is None:  # from one known state (so with an event): no read before
            if not rows[1]:
                return self.outcome_of_read(rows[2])
            row = rows[1][0]
            k = len(plan.columns)
            return Outcome(None, dict(zip(plan.columns, row[:k], strict=True)), row[k],
                           row[k + 1])
        if not rows[0]:
            return Outcome(None, None, None, None)
        before = rows[0][0]
        new = rows[-1][0] if rows[-1] else None
        event_id = new[n] if new and plan.event is not None else None
        return Outcome(dict(zip(cols, before[:n], strict=True)),
                       dict(zip(cols, new[:n], strict=True)) if new else None, event_id,
                       before[n])

    def guessing(self, plan: CasPlan, plan_from: Callable[[str], CasPlan],
                 froms: tuple[str, ...], values: dict[str, Any],
                 missed: tuple[str, Outcome] | None = None,
                 ) -> Op[tuple[Outcome, str]]:
        """A move from one of several states, written as the fast single-state CAS from the
        likeliest one (the state this move last left; else the first listed).

        A miss reads the row; if the row would pass the move's checks from the state it is
        in now, the write is retried from that state, once; a second such miss (the row
        keeps moving under concurrent writers) falls back to ``plan``, which reads the row
        under a lock (PostgreSQL) or in one transaction (SQLite) and so always settles.
        Every attempt is a complete compare-and-set, so a wrong guess costs round trips,
        never correctness; the state left is the one the applied write was conditioned on.
        ``missed``: the first guess was already written (by a lane) and refused, and this
        is the state it guessed and the row read after it.
        """
        last_from = self.context.last_from
        guess = last_from.get(id(plan), froms[0])
        for attempt in range(2):
            if attempt == 0 and missed is not None:
                guess, out = missed
            else:
                out = yield from self.run(plan_from(guess), values)
            if out.new is not None:
                last_from[id(plan)] = guess
                return out, guess
            if out.cur is None or out.invariant:
                return out, guess
            state = self.state_of(out.cur)
            view = self.context.view(out.cur, values, out.now)
            if state is None or state not in froms or failing(plan.checks, view):
                return out, guess  # refused for a reason the row shows: explain it
            guess = state
        out = yield from self.run(plan, values)
        return out, self.state_left(out, guess)

    def state_left(self, out: Outcome, known: str) -> str:
        """The state a write left: read with the row when the plan read it, else the one
        from-state the write was conditioned on."""
        state = self.state_of(out.cur) if out.cur is not None else None
        return state or known

    def read_refused(self, values: dict[str, Any]) -> Op[Outcome]:
        """The row as it is now, read after a refused write to explain the refusal."""
        read = yield Batch((self.context.read.bind(self.dialect, values),))
        return self.outcome_of_read(read[0])

    def outcome_of_read(self, rows: list[tuple[Any, ...]]) -> Outcome:
        if not rows:
            return Outcome(None, None, None, None)
        row = rows[0]
        n = len(self.columns)
        return Outcome(dict(zip(self.columns, row[:n], strict=True)), None, None, row[n])

    def explain(self, checks: tuple[Check, ...], out: Outcome,
                values: dict[str, Any]) -> tuple[str, tuple[str, ...], str | None]:
        """The primary reason, every reason, and the row's current state."""
        if out.invariant:
            state = self.state_of(out.cur) if out.cur is not None else None
            return Reason.INVARIANT, (Reason.INVARIANT,), state
        if out.cur is None:
            return Reason.RECORD_NOT_FOUND, (Reason.RECORD_NOT_FOUND,), None
        state = self.state_of(out.cur)
        if len(checks) == 1 and checks[0].category == Reason.STATE_MISMATCH:
            # a move checked for its state only: the row is in another state, or it
            # changed between the refused write and this read; both say STATE_MISMATCH
            return Reason.STATE_MISMATCH, (Reason.STATE_MISMATCH,), state
        dialect = self.dialect  # the RowView built here, not by context.view: a frame less
        bad = failing(checks, RowView(out.cur, values, self.context.now(out.now),
                                      dialect.parse_time, dialect.load_json))
        if not bad:
            # fast path only: the row changed between the refused write and the read
            return Reason.STATE_MISMATCH, (Reason.STATE_MISMATCH,), state
        reasons = tuple(dict.fromkeys(c.reason for c in bad))
        return bad[0].category, reasons, state
