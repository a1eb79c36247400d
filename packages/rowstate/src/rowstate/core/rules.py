"""The rules: every check a write is conditioned on, and every SET it makes, built here.

Everything that affects the state machine lives in this file (h11's ``_state.py`` rule).
A check is a :class:`~rowstate.conditions.Check`: a condition tree with the reason it gives
and the category of that reason. The compiler renders a check to SQL for the write; the
Python reader evaluates the same check against a row for the dry run and to explain a
refusal, so "may I?" and "do it" cannot diverge.

:data:`CHECKS` is the one table of which checks each operation carries, in the order they
are judged (the first failing check names the refusal's primary reason). An operation's
parts never assemble a check list of their own: they ask :meth:`Rules.checks`.

Constant values a check names (a TTL, a lease kind) go into the ``values`` dict given to the
builder: the plan cache keeps them with the compiled plan (see :mod:`rowstate.core.plans`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ..compiler import Set
from ..conditions import (
    And,
    Check,
    Const,
    In,
    IsNull,
    Not,
    NotAfter,
    Older,
    Or,
    Ref,
    Same,
    Slot,
    SqlOut,
)
from ..results import Reason
from ..specs import FinalizationClaim, GuardSpec, Notice, TimedEdge
from .context import Context

#: operation -> the checks its write (or its due query, or its dry run) is conditioned on
CHECKS: dict[str, tuple[str, ...]] = {
    # a plain move's compare-and-set
    "transition": ("state", "lease_free", "owner", "finalization_free", "enter_guards",
                   "guards", "due"),
    # a leased edge's finalize: the lease's fence instead of "no live lease"
    "finalize": ("state", "lease_fenced", "owner", "finalization_free", "enter_guards",
                 "guards", "due"),
    # a leased edge's claim: the destination's checks too, so no act runs for a move that
    # its finalize would refuse
    "claim": ("state", "lease_claimable", "owner", "finalization_free", "enter_guards",
              "guards", "due"),
    # a unit of work's hold: the checks a move out of the held states is conditioned on
    "hold": ("state", "lease_free"),
    # a unit of work's fence, and the release of a lease: the lease is still this one
    "fence": ("lease_fenced",),
    "release": ("lease_fenced",),
    # fire_due's query of due rows: only rows a write could move now
    "timer_due": ("state", "due", "guards", "lease_free"),
    "leased_timer_due": ("state", "due", "guards", "lease_claimable", "backing_off"),
    # a notice's due query and its once-per-row claim
    "notice": ("notice_state", "notice_unsent", "due", "guards"),
    # a state renamed (rowstate.migrations): every row of the old name, or none, while no
    # lease is live on any of them; not a move into a new meaning, so nothing else applies
    "rename": ("lease_free",),
    # finalization claims, keyed by (holder, scope)
    "claim_finalization": ("finalization_claimable",),
    "release_finalization": ("finalization_mine",),
    # what the stuck report (core.diagnose) lists, and the inspector reads of one row: a
    # lease past its TTL, a finalization claim past its TTL, an event the relay left behind
    "lease_expired": ("lease_expired",),
    "finalization_expired": ("finalization_expired",),
    "event_unrelayed": ("event_unrelayed",),
}


class Ask(NamedTuple):
    """What an operation's checks depend on (each builder reads what it needs)."""

    froms: tuple[str, ...] = ()
    to: str | None = None
    kind: str | None = None  # the leased edge's lease kind
    has_owner: bool = False
    guards: tuple[Check, ...] = ()  # the caller's guards, built by Rules.guards
    due: str | None = None  # a timer's deadline column (``@column``: business time)
    timer: TimedEdge | None = None
    notice: Notice | None = None


