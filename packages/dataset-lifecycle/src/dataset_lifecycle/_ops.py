"""The seed's operations, written once, without I/O.

Each operation is a generator in the engine's style (:mod:`rowstate.ext.drive`): it yields the
engine's statement batches, or :class:`~rowstate.ext.Call` requests for a persistence
adapter, and gets their results back. ``DatasetLifecycle`` drives them synchronously,
``AsyncDatasetLifecycle`` on asyncio, so the twins cannot disagree; and a *backend* says how
a primitive (read, transition, dry run, claim, release) runs:

* :class:`EngineBackend`: the rowstate core, one compiled conditional write per primitive;
* :class:`~._adapter.AdapterBackend`: the same core's checks, evaluated in Python against
  rows a :class:`PersistenceAdapter` returns, written back as a compare-and-set.

What the dataset adds on top of the engine lives here: aliases, "omit ``from_`` to read the
current status first", LOADING taking ownership (``jobId = owner_job_id``) instead of
checking it, the seed's reason names, the event.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from rowstate import CheckResult, FinalizationClaimResult, ValidationError
from rowstate import ReleaseResult as EngineRelease
from rowstate import TransitionResult as EngineTransition
from rowstate.ext import Batch, Call, Core

from ._machine import LOADING, MACHINE, Reason, evaluate_transition, normalize_status
from ._machine import normalize_statuses as _normalize_statuses
from ._rules import (
    JOB_ID,
    Rules,
    block_reasons,
    check_event_data,
    check_job_id,
    check_scope,
    parse_time,
    refused,
    status_of,
)
from ._types import (
    BusyCheckResult,
    ClaimResult,
    DatasetIdentifier,
    DatasetStatusChanged,
    Identifier,
    LifecycleState,
    ReleaseResult,
    TransitionCheckResult,
    TransitionOptions,
    TransitionResult,
)

Op = Generator[Batch | Call, Any, Any]
Key = tuple[str, str]


class Backend(Protocol):
    def get(self, key: Key) -> Op: ...
    def transition(self, key: Key, to: str, froms: tuple[str, ...], owner: str | None,
                   payload: Mapping[str, Any], guards: Mapping[str, Any] | None,
                   data: Any) -> Op: ...
    def can_transition(self, key: Key, to: str, owner: str | None) -> Op: ...
    def claim(self, key: Key, holder: str, scope: str | None) -> Op: ...
    def release(self, key: Key, holder: str, scope: str | None) -> Op: ...
    def now(self) -> datetime: ...


class EngineBackend:
    """The rowstate core over a store: every primitive is the engine's own operation."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def get(self, key: Key) -> Op:
        return self.core.get(key)

    def transition(self, key: Key, to: str, froms: tuple[str, ...], owner: str | None,
                   payload: Mapping[str, Any], guards: Mapping[str, Any] | None,
                   data: Any) -> Op:
        return self.core.transition(key, to, from_=froms, owner=owner, payload=payload,
                                    guards=guards, data=data)

    def can_transition(self, key: Key, to: str, owner: str | None) -> Op:
        return self.core.can_transition(key, to, owner=owner)

    def claim(self, key: Key, holder: str, scope: str | None) -> Op:
        return self.core.claim_finalization(key, holder, scope)

    def release(self, key: Key, holder: str, scope: str | None) -> Op:
        return self.core.release_finalization(key, holder, scope)

    def now(self) -> datetime:
        return self.core.clock() if self.core.clock is not None else datetime.now(UTC)


