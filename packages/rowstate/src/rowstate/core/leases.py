"""Leases of side-effecting edges: claim -> act -> finalize, fenced by a token.

A live lease blocks every other edge of its row; a stale one is reclaimable only by the
same kind. Finalize and release must show the claim's fence, so a holder whose lease was
taken over (a zombie) can no longer write.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from ..compiler import CasPlan
from ..errors import ConnectionLostError, InvalidTransitionError, RowstateError, ValidationError
from ..machine import Edge
from ..protocol import ActiveLease, Batch, Call, Op
from ..results import ActFailed, LeaseClaim, Reason, ReleaseResult, RunResult, TransitionResult
from ..specs import GuardSpec
from ..values import check_scalar, safe_text
from .cas import Cas, Outcome
from .context import Context
from .inputs import Inputs
from .lanes import Lanes
from .moves import Moves
from .plans import Plans
from .rules import Ask, Rules

_new = tuple.__new__  # a named tuple without its Python-level __new__ (see core.lane)


@functools.cache
def _hostname() -> str:
    # a system call once per process, not once per claim; socket is imported here, on the
    # first claim without a holder, since `import rowstate` need not pay for it
    import socket

    return socket.gethostname()


def default_holder() -> str:
    return f"{_hostname()}:{os.getpid()}"  # the pid is read each time (a fork changes it)


class Leases:
    """``claim``, ``finalize``, ``release`` and ``run`` for the edges a machine marks as
    side-effecting."""

    def __init__(self, context: Context, inputs: Inputs, rules: Rules, plans: Plans,
                 cas: Cas, moves: Moves, lanes: Lanes) -> None:
        self.context = context
        self.binding = context.binding
        self.machine = context.machine
        self.inputs = inputs
        self.rules = rules
        self.plans = plans
        self.cas = cas
        self.moves = moves
        self.lanes = lanes

    def _leased_edge(self, name: str) -> Edge:
        edge = self.machine.edge(name)
        if not edge.lease:
            raise InvalidTransitionError(f"{self.machine.name}: edge {name!r} has no side effect; "
                                         "use transition()")
        return edge

    def claim(self, key: object, edge_name: str, *, holder: str | None = None,
              owner: object = None, guards: GuardSpec | None = None,
              due: str | None = None, due_at: Any = None,
              returning: Iterable[str] | None = None, by: str | None = None,
              note: str | None = None) -> Op[LeaseClaim]:
        """``due`` (a timer's deadline column) makes the claim also require ``now >= due``;
        ``returning`` names the columns the claimed row needs (the fence's are added).
        ``by`` and ``note`` ride on the claim: its finalize's event says who and why (a
        claim itself writes no event)."""
        by, note = self.inputs.by(by), self.inputs.note(note)
        edge = self._leased_edge(edge_name)
        lease = self.binding.lease
        assert lease is not None and edge.lease is not None
        cols = self.inputs.returning(returning, lease.token or lease.at)
        kv = self.binding.key_values(key)
        holder = default_holder() if holder is None else self.inputs.holder(holder)
        if owner is not None:
            owner = self.inputs.owner(owner)
        if guards or due is not None:
            got = yield from self._claim_checked(edge, kv, holder, owner, guards, due, due_at,
                                                 cols)
            return got if by is None and note is None else got._replace(by=by, note=note)
        # the plain claim (a key, perhaps an owner): its statement from a template, with the
        # read that explains a refusal in the same batch
        plan, static = self.plans.claim(edge, owner is not None, (), [], None, cols)
        claim_lanes = self.context.claim_lanes
        if id(plan) not in claim_lanes:  # plans live as long as the core
            claim_lanes[id(plan)] = (self.context.template(plan.main, static),
                                     self.context.read_template)
        write, read = claim_lanes[id(plan)]
        if write is None or read is None:  # not the one-statement claim: the general path
            got = yield from self._claim_checked(edge, kv, holder, owner, None, None, None,
                                                 cols)
            return got if by is None and note is None else got._replace(by=by, note=note)
        rows = yield _new(Batch, (((write.sql, write.bind(kv, owner, None, holder)),), False,
                                  (read.sql, read.bind(kv))))
        if rows[0]:
            new = dict(zip(plan.columns, rows[0][0], strict=True))
            token = new.get(lease.token) if lease.token else None
            fence = token if lease.token else new[lease.at]
            return _new(LeaseClaim, (True, None, (), edge.name, token, fence, edge.src,
                                     self.context.public(new), kv, by, note))
        _, values = self.inputs.values(kv)
        values.update(static, holder=holder)
        if owner is not None:
            values["owner"] = owner
        return self._claim_refused(edge, plan, self.cas.outcome_of_read(rows[1]), values)

    def _claim_checked(self, edge: Edge, kv: tuple[Any, ...], holder: str, owner: Any,
                       guards: GuardSpec | None, due: str | None, due_at: Any,
                       cols: tuple[str, ...] | None) -> Op[LeaseClaim]:
        """A claim with guards or a timer's deadline: the general compare-and-set."""
        lease = self.binding.lease
        assert lease is not None
        _, values = self.inputs.values(kv)
        values["holder"] = holder
        if due_at is not None:  # a timer judged by business time (see Rules.due)
            values["due_at"] = due_at
        if owner is not None:
            values["owner"] = owner
        gshape, gchecks = self.rules.guards(guards, "g", values) if guards else ((), [])
        plan, static = self.plans.claim(edge, owner is not None, gshape, gchecks, due, cols)
        values.update(static)
        out = yield from self.cas.run(plan, values)
        if out.new is None:
            return self._claim_refused(edge, plan, out, values)
        token = out.new.get(lease.token) if lease.token else None
        fence = token if lease.token else out.new[lease.at]
        return LeaseClaim(True, None, (), edge.name, token, fence, edge.src,
                          self.context.public(out.new), kv)

    def _claim_refused(self, edge: Edge, plan: CasPlan, out: Outcome,
                       values: dict[str, Any]) -> LeaseClaim:
        reason, reasons, state = self.cas.explain(plan.checks, out, values)
        row = None if out.cur is None else self.context.public(out.cur)
        return LeaseClaim(False, reason, reasons, edge.name, state=state, row=row)

    def _claimed_edge(self, claim: object, what: str) -> Edge:
        """The edge of a claim a caller presents, checked before any I/O: a LeaseClaim that
        was claimed, of a leased edge, with a fence of the type this lease issues."""
        if not isinstance(claim, LeaseClaim) or not claim.claimed or claim.edge is None:
            raise ValidationError(f"{what} needs a lease that was claimed, got {claim!r}")
        edge = self._leased_edge(claim.edge)
        lease = self.binding.lease
        assert lease is not None
        fence = claim.fence
        if lease.token:
            ok = isinstance(fence, int) and not isinstance(fence, bool)
        else:
            ok = isinstance(fence, datetime | str)
        if not ok:
            raise ValidationError(f"{what}: {fence!r} is not a fence this lease issues")
        check_scalar(fence if isinstance(fence, int | str) else 0, "fence", ValidationError)
        return edge

    def _outcome_edge(self, claimed: Edge, to: object) -> Edge:
        """The edge a finalize ``to`` a state takes: from the claimed edge's source, of its
        lease kind (checked before any I/O)."""
        state = self.machine.check_state(to)
        for edge in self.machine.edges_between(claimed.src, state):
            if edge.lease == claimed.lease:
                return edge
        raise InvalidTransitionError(
            f"{self.machine.name}: no {claimed.lease!r} edge from {claimed.src} to {state}: a "
            f"lease claimed on {claimed.name!r} finishes through an edge of its own kind",
            from_state=claimed.src, to_state=state)

    def _same_row(self, key: object, claim: LeaseClaim, what: str) -> None:
        """Tokens count per row: another row's claim could carry this row's token."""
        if claim.key is not None and self.binding.key_values(key) != tuple(claim.key):
            raise ValidationError(f"{what}: the lease was claimed on row {claim.key!r}, "
                                  f"not on {key!r}")

    def finalize(self, key: object, claim: LeaseClaim, *,
                 payload: Mapping[str, Any] | None = None, owner: object = None,
                 data: Any = None, by: str | None = None,
                 note: str | None = None, to: str | None = None) -> Op[TransitionResult]:
        """The claimed move; its event's ``by`` and ``note`` are the claim's unless given
        here (the one who finishes the work may not be the one who began it).

        ``to`` finishes the work through another outcome: the edge of the same lease kind
        from the claimed edge's source into ``to`` (an email claimed on ``send`` that the
        server refused ends in ``REFUSED`` through ``refuse``). The act's outcome is known
        only after the side effect, so the claim cannot name it; the fence is the lease's,
        whichever edge the finalize takes."""
        edge = self._claimed_edge(claim, "finalize")
        if to is not None:
            edge = self._outcome_edge(edge, to)
        self._same_row(key, claim, "finalize")
        by = self.inputs.by(by) if by is not None else claim.by
        note = self.inputs.note(note) if note is not None else claim.note
        return self._finalize(key, edge, claim.fence, payload, owner, data, by=by, note=note)

    def _finalize(self, key: object, edge: Edge, fence: Any,
                  payload: Mapping[str, Any] | None, owner: object,
                  data: Any, returning: tuple[str, ...] | None = None, *,
                  by: str | None = None, note: str | None = None) -> Op[TransitionResult]:
        if payload is None and data is None and by is None and note is None:
            owner = self.inputs.owner(owner)
            move = self.lanes.plain_move(edge.dst, edge.src, edge, owner is not None, returning)
            assert move is not None  # (to, from, edge) is hashable
            return self.lanes.plain_transition(key, move, owner, fence)
        return self.moves.move(key, edge.dst, (edge.src,), owner, payload, None, data,
                                edge, fence, returning=returning, by=by, note=note)

    def release(self, key: object, claim: LeaseClaim, *,
                error: str | None = None) -> Op[ReleaseResult]:
        """Give the lease back without moving; stamps ``last_error`` when given."""
        edge = self._claimed_edge(claim, "release")
        self._same_row(key, claim, "release")
        lease = self.binding.lease
        assert lease is not None
        _, values = self.inputs.values(key)
        values["fence"] = claim.fence
        # an act's exception text may hold NUL: escaped, or the release itself would fail
        values["error"] = None if error is None else safe_text(str(error)[:2000])
        values["lease_kind"] = edge.lease
        shape = ("release",)
        stmt = self.context.plans.get(shape)
        if stmt is None:  # the checks name the lease kind and the fence: values, not shape
            checks = self.rules.checks("release", Ask(kind=edge.lease), {})
            stmt = self.context.compiler.conditional_update(checks, self.rules.release_sets())
            self.context.plans[shape] = stmt
        rows = yield Batch((stmt.bind(self.context.dialect, values),))
        if rows[0]:
            return ReleaseResult(True)
        return ReleaseResult(False, Reason.LEASE_LOST)

    def run(self, key: object, edge_name: str, act: Callable[[ActiveLease], Any], *,
            holder: str | None = None, owner: object = None,
            payload: Mapping[str, Any] | None = None, guards: GuardSpec | None = None,
            data: Any = None, due: str | None = None, due_at: Any = None,
            returning: Iterable[str] | None = None, by: str | None = None,
            note: str | None = None) -> Op[RunResult]:
        """claim -> act -> finalize; if the act raises or returns :class:`ActFailed`,
        release with the error (any other return value, falsy ones too, is a success).

        The act's exception propagates after the lease is released. If the lease was taken
        over while the act ran, finalize is refused and the result says LEASE_LOST.
        ``returning`` names the columns the act's ``lease.row`` needs (all by default); the
        finalize returns only what the event needs (a run's result carries no row).
        """
        edge = self._leased_edge(edge_name)
        if not callable(act):
            raise ValidationError(f"the act must be callable, got {act!r}")
        # all input is checked before the claim: no act for a doomed move
        if payload is not None:
            self.binding.check_payload(payload)
        if data is not None:
            self.inputs.data(data)
        claim = yield from self.claim(key, edge_name, holder=holder, owner=owner,
                                      guards=guards, due=due, due_at=due_at, returning=returning,
                                      by=by, note=note)
        if not claim.claimed:
            return RunResult(False, claim.reason, claim.reasons, claim.state, claim.state)
        assert claim.row is not None
        assert claim.key is not None
        handle = _new(ActiveLease, (claim.key, edge, claim.token, claim.row, self.context.door))
        try:
            value = yield _new(Call, (act, handle))
        except BaseException as exc:
            yield from self.release(key, claim, error=f"{type(exc).__name__}: {exc}")
            raise
        if isinstance(value, ActFailed):
            rel = yield from self.release(key, claim, error=value.reason)
            reason = Reason.ACT_FAILED if rel.released else Reason.LEASE_LOST
            return RunResult(False, reason, (reason,), edge.src, edge.src, value, True,
                             value.reason)
        try:
            # the claim is this call's own, from this key: finalize without re-checking it
            fin = yield from self._finalize(key, edge, claim.fence, payload, owner, data,
                                            self.inputs.returning((), self.binding.version),
                                            by=claim.by, note=claim.note)
        except ConnectionLostError:
            raise  # the write may have landed: the lease stays (fenced) until its TTL
        except RowstateError as exc:  # the database refused the write: nothing landed
            yield from self.release(key, claim, error=f"finalize: {type(exc).__name__}: {exc}")
            raise
        if not fin.applied:
            # a refused move (INVARIANT, a guard) must not hold the row for the whole TTL;
            # after LEASE_LOST the lease is another's and a release would be refused anyway
            error = f"finalize refused: {fin.reason}"
            if fin.reason != Reason.LEASE_LOST:
                yield from self.release(key, claim, error=error)
            return RunResult(False, fin.reason, fin.reasons, edge.src, fin.state or edge.src,
                             value, True, error)
        return _new(RunResult, (True, None, (), fin.previous, fin.state, value, True, None,
                                fin.event))

