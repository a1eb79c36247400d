"""The decisions, without I/O: one class, composed plainly from the modules of each job.

Every operation is a generator: it yields a :class:`~rowstate.compiler.Batch` of statements
(or a :class:`Call` to run the caller's side effect) and receives the rows back. The sync
and the async front ends only drive these generators (:mod:`rowstate.drive`), so the rules
live here once and the twins cannot disagree. Input is checked before the first yield: a bad
key, an unknown field or an edge the machine lacks raises before anything reaches the
database.

Where each job lives:

=====================  ==========================================================
:mod:`~rowstate.base`  inputs, checks, the compare-and-set, moves, reads (the state
                       every operation shares: :class:`CoreBase`)
``rows``               rows through the door (create, ensure), queries by state
``holds``              holds and fences inside a unit of work, enabled edges
``leases``             claim -> act -> finalize, release, run
``finalization``       finalization claims keyed by (holder, scope)
``timers``             fire_due: timed edges and once-per-row notices
``bulk``               set-based moves (transition_many)
=====================  ==========================================================

Each job module holds plain functions of a :class:`Core` (no chain of mixins); the class
below binds them as its methods, so a reader finds an operation in its job's module and
sees here, in one list, everything a core can do.
"""

from __future__ import annotations

from . import bulk, finalization, holds, leases, rows, timers
from .base import MAX_DATA_BYTES, ActiveLease, Call, CoreBase, Op, Outcome, default_holder

__all__ = ["MAX_DATA_BYTES", "ActiveLease", "Call", "Core", "CoreBase", "Op", "Outcome",
           "default_holder"]


class Core(CoreBase):
    """Every operation of one binding in one dialect."""

    # -- rows --
    _creatable = rows._creatable
    _check_columns = rows._check_columns
    _start_state = rows._start_state
    create = rows.create
    _compile_create = rows._compile_create
    _birth_values = rows._birth_values
    ensure = rows.ensure
    _query_where = rows._query_where
    find = rows.find
    count = rows.count

    # -- holds --
    _locked_read = holds._locked_read
    _read_locked = holds._read_locked
    _judged = holds._judged
    hold = holds.hold
    fence = holds.fence
    _claim_plan = holds._claim_plan
    _edge_checks = holds._edge_checks
    _read_with_invariants = holds._read_with_invariants
    _verdict = holds._verdict
    enabled_edges = holds.enabled_edges
    can_transition = holds.can_transition

    # -- leases --
    _leased_edge = leases._leased_edge
    claim = leases.claim
    _claim_checked = leases._claim_checked
    _lease_claim_plan = leases._lease_claim_plan
    _claim_refused = leases._claim_refused
    _compile_claim = leases._compile_claim
    _claimed_edge = leases._claimed_edge
    _same_row = leases._same_row
    finalize = leases.finalize
    _finalize = leases._finalize
    release = leases.release
    run = leases.run

    # -- finalization --
    _finalization_values = finalization._finalization_values
    claim_finalization = finalization.claim_finalization
    release_finalization = finalization.release_finalization
    _fclaim_check = staticmethod(finalization._fclaim_check)
    _frelease_check = staticmethod(finalization._frelease_check)
    finalization_checks = finalization.finalization_checks

    # -- timers --
    fire_due = timers.fire_due
    _movable = timers._movable
    _fire_many = timers._fire_many
    _fire_edge = timers._fire_edge
    _fire_notice = timers._fire_notice

    # -- bulk --
    transition_many = bulk.transition_many
    _transition_many = bulk._transition_many
    _one_by_one = bulk._one_by_one
    _many_verdict = bulk._many_verdict
    _rows_of = bulk._rows_of
    _compile_many = bulk._compile_many
    _compile_many_pg = bulk._compile_many_pg
    _edge_case = bulk._edge_case
