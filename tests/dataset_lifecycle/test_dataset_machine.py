"""The table, its aliases and everything derived from it; the public surface; the DDL.
No database needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dataset_lifecycle
from dataset_lifecycle import (
    MACHINE,
    MIGRATION_SQL,
    STATUSES,
    TRANSITION_TABLE,
    DatasetIdentifier,
    DatasetStatus,
    InvalidTransitionError,
    Reason,
    TransitionCheckResult,
    ValidationError,
    evaluate_transition,
    is_valid_transition,
    migration_sql,
    schema_sql,
)
from dataset_lifecycle.testing import MockDatasetLifecycle

SEED = Path("/work/shared/seeds/dataset-lifecycle.md")

# The seed's "State machine" section, as written there.
SEED_TABLE = """
NOT_AVAILABLE → LOADING
LOADING       → SUCCEEDED | FAILED | CANCELLING | CANCELED
CANCELLING    → CANCELED  | FAILED | SUCCEEDED
SUCCEEDED     → LOADING   | NOT_AVAILABLE
FAILED        → LOADING   | NOT_AVAILABLE
CANCELED      → LOADING   | NOT_AVAILABLE
"""


def test_the_transition_table_is_the_seeds() -> None:
    expected = {}
    for line in SEED_TABLE.strip().splitlines():
        src, dsts = line.split("→")
        expected[src.strip()] = tuple(d.strip() for d in dsts.split("|"))
    assert dict(TRANSITION_TABLE) == expected
    if SEED.exists():
        text = " ".join(SEED.read_text().split())
        for line in SEED_TABLE.strip().splitlines():
            assert " ".join(line.split()) in text
    assert MACHINE.active == {"LOADING", "CANCELLING"}
    assert MACHINE.final == frozenset()  # every status has a way out
    assert MACHINE.initial == "NOT_AVAILABLE"
    with pytest.raises(TypeError):
        TRANSITION_TABLE["LOADING"] = ()  # type: ignore[index]


def test_every_edge_of_the_machine_is_in_the_table_and_nothing_else() -> None:
    pairs = {(s, d) for s, dsts in TRANSITION_TABLE.items() for d in dsts}
    assert pairs == {(e.src, e.dst) for e in MACHINE.edges}
    for src in MACHINE.states:
        for dst in MACHINE.states:
            assert is_valid_transition(src, dst) == ((src, dst) in pairs)


def test_statuses_and_aliases() -> None:
    assert [s.value for s in STATUSES] == ["NOT_AVAILABLE", "LOADING", "SUCCEEDED", "FAILED",
                                           "CANCELLING", "CANCELED"]
    assert STATUSES("NOT_AVAILABLE") is STATUSES.IDLE and str(STATUSES.IDLE) == "NOT_AVAILABLE"
    assert STATUSES("CANCELED") is STATUSES.CANCELLED and str(STATUSES.CANCELLED) == "CANCELED"
    assert DatasetStatus is STATUSES
    assert is_valid_transition("IDLE", "LOADING")
    assert is_valid_transition(STATUSES.LOADING, "CANCELLED")
    assert is_valid_transition("CANCELLING", "SUCCEEDED")  # complete wins
    assert not is_valid_transition("NOT_AVAILABLE", "SUCCEEDED")
    assert not is_valid_transition("LOADING", "LOADING")
    assert not is_valid_transition("BOGUS", "LOADING") and not is_valid_transition(None, "X")


def test_evaluate_transition_names_the_block_reason() -> None:
    assert evaluate_transition("SUCCEEDED", "LOADING") == TransitionCheckResult(
        True, [], "SUCCEEDED")
    assert evaluate_transition("CANCELLING", "LOADING").reasons == ["DATALOADING_ACTIVE"]
    assert evaluate_transition("LOADING", "LOADING").reasons == ["DATALOADING_ACTIVE"]
    assert evaluate_transition("NOT_AVAILABLE", "FAILED").reasons == ["INVALID_TRANSITION"]
    assert evaluate_transition(None, "FAILED").reasons == ["INVALID_TRANSITION"]
    assert evaluate_transition("IDLE", "LOADING").current_status == "NOT_AVAILABLE"
    with pytest.raises(InvalidTransitionError):
        evaluate_transition("LOADING", "DONE")


def test_reasons_are_the_seeds() -> None:
    block = {"RECORD_NOT_FOUND", "INVALID_TRANSITION", "DATALOADING_ACTIVE", "JOB_RUNNING",
             "JLO_RUNNING", "LOAD_QUEUED", "NOT_OWNER", "FINALIZATION_HELD"}
    primary = {"STATE_MISMATCH", "NOT_OWNER", "GUARD_FAILED", "RECORD_NOT_FOUND"}
    assert block | primary | {"HELD_BY_OTHER", "NOT_HELD"} == {r.value for r in Reason}
    assert dataset_lifecycle.BlockReason is Reason


def test_the_issues_import_surface() -> None:
    names = ["DatasetLifecycle", "AsyncDatasetLifecycle", "STATUSES", "TRANSITION_TABLE",
             "STALE_CLAIM_MS", "is_valid_transition", "evaluate_transition",
             "create_persistence_adapter", "PersistenceAdapter", "EventPublisher",
             "InvalidTransitionError", "LifecycleNotInitializedError", "ValidationError",
             "DatasetIdentifier", "TransitionResult", "ClaimResult", "ReleaseResult",
             "LifecycleState", "BusyCheckResult", "TransitionCheckResult",
             "DatasetLifecycleApi"]
    for name in names:
        assert name in dataset_lifecycle.__all__ and hasattr(dataset_lifecycle, name), name
    assert dataset_lifecycle.STALE_CLAIM_MS == 300_000
    assert MockDatasetLifecycle is not None
    import rowstate

    assert dataset_lifecycle.ValidationError is rowstate.ValidationError
    assert dataset_lifecycle.InvalidTransitionError is rowstate.InvalidTransitionError
    assert issubclass(dataset_lifecycle.LifecycleNotInitializedError, rowstate.RowstateError)


def test_identifiers() -> None:
    ident = DatasetIdentifier(user_id="u", dataset_id="d")
    assert DatasetIdentifier.of({"userId": "u", "datasetId": "d"}) == ident
    assert DatasetIdentifier.of({"user_id": "u", "dataset_id": "d"}) == ident
    assert DatasetIdentifier.of(ident) is ident and ident.as_keys() == {"userId": "u",
                                                                         "datasetId": "d"}
    for bad in ({"userId": "u"}, {"userId": "", "datasetId": "d"}, ("u", "d"), None,
                {"userId": 1, "datasetId": "d"}):
        with pytest.raises(ValidationError):
            DatasetIdentifier.of(bad)  # type: ignore[arg-type]


def test_schema_sql_is_the_base_table_then_the_seeds_migration() -> None:
    pg = schema_sql("postgresql")
    assert pg.index("CREATE TABLE") < pg.index(MIGRATION_SQL)
    assert pg.endswith(MIGRATION_SQL)
    for column in ('"userId"', '"datasetId"', '"dataloadingStatus"', '"jobId"',
                   '"__DR"              JSONB', '"queuedLoadToken"'):
        assert column in pg
    other = migration_sql(schema="s2", table_name="Datasets")
    assert 's2."Datasets"' in other and '"idx_Datasets_finalizing_claim"' in other
    lite = schema_sql("sqlite", extra_columns={"rowCount": "INTEGER"})
    assert 'CREATE TABLE IF NOT EXISTS "qv_dataset"' in lite and '"rowCount" INTEGER' in lite
    assert 'WHERE "finalizingJobId" IS NOT NULL' in lite
    with pytest.raises(ValidationError):
        schema_sql("mysql")
    with pytest.raises(ValidationError):
        schema_sql("postgresql", extra_columns={"x": "INT; DROP TABLE y"})
    with pytest.raises(ValidationError):
        schema_sql("postgresql", schema='bad"name')


def test_the_diagram_is_drawn_from_the_machine() -> None:
    diagram = MACHINE.mermaid()
    assert "CANCELLING --> SUCCEEDED: complete wins" in diagram
    assert len(re.findall(r" --> ", diagram)) == len(MACHINE.edges) + 1  # + [*] --> initial


def test_the_engine_refuses_a_claim_blocking_an_unknown_state() -> None:
    from rowstate import Binding, DefinitionError, FinalizationClaim

    with pytest.raises(DefinitionError, match="DONE"):
        Binding(MACHINE, table="t", key=("id",), finalization=FinalizationClaim(
            holder="h", scope="s", at="at", blocks=("DONE",)))