class Rules:
    """The check and SET builders of one binding, and :meth:`checks` reading :data:`CHECKS`."""

    def __init__(self, context: Context) -> None:
        self.binding = context.binding
        self.machine = context.machine
        self.dialect = context.dialect
        self.compiler = context.compiler
        self._builders: dict[str, Callable[[Ask, dict[str, Any]], list[Check]]] = {
            "state": lambda ask, values: [self.state(ask.froms)],
            "lease_free": lambda ask, values: self.lease_free(values),
            "lease_claimable": self._lease_claimable,
            "lease_fenced": self._lease_fenced,
            "owner": lambda ask, values: [self.owner()] if ask.has_owner else [],
            "finalization_free": self._finalization_free,
            "enter_guards": self._enter_guards,
            "guards": lambda ask, values: list(ask.guards),
            "due": lambda ask, values: [self.due(ask.due)] if ask.due else [],
            "backing_off": self._backing_off,
            "notice_state": self._notice_state,
            "notice_unsent": self._notice_unsent,
            "finalization_claimable": lambda ask, values: [self.finalization_claimable()],
            "finalization_mine": lambda ask, values: [self.finalization_mine()],
            "lease_expired": lambda ask, values: self.lease_expired(values),
            "finalization_expired": lambda ask, values: self.finalization_expired(values),
            "event_unrelayed": lambda ask, values: [self.event_unrelayed()],
        }
        assert {n for names in CHECKS.values() for n in names} <= set(self._builders)

    def checks(self, operation: str, ask: Ask, values: dict[str, Any]) -> list[Check]:
        """The checks of ``operation`` (:data:`CHECKS`), in order; ``values`` filled with
        the constants they name."""
        builders = self._builders
        return [check for name in CHECKS[operation] for check in builders[name](ask, values)]

    # -- checks --------------------------------------------------------------------------

    def state(self, froms: tuple[str, ...]) -> Check:
        node = In(self.binding.state_ref, tuple(Const(s) for s in froms))
        return Check(node, Reason.STATE_MISMATCH, Reason.STATE_MISMATCH)

    def guards(self, guards: GuardSpec | None, prefix: str,
               values: dict[str, Any]) -> tuple[tuple[Any, ...], list[Check]]:
        """Checks for guards; their values go into ``values``, their shape is returned."""
        if not guards:
            return (), []
        checks = []
        shape = []
        for i, (ref, guard) in enumerate(self.binding.guard_items(guards)):
            given = [v for v in guard.values if v is not None]
            nullable = len(given) < len(guard.values)
            slots = []
            for j, v in enumerate(given):
                name = f"{prefix}{i}_{j}"
                values[name] = v
                slots.append(Slot(name, json=bool(ref.path)))
            checks.append(Check(In(ref, tuple(slots), nullable), guard.reason,
                                Reason.GUARD_FAILED))
            shape.append((ref, len(given), nullable, guard.reason))
        return tuple(shape), checks

    def _enter_guards(self, ask: Ask, values: dict[str, Any]) -> list[Check]:
        assert ask.to is not None
        return self.guards(self.binding.enter_guards.get(ask.to), "e", values)[1]

    def lease_free(self, values: dict[str, Any]) -> list[Check]:
        """No live lease: a live lease blocks every other edge of its row."""
        lease = self.binding.lease
        if lease is None:
            return []
        values["lease_ttl"] = float(lease.ttl)
        at = Ref(lease.at)
        node = Or((IsNull(at), Older(at, Slot("lease_ttl"))))
        return [Check(node, Reason.LEASE_HELD, Reason.LEASE_HELD)]

    def lease_expired(self, values: dict[str, Any]) -> list[Check]:
        """A lease is set and past its TTL: exactly the lease that :meth:`lease_free`
        lets another edge through (and its own kind reclaim)."""
        lease = self.binding.lease
        if lease is None:
            return []
        (free,) = self.lease_free(values)
        node = And((Not(IsNull(Ref(lease.at))), free.node))
        return [Check(node, "LEASE_EXPIRED", "LEASE_EXPIRED")]

    def _lease_claimable(self, ask: Ask, values: dict[str, Any]) -> list[Check]:
        """No lease, or a stale one of the same kind (a holder that crashed)."""
        lease = self.binding.lease
        if lease is None:
            return []
        values.update(lease_kind=ask.kind, lease_ttl=float(lease.ttl))
        at, kind = Ref(lease.at), Ref(lease.kind)
        free = Or((IsNull(at), And((Same(kind, Slot("lease_kind")),
                                    Older(at, Slot("lease_ttl"))))))
        return [Check(free, Reason.LEASE_HELD, Reason.LEASE_HELD)]

    def _lease_fenced(self, ask: Ask, values: dict[str, Any]) -> list[Check]:
        """The lease is still the one claimed: its kind, and its token (or claim time) is
        the ``fence`` the caller shows. A zombie whose lease was taken over fails it."""
        lease = self.binding.lease
        assert lease is not None
        values["lease_kind"] = ask.kind
        node = And((Same(Ref(lease.kind), Slot("lease_kind")),
                    Same(Ref(lease.token or lease.at), Slot("fence"))))
        return [Check(node, Reason.LEASE_LOST, Reason.LEASE_LOST)]

    def _backing_off(self, ask: Ask, values: dict[str, Any]) -> list[Check]:
        """A leased timer whose act failed waits its back-off before it is due again."""
        lease = self.binding.lease
        if lease is None or not lease.failed_at:
            return []
        assert ask.timer is not None
        values["backoff"] = float(ask.timer.backoff)
        failed = Ref(lease.failed_at)
        return [Check(Or((IsNull(failed), Older(failed, Slot("backoff")))),
                      "BACKING_OFF", "BACKING_OFF")]

    def owner(self) -> Check:
        """The row's owner is the caller's (the ``owner`` value)."""
        assert self.binding.owner is not None
        node = In(Ref(self.binding.owner), (Slot("owner"),))
        return Check(node, Reason.NOT_OWNER, Reason.NOT_OWNER)

    def _finalization_free(self, ask: Ask, values: dict[str, Any]) -> list[Check]:
        """A live finalization claim blocks entering the states its binding lists."""
        f = self.binding.finalization
        if f is None or ask.to not in f.blocks:
            return []
        values["fttl"] = float(f.ttl)
        node = Or((IsNull(Ref(f.holder)), Older(Ref(f.at), Slot("fttl"))))
        return [Check(node, Reason.FINALIZATION_HELD, Reason.HELD_BY_OTHER)]

    def due(self, column: str) -> Check:
        """``column <= now``; a column spelled ``@column`` is judged by the caller's
        business instant (the ``due_at`` value, ``fire_due``'s ``now=``) instead, while
        leases and claims still age by the database clock."""
        if column.startswith("@"):
            return Check(NotAfter(Ref(column[1:]), Slot("due_at")), "NOT_DUE",
                         Reason.GUARD_FAILED)
        return Check(Older(Ref(column), Const(0.0), inclusive=True), "NOT_DUE",
                     Reason.GUARD_FAILED)

    def _notice_state(self, ask: Ask, values: dict[str, Any]) -> list[Check]:
        assert ask.notice is not None
        node = In(self.binding.state_ref, tuple(Const(s) for s in ask.notice.states))
        return [Check(node, Reason.STATE_MISMATCH, Reason.STATE_MISMATCH)]

    def _notice_unsent(self, ask: Ask, values: dict[str, Any]) -> list[Check]:
        assert ask.notice is not None
        return [Check(IsNull(Ref(ask.notice.claim)), "ALREADY_SENT", "ALREADY_SENT")]

    def _finalization(self) -> FinalizationClaim:
        f = self.binding.finalization
        assert f is not None
        return f

    def finalization_claimable(self) -> Check:
        """Free, already ours (same holder and scope: a redelivery), or stale."""
        f = self._finalization()
        h, s, at = Ref(f.holder), Ref(f.scope), Ref(f.at)
        node = Or((IsNull(h), And((Same(h, Slot("fholder")), Same(s, Slot("fscope")))),
                   Older(at, Slot("fttl"))))
        return Check(node, Reason.HELD_BY_OTHER, Reason.HELD_BY_OTHER)

    def finalization_expired(self, values: dict[str, Any]) -> list[Check]:
        """A finalization claim is held and past its TTL: another (holder, scope) may take
        it over (:meth:`finalization_claimable`)."""
        f = self.binding.finalization
        if f is None:
            return []
        values["fttl"] = float(f.ttl)
        node = And((Not(IsNull(Ref(f.holder))), Older(Ref(f.at), Slot("fttl"))))
        return [Check(node, "CLAIM_EXPIRED", "CLAIM_EXPIRED")]

    def event_unrelayed(self) -> Check:
        """An event of this machine in the events table that no relay has delivered for
        ``older`` seconds (the ``machine`` and ``older`` values): a relay that is not
        running, or one that fails on it. Its columns are the events table's."""
        node = And((In(Ref("machine"), (Slot("machine"),)), IsNull(Ref("delivered_at")),
                    Older(Ref("created_at"), Slot("older"))))
        return Check(node, "UNRELAYED", "UNRELAYED")

    def finalization_mine(self) -> Check:
        """Held by this (holder, scope): only the holder releases."""
        f = self._finalization()
        node = And((Same(Ref(f.holder), Slot("fholder")), Same(Ref(f.scope), Slot("fscope"))))
        return Check(node, Reason.HELD_BY_OTHER, Reason.HELD_BY_OTHER)

    # -- sets ----------------------------------------------------------------------------

    def entry_sets(self, to: str, payload: dict[str, Any], values: dict[str, Any],
                   finalize: bool) -> list[Set]:
        """A move into ``to``: the state, the version, the lease cleared (a finalize clears
        its error too), a finalization claim cleared on leaving the active states, the
        binding's entry writes and the caller's payload columns."""
        b, c = self.binding, self.compiler
        sets: list[Set] = [c.set_value(b.state, Const(to))]
        if b.version:
            sets.append(c.incremented(b.version))
        if b.lease:
            sets += [c.set_null(b.lease.at), c.set_null(b.lease.kind)]
            if b.lease.holder:
                sets.append(c.set_null(b.lease.holder))
            if finalize and b.lease.error:
                sets.append(c.set_null(b.lease.error))
            if finalize and b.lease.failed_at:
                sets.append(c.set_null(b.lease.failed_at))
        if b.finalization and to not in self.machine.active:
            f = b.finalization
            sets += [c.set_null(f.holder), c.set_null(f.scope), c.set_null(f.at)]
        sets += c.entry_sets(dict(b.on_enter.get(to, {})), c.target)
        for name, value in payload.items():
            values[f"p:{name}"] = self.dialect.payload_value(value)
            sets.append(c.set_value(name, Slot(f"p:{name}")))
        return sets

    def rename_sets(self) -> list[Set]:
        """A state renamed (the ``new`` value): the state and the version, nothing else.
        No entry write runs and no lease or claim is cleared: the row stays where it was
        under its new name (docs/engine.md, "Renaming a state with live rows")."""
        b, c = self.binding, self.compiler
        sets: list[Set] = [c.set_value(b.state, Slot("new"))]
        if b.version:
            sets.append(c.incremented(b.version))
        return sets

    def claim_sets(self) -> list[Set]:
        """A lease claimed: its time, kind, holder, and the fencing token + 1."""
        lease = self.binding.lease
        assert lease is not None
        c = self.compiler
        sets = [c.set_now(lease.at), c.set_value(lease.kind, Slot("lease_kind"))]
        if lease.holder:
            sets.append(c.set_value(lease.holder, Slot("holder")))
        if lease.token:
            sets.append(c.incremented(lease.token))
        return sets

    def release_sets(self) -> list[Set]:
        """A lease given back: cleared, with ``last_error`` (and its time) stamped."""
        lease = self.binding.lease
        assert lease is not None
        c = self.compiler
        sets = [c.set_null(lease.at), c.set_null(lease.kind)]
        if lease.holder:
            sets.append(c.set_null(lease.holder))
        if lease.error:
            sets.append(c.set_value(lease.error, Slot("error")))
        if lease.failed_at:  # now when an error is given, else NULL
            out = SqlOut()
            err = self.dialect.value(Slot("error"), out)
            stamp = self.dialect.now(out)
            sets.append((lease.failed_at,
                         f"CASE WHEN CAST({err} AS TEXT) IS NULL THEN NULL ELSE {stamp} END",
                         tuple(out.params)))
        return sets

    def finalization_claim_sets(self) -> list[Set]:
        f = self._finalization()
        c = self.compiler
        sets = [c.set_value(f.holder, Slot("fholder")), c.set_value(f.scope, Slot("fscope")),
                c.set_now(f.at)]
        if f.token:
            sets.append(c.incremented(f.token))
        return sets

    def finalization_release_sets(self) -> list[Set]:
        f = self._finalization()
        c = self.compiler
        return [c.set_null(f.holder), c.set_null(f.scope), c.set_null(f.at)]

    def notice_sets(self, notice: Notice) -> list[Set]:
        """A notice claimed before it is sent: a crash never sends it twice."""
        return [self.compiler.set_now(notice.claim)]
