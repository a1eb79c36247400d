"""The dataset's rules as one rowstate binding, built from ``init()``'s configuration.

Everything the seed asks of a transition is said here once, as binding data, and the
engine turns it into the single conditional write (and the adapter path evaluates the very
same checks, see :mod:`._adapter`):

* the state column ``dataloadingStatus``, the owner column ``jobId`` (checked when a caller
  names an owner job on any move but LOADING);
* the finalization claim (``finalizingJobId``/``finalizingScope``/``finalizingClaimTime``,
  TTL ``stale_claim_ms``), cleared by the engine on every move into a non-active status,
  and blocking the move to LOADING while it is live (reason FINALIZATION_HELD): no new load
  may start under a finalizer's destructive work;
* the reservation field, written ``false`` on entry to every non-active status;
* the load guards, injected into the WHERE of every move to LOADING, each with its block
  reason (``__DR.isJobRunning`` -> JOB_RUNNING, ...).

The table has no version column, no events table and no lease, so the binding names none:
the CAS on ``dataloadingStatus`` is the door, and events are published after commit.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rowstate import Binding, DefinitionError, FinalizationClaim, Guard, ValidationError
from rowstate.ext import Check, Const, In, RowView, evaluate

from ._machine import (
    ACTIVE,
    LOADING,
    MACHINE,
    Reason,
    evaluate_transition,
)
from ._types import BusyReason, DatasetIdentifier, LifecycleState, TransitionResult

DEFAULT_SCHEMA = "data_sources_datasets"
DEFAULT_TABLE = "qv_dataset"

USER_ID, DATASET_ID = "userId", "datasetId"
KEY = (USER_ID, DATASET_ID)
STATUS = "dataloadingStatus"
JOB_ID = "jobId"
DR = "__DR"
QUEUED_LOAD_TOKEN = "queuedLoadToken"
CLAIM_JOB, CLAIM_SCOPE, CLAIM_TIME = "finalizingJobId", "finalizingScope", "finalizingClaimTime"

JOB_ID_MAX = 255  # VARCHAR(255), as qv_dataset."jobId" (and the seed's finalizingJobId)
SCOPE_MAX = 32  # the seed's finalizingScope VARCHAR(32)

#: The busy signals a row carries, each with its reason and the values that mean "idle"
#: (the fourth :data:`BusyReason`, DATALOADING_ACTIVE, is the status itself).
BUSY_SIGNALS: Mapping[str, tuple[BusyReason, tuple[Any, ...]]] = {
    f"{DR}.isJobRunning": ("JOB_RUNNING", (None, False)),
    f"{DR}.isJLORunning": ("JLO_RUNNING", (None, False)),
    QUEUED_LOAD_TOKEN: ("LOAD_QUEUED", (None,)),
}

#: The seed's recommended ``load_guards``: a load starts only on an idle dataset.
DEFAULT_LOAD_GUARDS: Mapping[str, Any] = {
    field: list(idle) if len(idle) > 1 else idle[0] for field, (_, idle) in BUSY_SIGNALS.items()
}


@dataclass(frozen=True)
class Rules:
    """The configured rules: the binding plus what the dataset layer checks itself."""

    binding: Binding
    table_name: str
    payload_columns: frozenset[str]
    reservation_field: str | None
    busy_checks: tuple[tuple[BusyReason, Check], ...]

    def check_payload(self, payload: Mapping[str, Any] | None) -> dict[str, Any]:
        """The caller's payload, checked before any I/O: only configured payload columns."""
        if payload is None:
            return {}
        if not isinstance(payload, Mapping):
            raise ValidationError(f"payload must be a mapping, got {type(payload).__name__}")
        unknown = [name for name in payload if name not in self.payload_columns]
        if unknown:
            allowed = ", ".join(sorted(self.payload_columns)) or "none configured"
            raise ValidationError(
                f"payload field(s) {', '.join(map(repr, unknown))} are not payload columns "
                f"(allowed: {allowed}; pass payload_columns to init to write more columns)"
            )
        return dict(payload)

    def state_of(self, identifier: DatasetIdentifier, row: Mapping[str, Any],
                 parse_time: Any) -> LifecycleState:
        # a flag is "running" exactly when the busy check (and so the load guard) says so:
        # anything but null/false, by JSON's rule (a JSON 0 or 1 is not a boolean)
        busy: set[str] = set(self._busy_signals(row))
        token = row.get(QUEUED_LOAD_TOKEN)
        return LifecycleState(
            user_id=identifier.user_id,
            dataset_id=identifier.dataset_id,
            status=status_of(row),
            job_id=_text(row.get(JOB_ID)),
            finalizing_job_id=_text(row.get(CLAIM_JOB)),
            finalizing_scope=_text(row.get(CLAIM_SCOPE)),
            finalizing_claim_time=parse_time(row.get(CLAIM_TIME)),
            is_job_running=Reason.JOB_RUNNING.value in busy,
            is_jlo_running=Reason.JLO_RUNNING.value in busy,
            queued_load_token=None if token is None else str(token),
            record=_decoded(row, self.binding.json_columns),
        )

    def busy_reasons(self, row: Mapping[str, Any]) -> list[BusyReason]:
        """Every :data:`BusyReason` the row carries, in the seed's order."""
        reasons: list[BusyReason] = []
        if status_of(row) in ACTIVE:
            reasons.append("DATALOADING_ACTIVE")
        reasons.extend(self._busy_signals(row))
        return reasons

    def _busy_signals(self, row: Mapping[str, Any]) -> list[BusyReason]:
        """The busy signals the row carries, read by the load guards' own checks."""
        view = RowView(row, {}, datetime.now(UTC), parse_time)
        return [reason for reason, check in self.busy_checks if not evaluate(check.node, view)]