class Operations:
    """The dataset operations over one backend; see the module docstring."""

    def __init__(self, rules: Rules, backend: Backend) -> None:
        self.rules = rules
        self.backend = backend

    # -- transitions ---------------------------------------------------------------------

    def transition(self, identifier: Identifier, move: TransitionOptions,
                   ) -> Generator[Batch | Call, Any,
                                  tuple[TransitionResult, DatasetStatusChanged | None]]:
        """The seed's ``transition(identifier, options)``; every option is checked here,
        before any I/O."""
        ident = DatasetIdentifier.of(identifier)
        target = normalize_status(move.to)
        froms = (None if move.from_ is None
                 else MACHINE.resolve(target, _normalize_statuses(move.from_)))
        user_payload = self.rules.check_payload(move.payload)
        owner = None if move.owner_job_id is None else check_job_id(move.owner_job_id)
        event_data, guards = move.event_data, move.guards
        check_event_data(event_data)
        if target == LOADING:
            # a move to LOADING starts a load: the caller's job becomes the row's owner
            if owner is None:
                raise ValidationError("a move to LOADING starts a load: owner_job_id is required")
            engine_owner, engine_payload = None, {**user_payload, JOB_ID: owner}
        else:
            engine_owner, engine_payload = owner, user_payload
        if froms is None:
            # the seed's "omit from to auto-read current": read, then CAS from exactly that
            row = yield from self.backend.get(ident.key)
            if row is None:
                return refused(Reason.RECORD_NOT_FOUND.value, [Reason.RECORD_NOT_FOUND.value],
                               None, target), None
            current = status_of(row)
            verdict = evaluate_transition(current, target)
            if not verdict.allowed or verdict.current_status is None:
                return TransitionResult(False, Reason.STATE_MISMATCH.value, verdict.reasons,
                                        current, current), None
            froms = (verdict.current_status,)  # canonical: a status the machine knows
        res: EngineTransition = yield from self.backend.transition(
            ident.key, target, froms, engine_owner, engine_payload, guards, event_data)
        if not res.applied:
            return refused(res.reason, res.reasons, res.state, target), None
        job = owner
        if job is None and res.row is not None and res.row.get(JOB_ID) is not None:
            job = str(res.row[JOB_ID])
        at = res.event.at if res.event is not None and res.event.at is not None else None
        event = DatasetStatusChanged(ident, res.previous, target, job, event_data,
                                     at or self.backend.now())
        return TransitionResult(True, None, [], res.previous, target), event

    def can_transition_to(self, identifier: Identifier, to: object, *,
                          owner_job_id: object) -> Generator[Batch | Call, Any,
                                                              TransitionCheckResult]:
        """The dry run: the checks ``transition`` writes under, evaluated on the row now."""
        ident = DatasetIdentifier.of(identifier)
        target = normalize_status(to)
        owner = None if owner_job_id is None else check_job_id(owner_job_id)
        res: CheckResult = yield from self.backend.can_transition(
            ident.key, target, None if target == LOADING else owner)
        return TransitionCheckResult(res.allowed, block_reasons(res.reasons, res.state, target),
                                     res.state)

    # -- finalization claims -------------------------------------------------------------

    def claim_finalization(self, identifier: Identifier, job_id: object, *,
                           scope: object) -> Generator[Batch | Call, Any, ClaimResult]:
        key, holder, scope_ = _claim_args(identifier, job_id, scope)
        res: FinalizationClaimResult = yield from self.backend.claim(key, holder, scope_)
        if res.claimed:
            return ClaimResult(True, None, holder, scope_)
        return ClaimResult(False, _opt(res.reason), _opt(res.holder), _opt(res.scope))

    def release_claim(self, identifier: Identifier, job_id: object, *,
                      scope: object) -> Generator[Batch | Call, Any, ReleaseResult]:
        key, holder, scope_ = _claim_args(identifier, job_id, scope)
        res: EngineRelease = yield from self.backend.release(key, holder, scope_)
        return ReleaseResult(True) if res.released else ReleaseResult(False,
                                                                      Reason.NOT_HELD.value)

    # -- reads ---------------------------------------------------------------------------

    def get_lifecycle_state(self, identifier: Identifier,
                            ) -> Generator[Batch | Call, Any, LifecycleState | None]:
        ident = DatasetIdentifier.of(identifier)
        row = yield from self.backend.get(ident.key)
        return None if row is None else self.rules.state_of(ident, row, parse_time)

    def check_busy(self, identifier: Identifier) -> Generator[Batch | Call, Any,
                                                               BusyCheckResult]:
        ident = DatasetIdentifier.of(identifier)
        row = yield from self.backend.get(ident.key)
        if row is None:
            return BusyCheckResult(False, [], None)
        reasons = self.rules.busy_reasons(row)
        return BusyCheckResult(bool(reasons), reasons, status_of(row))

    def get_status(self, identifier: Identifier) -> Generator[Batch | Call, Any, str | None]:
        ident = DatasetIdentifier.of(identifier)
        row = yield from self.backend.get(ident.key)
        return status_of(row)


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _claim_args(identifier: Identifier, job_id: object,
                scope: object) -> tuple[tuple[str, str], str, str | None]:
    """A finalization claim's key, holder and scope, checked before any I/O."""
    return (DatasetIdentifier.of(identifier).key, check_job_id(job_id, "job_id"),
            check_scope(scope))
