"""An in-memory model of the chaos machine's rules, written from the documentation.

It is deliberately naive: plain Python objects, one method per engine operation, each
spelling out the checks in the documented order (state, lease, owner, guards) and the writes
an applied operation makes. The hypothesis state machine in ``tests/rowstate/test_chaos.py``
runs the same operations on the engine and on this model and compares every result and every
row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from chaos.machine import BINDING, BLOCKED, FINAL_TTL, INVARIANT_STATE, LEASE_TTL, MACHINE
from rowstate import Guard, InvalidTransitionError

ENTER_GUARDS = BINDING.enter_guards
STATE_MISMATCH = "STATE_MISMATCH"
LEASE_HELD = "LEASE_HELD"
NOT_OWNER = "NOT_OWNER"
GUARD_FAILED = "GUARD_FAILED"
INVARIANT = "INVARIANT"
LEASE_LOST = "LEASE_LOST"
HELD_BY_OTHER = "HELD_BY_OTHER"
ACT_FAILED = "ACT_FAILED"
RECORD_NOT_FOUND = "RECORD_NOT_FOUND"
FINALIZATION_HELD = "FINALIZATION_HELD"


@dataclass
class Row:
    state: str
    tenant: str | None
    version: int = 0
    acting_at: datetime | None = None
    acting_kind: str | None = None
    acting_by: str | None = None
    lease_token: int = 0
    last_error: str | None = None
    fin_holder: str | None = None
    fin_scope: str | None = None
    fin_at: datetime | None = None
    fin_token: int = 0
    note: str | None = None
    sent_at: datetime | None = None
    events: list[tuple[str, str, str, int]] = field(default_factory=list)

    def columns(self) -> dict[str, Any]:
        out = dict(vars(self))
        del out["events"]
        return out


@dataclass(frozen=True)
class Expect:
    """What an operation should answer (the fields every result type shares, loosely)."""

    ok: bool
    reason: str | None = None
    reasons: tuple[str, ...] = ()
    previous: str | None = None
    state: str | None = None
    token: int | None = None
    holder: str | None = None
    scope: str | None = None
    edge: str | None = None


Check = tuple[bool, str, str]  # passed, reason, category


def _refused(checks: list[Check]) -> tuple[str, tuple[str, ...]] | None:
    bad = [c for c in checks if not c[0]]
    if not bad:
        return None
    return bad[0][2], tuple(dict.fromkeys(c[1] for c in bad))


class Model:
    def __init__(self, now: datetime) -> None:
        self.now = now
        self.rows: dict[int, Row] = {}

    # -- helpers -------------------------------------------------------------------------

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def older(self, at: datetime | None, ttl: float) -> bool:
        return at is not None and at < self.now - timedelta(seconds=ttl)

    def froms(self, to: str, from_: Iterable[str] | str | None) -> tuple[str, ...]:
        """What the engine accepts as the from-set of a pure move, or the error it raises."""
        if to not in MACHINE.states:
            raise InvalidTransitionError("unknown state")
        if from_ is None:
            pure = tuple(dict.fromkeys(e.src for e in MACHINE.edges
                                       if e.dst == to and not e.lease))
            if not pure:
                raise InvalidTransitionError("every edge into it is side-effecting")
            # in the order the machine declares its sources
            return tuple(s for s in MACHINE.sources(to) if s in pure)
        given = (from_,) if isinstance(from_, str) else tuple(dict.fromkeys(from_))
        if not given:
            raise InvalidTransitionError("empty from-set")
        for src in given:
            edges = MACHINE.edges_between(src, to)
            if not edges:
                raise InvalidTransitionError("no such edge")
        for src in given:
            if all(e.lease for e in MACHINE.edges_between(src, to)):
                raise InvalidTransitionError("side-effecting: use run()")
        return given

    def guard_checks(self, row: Row, guards: Mapping[str, Any] | None) -> list[Check]:
        out: list[Check] = []
        for name, spec in (guards or {}).items():
            guard = spec if isinstance(spec, Guard) else Guard(
                tuple(spec) if isinstance(spec, list | tuple) else (spec,))
            got = getattr(row, name)
            out.append((got in guard.values, guard.reason, GUARD_FAILED))
        return out

    def owner_check(self, row: Row, owner: str | None) -> list[Check]:
        return [] if owner is None else [(row.tenant == owner, NOT_OWNER, NOT_OWNER)]

    def held_check(self, row: Row, to: str) -> list[Check]:
        """A live finalization claim, whoever holds it, blocks entering a BLOCKED state."""
        if to not in BLOCKED:
            return []
        free = row.fin_holder is None or self.older(row.fin_at, FINAL_TTL)
        return [(free, FINALIZATION_HELD, HELD_BY_OTHER)]

    def entry_checks(self, row: Row, to: str) -> list[Check]:
        """The binding's entry guards of ``to`` (see chaos.machine.BINDING)."""
        return self.guard_checks(row, ENTER_GUARDS.get(to))

    def lease_free(self, row: Row) -> Check:
        return (row.acting_at is None or self.older(row.acting_at, LEASE_TTL),
                LEASE_HELD, LEASE_HELD)

    def group_conflict(self, rid: int, to: str) -> bool:
        return to == INVARIANT_STATE and any(
            r.state == to for k, r in self.rows.items() if k != rid)

    def enter(self, rid: int, edge: str, to: str, *, finalize: bool,
              payload: Mapping[str, Any] | None) -> None:
        row = self.rows[rid]
        src = row.state
        row.state = to
        row.version += 1
        row.acting_at = row.acting_kind = row.acting_by = None
        if finalize:
            row.last_error = None
        if to not in MACHINE.active:
            row.fin_holder = row.fin_scope = None
            row.fin_at = None
        if to == "SENT":
            row.sent_at = self.now
        elif to == "DRAFT":
            row.sent_at = None
        for name, value in (payload or {}).items():
            setattr(row, name, value)
        row.events.append((edge, src, to, row.version))

    # -- operations ----------------------------------------------------------------------

    def transition(self, rid: int, to: str, from_: Any, owner: str | None,
                   guards: Mapping[str, Any] | None,
                   payload: Mapping[str, Any] | None = None) -> Expect:
        froms = self.froms(to, from_)
        row = self.rows.get(rid)
        if row is None:
            return Expect(False, RECORD_NOT_FOUND, (RECORD_NOT_FOUND,))
        checks = [(row.state in froms, STATE_MISMATCH, STATE_MISMATCH), self.lease_free(row),
                  *self.owner_check(row, owner), *self.held_check(row, to),
                  *self.entry_checks(row, to), *self.guard_checks(row, guards)]
        refused = _refused(checks)
        if refused:
            return Expect(False, refused[0], refused[1], row.state, row.state)
        if self.group_conflict(rid, to):
            return Expect(False, INVARIANT, (INVARIANT,), row.state, row.state)
        src = row.state
        edge = next(e for e in MACHINE.edges_between(src, to) if not e.lease)
        self.enter(rid, edge.name, to, finalize=False, payload=payload)
        return Expect(True, None, (), src, to, edge=edge.name)

    def can_transition(self, rid: int, to: str, from_: Any, owner: str | None,
                       guards: Mapping[str, Any] | None) -> Expect:
        try:
            froms = self.froms(to, from_)
        except InvalidTransitionError as exc:
            if "side-effecting" not in str(exc):
                raise
            return self.can_claim(rid, to, from_, owner, guards)
        row = self.rows.get(rid)
        if row is None:
            return Expect(False, None, (RECORD_NOT_FOUND,))
        checks = [(row.state in froms, STATE_MISMATCH, STATE_MISMATCH), self.lease_free(row),
                  *self.owner_check(row, owner), *self.held_check(row, to),
                  *self.entry_checks(row, to), *self.guard_checks(row, guards)]
        reasons = [c[1] for c in checks if not c[0]]
        if self.group_conflict(rid, to):
            reasons.append(INVARIANT)
        reasons = list(dict.fromkeys(reasons))
        return Expect(not reasons, None, tuple(reasons), None, row.state)

    def can_claim(self, rid: int, to: str, from_: Any, owner: str | None,
                  guards: Mapping[str, Any] | None) -> Expect:
        """The dry run when a leased edge is asked about: each candidate edge judged by the
        checks of its own write (a claim, or a plain move), allowed if any is."""
        given = MACHINE.sources(to) if from_ is None else (
            (from_,) if isinstance(from_, str) else tuple(dict.fromkeys(from_)))
        row = self.rows.get(rid)
        if row is None:
            return Expect(False, None, (RECORD_NOT_FOUND,))
        verdicts = []
        for src in given:
            for e in MACHINE.edges_between(src, to):
                if e.lease:
                    free = row.acting_at is None or (row.acting_kind == e.lease
                                                     and self.older(row.acting_at, LEASE_TTL))
                    lease = (free, LEASE_HELD, LEASE_HELD)
                else:
                    lease = self.lease_free(row)
                checks = [(row.state == src, STATE_MISMATCH, STATE_MISMATCH), lease,
                          *self.owner_check(row, owner), *self.held_check(row, to),
                          *self.entry_checks(row, to), *self.guard_checks(row, guards)]
                reasons = [c[1] for c in checks if not c[0]]
                if src != to and self.group_conflict(rid, to):
                    reasons.append(INVARIANT)
                verdicts.append((src, tuple(dict.fromkeys(reasons))))
        if any(not r for _, r in verdicts):
            return Expect(True, None, (), None, row.state)
        here = [v for v in verdicts if v[0] == row.state] or verdicts
        return Expect(False, None, here[0][1], None, row.state)

    def claim(self, rid: int, edge_name: str, holder: str, owner: str | None) -> Expect:
        edge = MACHINE.edge(edge_name)
        row = self.rows.get(rid)
        if row is None:
            return Expect(False, RECORD_NOT_FOUND, (RECORD_NOT_FOUND,), edge=edge.name)
        free = row.acting_at is None or (row.acting_kind == edge.lease
                                         and self.older(row.acting_at, LEASE_TTL))
        # like the destination's entry guards, its finalization block is checked at the
        # claim: no act runs for a move that its finalize would refuse
        checks = [(row.state == edge.src, STATE_MISMATCH, STATE_MISMATCH),
                  (free, LEASE_HELD, LEASE_HELD), *self.owner_check(row, owner),
                  *self.held_check(row, edge.dst), *self.entry_checks(row, edge.dst)]
        refused = _refused(checks)
        if refused:
            return Expect(False, refused[0], refused[1], state=row.state, edge=edge.name)
        row.acting_at = self.now
        row.acting_kind = edge.lease
        row.acting_by = holder
        row.lease_token += 1
        return Expect(True, None, (), state=edge.src, token=row.lease_token, edge=edge.name)

    def finalize(self, rid: int, edge_name: str, token: int, owner: str | None,
                 payload: Mapping[str, Any] | None) -> Expect:
        edge = MACHINE.edge(edge_name)
        row = self.rows.get(rid)
        if row is None:
            return Expect(False, RECORD_NOT_FOUND, (RECORD_NOT_FOUND,))
        held = row.acting_kind == edge.lease and row.lease_token == token
        checks = [(row.state == edge.src, STATE_MISMATCH, STATE_MISMATCH),
                  (held, LEASE_LOST, LEASE_LOST), *self.owner_check(row, owner),
                  *self.held_check(row, edge.dst), *self.entry_checks(row, edge.dst)]
        refused = _refused(checks)
        if refused:
            reason = LEASE_LOST if refused[0] == STATE_MISMATCH else refused[0]
            return Expect(False, reason, refused[1], row.state, row.state)
        if self.group_conflict(rid, edge.dst):
            return Expect(False, INVARIANT, (INVARIANT,), row.state, row.state)
        self.enter(rid, edge.name, edge.dst, finalize=True, payload=payload)
        return Expect(True, None, (), edge.src, edge.dst, edge=edge.name)

    def release(self, rid: int, edge_name: str, token: int, error: str | None) -> Expect:
        edge = MACHINE.edge(edge_name)
        row = self.rows.get(rid)
        if row is None or not (row.acting_kind == edge.lease and row.lease_token == token):
            return Expect(False, LEASE_LOST)
        row.acting_at = row.acting_kind = row.acting_by = None
        row.last_error = None if error is None else error[:2000]
        return Expect(True)

    def claim_finalization(self, rid: int, holder: str, scope: str | None) -> Expect:
        row = self.rows.get(rid)
        if row is None:
            return Expect(False, RECORD_NOT_FOUND)
        ok = (row.fin_holder is None
              or (row.fin_holder == holder and row.fin_scope == scope)
              or self.older(row.fin_at, FINAL_TTL))
        if not ok:
            return Expect(False, HELD_BY_OTHER, holder=row.fin_holder, scope=row.fin_scope)
        row.fin_holder, row.fin_scope, row.fin_at = holder, scope, self.now
        row.fin_token += 1
        return Expect(True, None, holder=holder, scope=scope, token=row.fin_token)

    def release_finalization(self, rid: int, holder: str, scope: str | None) -> Expect:
        row = self.rows.get(rid)
        if row is None or not (row.fin_holder == holder and row.fin_scope == scope):
            return Expect(False)
        row.fin_holder = row.fin_scope = None
        row.fin_at = None
        return Expect(True)