def build_rules(*, schema: str, table_name: str, reservation_field: str | None,
                stale_claim_ms: float, load_guards: Mapping[str, Any] | None,
                payload_columns: Iterable[str]) -> Rules:
    """The binding for the configuration; a bad configuration is a ValidationError."""
    if isinstance(stale_claim_ms, bool) or not isinstance(stale_claim_ms, int | float) \
            or not stale_claim_ms > 0:
        raise ValidationError(f"stale_claim_ms must be a positive number, got {stale_claim_ms!r}")
    if isinstance(payload_columns, str):
        raise ValidationError("payload_columns is a sequence of column names, not a string")
    payload = tuple(dict.fromkeys(payload_columns))
    json_columns = {DR}
    managed = {*KEY, STATUS, JOB_ID, CLAIM_JOB, CLAIM_SCOPE, CLAIM_TIME}
    if reservation_field is not None:
        if not isinstance(reservation_field, str) or not reservation_field:
            raise ValidationError(f"reservation_field must be a field name, got "
                                  f"{reservation_field!r}")
        column, *path = reservation_field.split(".")
        if path:
            json_columns.add(column)
        managed.add(column)
    guards: dict[str, Guard] = {}
    if load_guards is not None:
        if not isinstance(load_guards, Mapping):
            raise ValidationError("load_guards must be a mapping of field -> accepted values")
        for field, spec in load_guards.items():
            if isinstance(field, str) and "." in field:
                json_columns.add(field.split(".", 1)[0])
            if isinstance(spec, Guard):
                guards[field] = spec
            else:
                reason = BUSY_SIGNALS.get(field, (Reason.GUARD_FAILED.value, ()))[0]
                values = tuple(spec) if isinstance(spec, list | tuple) else (spec,)
                guards[field] = Guard(values, reason)
    clash = sorted(set(payload) & managed)
    if clash:
        raise ValidationError(f"payload_columns may not name columns the lifecycle manages: "
                              f"{', '.join(clash)}")
    on_enter = {}
    if reservation_field is not None:
        on_enter = {s: {reservation_field: False} for s in MACHINE.states if s not in ACTIVE}
    try:
        binding = Binding(
            MACHINE,
            table=f"{schema}.{table_name}",
            key=KEY,
            state=STATUS,
            owner=JOB_ID,
            finalization=FinalizationClaim(
                holder=CLAIM_JOB, scope=CLAIM_SCOPE, at=CLAIM_TIME,
                ttl=float(stale_claim_ms) / 1000.0, blocks=(LOADING,),
            ),
            on_enter=on_enter,
            enter_guards={LOADING: guards} if guards else {},
            payload=(*payload, JOB_ID),
            json_columns=tuple(sorted(json_columns)),
            columns=(QUEUED_LOAD_TOKEN,),
            events=None,
        )
    except DefinitionError as exc:
        raise ValidationError(f"dataset lifecycle configuration: {exc}") from exc
    busy = []
    for field, (reason, idle) in BUSY_SIGNALS.items():
        [(ref, guard)] = binding.guard_items({field: Guard(idle, reason)})
        node = In(ref, tuple(Const(v) for v in guard.values if v is not None),
                  None in guard.values)
        busy.append((reason, Check(node, reason, Reason.GUARD_FAILED.value)))
    return Rules(binding, table_name, frozenset(payload), reservation_field, tuple(busy))


# -- reading rows and verdicts -------------------------------------------------------------


def status_of(row: Mapping[str, Any] | None) -> str | None:
    if row is None:
        return None
    got = row.get(STATUS)
    return got if isinstance(got, str) else None


def _decoded(row: Mapping[str, Any], json_columns: Iterable[str]) -> dict[str, Any]:
    """The row with its JSON columns as Python values (SQLite hands them back as text)."""
    out = dict(row)
    for column in json_columns:
        if isinstance(out.get(column), str):
            with contextlib.suppress(ValueError):
                out[column] = json.loads(out[column])
    return out


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def parse_time(raw: Any) -> datetime | None:
    """A claim time as any store or adapter may hand it back: a datetime (naive = UTC), ISO
    text, or epoch milliseconds (what a JavaScript service writes)."""
    if raw is None:
        return None
    if isinstance(raw, datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=UTC)
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return datetime.fromtimestamp(raw / 1000.0, UTC)
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def block_reasons(reasons: Iterable[str], current: str | None, target: str) -> list[str]:
    """The engine's reasons in the seed's words: a failed state check becomes
    DATALOADING_ACTIVE or INVALID_TRANSITION when the current status explains it."""
    out: list[str] = []
    for r in reasons:
        if r == Reason.STATE_MISMATCH and current is not None:
            verdict = evaluate_transition(current, target)
            # str(): the engine's reasons may be its Reason members (a StrEnum); the
            # seed's results carry plain strings only
            out.extend(verdict.reasons if not verdict.allowed else [str(r)])
        else:
            out.append(str(r))
    return list(dict.fromkeys(out))


def refused(reason: str | None, reasons: Iterable[str], current: str | None,
            target: str) -> TransitionResult:
    # a live finalization claim is reported by the engine as HELD_BY_OTHER; for a
    # transition it is one more guard (reasons says FINALIZATION_HELD)
    primary = Reason.GUARD_FAILED.value if reason == Reason.HELD_BY_OTHER else reason
    return TransitionResult(False, None if primary is None else str(primary),
                            block_reasons(reasons, current, target), current, current)


def check_job_id(value: object, what: str = "owner_job_id") -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{what} must be a non-empty string, got {value!r}")
    if len(value) > JOB_ID_MAX or "\x00" in value:
        raise ValidationError(f"{what} must be at most {JOB_ID_MAX} characters without NUL")
    return value


def check_scope(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > SCOPE_MAX or "\x00" in value:
        raise ValidationError(f"scope must be a non-empty string of at most {SCOPE_MAX} "
                              f"characters, got {value!r}")
    return value


def check_event_data(data: Any) -> None:
    if data is None:
        return
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"event_data must be JSON-serialisable: {exc}") from None
