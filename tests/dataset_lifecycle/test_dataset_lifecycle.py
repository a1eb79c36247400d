"""The seed's behaviour, on every persistence path x {sync, async} (see support.dataset).

Each test is one example or table of seeds/dataset-lifecycle.md: CAS transitions owned by a
job, the claim-scoping arrival table, "complete wins", the TTL self-heal, the reservation and
the claim cleared in the terminal write, load guards without a TOCTOU window, the dry run
listing every reason, payload columns written atomically, busy checks and events.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from dataset_lifecycle import (
    DEFAULT_LOAD_GUARDS,
    STATUSES,
    DatasetIdentifier,
    DatasetStatusChanged,
    InvalidTransitionError,
    TransitionResult,
    ValidationError,
)
from support.dataset import (
    ID,
    AsyncEvents,
    Clock,
    Env,
    Events,
    drop_pg_schema,
    env_params,
    new_pg_schema,
)

RESERVATION = "__DR.isJobRunning"



@pytest.fixture(scope="module")
def ds_pg_schema(ds_pg_database: str) -> Iterator[str]:
    """One schema for the module's PostgreSQL cases; each test empties the table after."""
    schema = new_pg_schema(ds_pg_database)
    try:
        yield schema
    finally:
        drop_pg_schema(ds_pg_database, schema)


@pytest.fixture(params=env_params())
def env(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Env]:
    kind, mode = request.param
    if kind in ("postgres", "adapter-pg"):
        made = Env(kind, mode, request.getfixturevalue("ds_pg_database"),
                   request.getfixturevalue("ds_pg_schema"))
    else:
        made = Env(kind, mode, f"{tmp_path}/datasets.db")
    try:
        yield made
    finally:
        made.close()


def handle(lc: Any, job: str, scope: str, to: str, work: list[str]) -> int:
    """The seed's status handler: claim, destructive work, transition, release in finally."""
    claim = lc.claim_finalization(ID, job, scope=scope)
    if not claim.claimed:
        return 208
    try:
        work.append(scope)  # ... apply changes, delete versions, swap index ...
        res = lc.transition(ID, from_=[STATUSES.LOADING, STATUSES.CANCELLING], to=to,
                            owner_job_id=job)
        if not res.applied:
            return 208
    finally:
        lc.release_claim(ID, job, scope=scope)
    return 200


# -- transitions ---------------------------------------------------------------------------


def test_starting_a_load_takes_ownership_and_publishes(env: Env) -> None:
    events = AsyncEvents() if env.is_async else Events()
    lc = env.make(event_publisher=events)
    env.seed(dataloadingStatus="NOT_AVAILABLE", jobId="old-job")

    res = lc.transition(ID, to=STATUSES.LOADING, owner_job_id="job-abc",
                        event_data={"by": "api"})

    assert res == TransitionResult(True, None, [], "NOT_AVAILABLE", "LOADING")
    row = env.row()
    assert row is not None
    assert (row["dataloadingStatus"], row["jobId"]) == ("LOADING", "job-abc")
    [event] = events.got
    assert isinstance(event, DatasetStatusChanged)
    assert event.identifier == DatasetIdentifier("u1", "d1")
    assert (event.from_, event.to, event.job_id) == ("NOT_AVAILABLE", "LOADING", "job-abc")
    assert event.event_data == {"by": "api"}
    assert isinstance(event.time, datetime) and event.time.tzinfo is not None
    wire = event.to_dict()
    assert wire["type"] == "DatasetStatusChanged" and wire["from"] == "NOT_AVAILABLE"
    assert lc.is_loading(ID) and lc.get_status(ID) == "LOADING"


def test_a_move_to_loading_needs_an_owner_and_bad_input_writes_nothing(env: Env) -> None:
    lc = env.make()
    env.seed(dataloadingStatus="SUCCEEDED")
    before = env.row()

    with pytest.raises(ValidationError, match="owner_job_id is required"):
        lc.transition(ID, to="LOADING")
    with pytest.raises(InvalidTransitionError):
        lc.transition(ID, to="SUCCEEDED", from_="NOT_AVAILABLE", owner_job_id="j")
    with pytest.raises(InvalidTransitionError):
        lc.transition(ID, to="DONE", owner_job_id="j")
    with pytest.raises(ValidationError):
        lc.transition({"userId": "u1"}, to="FAILED")
    with pytest.raises(ValidationError):
        lc.transition(ID, to="NOT_AVAILABLE", event_data={"x": object()})
    with pytest.raises(ValidationError):
        lc.claim_finalization(ID, "j", scope="x" * 33)
    assert env.row() == before


def test_the_seeds_transition_example(env: Env) -> None:
    """from [LOADING, CANCELLING] to SUCCEEDED, owned, with payload, event data, guards."""
    events = Events()
    lc = env.make(event_publisher=events)
    env.seed(dataloadingStatus="LOADING", jobId="job-abc", __DR={"isJobRunning": False})

    res = lc.transition(ID, from_=[STATUSES.LOADING, STATUSES.CANCELLING],
                        to=STATUSES.SUCCEEDED, owner_job_id="job-abc",
                        payload={"metadataId": "m-1", "rowCount": 100},
                        event_data={"recordsAdded": 100},
                        guards={"__DR.isJobRunning": [None, False]})

    assert res.applied and res.current_status == "SUCCEEDED"
    row = env.row()
    assert row is not None
    assert (row["dataloadingStatus"], row["metadataId"], row["rowCount"]) == (
        "SUCCEEDED", "m-1", 100)
    assert events.got[0].event_data == {"recordsAdded": 100}
    assert events.got[0].job_id == "job-abc"


def test_every_refusal_says_why_and_writes_nothing(env: Env) -> None:
    events = Events()
    lc = env.make(event_publisher=events)
    env.seed(dataloadingStatus="LOADING", jobId="job-1", __DR={"isJobRunning": True})
    before = env.row()

    mismatch = lc.transition(ID, from_=STATUSES.CANCELLING, to="CANCELED", owner_job_id="job-1")
    assert (mismatch.applied, mismatch.reason) == (False, "STATE_MISMATCH")
    assert mismatch.reasons == ["STATE_MISMATCH"] and mismatch.current_status == "LOADING"
    not_owner = lc.transition(ID, from_="LOADING", to="FAILED", owner_job_id="job-2")
    assert (not_owner.reason, not_owner.reasons) == ("NOT_OWNER", ["NOT_OWNER"])
    guard = lc.transition(ID, from_="LOADING", to="FAILED", owner_job_id="job-1",
                          guards={"__DR.isJobRunning": [None, False]})
    assert (guard.reason, guard.reasons) == ("GUARD_FAILED", ["GUARD_FAILED"])
    both = lc.transition(ID, from_="LOADING", to="FAILED", owner_job_id="job-2",
                         guards={"queuedLoadToken": "t"})
    assert (both.reason, both.reasons) == ("NOT_OWNER", ["NOT_OWNER", "GUARD_FAILED"])
    missing = lc.transition({"userId": "u1", "datasetId": "nope"}, from_="LOADING",
                            to="FAILED")
    assert (missing.reason, missing.reasons) == ("RECORD_NOT_FOUND", ["RECORD_NOT_FOUND"])
    assert not mismatch and not missing
    with pytest.raises(ValidationError):  # a guard on a field the table does not have
        lc.transition(ID, from_="LOADING", to="FAILED", guards={"nope": 1})
    assert env.row() == before and events.got == []


def test_omitting_from_reads_the_current_status_first(env: Env) -> None:
    lc = env.make()
    env.seed(dataloadingStatus="CANCELLING", jobId="job-1")

    res = lc.transition(ID, to=STATUSES.CANCELLED, owner_job_id="job-1")  # alias
    assert (res.applied, res.previous_status, res.current_status) == (
        True, "CANCELLING", "CANCELED")
    again = lc.transition(ID, to="CANCELED", owner_job_id="job-1")
    assert (again.reason, again.reasons) == ("STATE_MISMATCH", ["INVALID_TRANSITION"])
    assert lc.transition(ID, to="LOADING", owner_job_id="job-2").applied
    busy = lc.transition(ID, to="LOADING", owner_job_id="job-3")
    assert (busy.reason, busy.reasons) == ("STATE_MISMATCH", ["DATALOADING_ACTIVE"])
    assert lc.transition(ID, to="IDLE", from_=["CANCELED"]).reason == "STATE_MISMATCH"
    row = env.row()
    assert row is not None and (row["dataloadingStatus"], row["jobId"]) == ("LOADING", "job-2")


def test_cancelling_to_succeeded_complete_wins(env: Env) -> None:
    lc = env.make(reservation_field=RESERVATION)
    env.seed(dataloadingStatus="LOADING", jobId="job-1", __DR={"isJobRunning": True})
    assert lc.transition(ID, to="CANCELLING", owner_job_id="job-1").applied
    row = env.row()
    assert row is not None and row["__DR"]["isJobRunning"] is True  # active: still reserved

    assert handle(lc, "job-1", "complete", "SUCCEEDED", []) == 200
    assert lc.get_status(ID) == "SUCCEEDED"


def test_reservation_and_claim_are_cleared_in_the_terminal_write(env: Env) -> None:
    lc = env.make(reservation_field=RESERVATION)
    env.seed(dataloadingStatus="LOADING", jobId="job-1",
             __DR={"isJobRunning": True, "isJLORunning": False, "other": 7})
    assert lc.claim_finalization(ID, "job-1", scope="failure").claimed
    held = env.row()
    assert held is not None and held["finalizingJobId"] == "job-1"
    calls_before = len(env.dict.calls)

    res = lc.transition(ID, from_=["LOADING", "CANCELLING"], to="FAILED", owner_job_id="job-1")

    assert res.applied
    row = env.row()
    assert row is not None
    assert row["dataloadingStatus"] == "FAILED"
    assert (row["finalizingJobId"], row["finalizingScope"], row["finalizingClaimTime"]) == (
        None, None, None)
    assert row["__DR"] == {"isJobRunning": False, "isJLORunning": False, "other": 7}
    if env.kind == "dict":  # the adapter path: one conditional write carries all of it
        calls = env.dict.calls[calls_before:]
        [(_, update, condition)] = [c for c in calls if c[0] == "update"]
        assert update == {"dataloadingStatus": "FAILED", "finalizingJobId": None,
                          "finalizingScope": None, "finalizingClaimTime": None,
                          "__DR.isJobRunning": False}
        # two from-states: read first, and write on the status seen (the event's from)
        assert condition == {**ID, "dataloadingStatus": "LOADING", "jobId": "job-1"}
    released = lc.release_claim(ID, "job-1", scope="failure")
    assert (released.released, released.reason) == (False, "NOT_HELD")  # safe no-op


@pytest.mark.parametrize("env", env_params("sqlite", "postgres"), indirect=True)
def test_engine_path_writes_a_terminal_move_in_one_statement(env: Env) -> None:
    """The database path counts SQL statements (the adapter paths have their own test)."""
    lc = env.make(reservation_field=RESERVATION)
    env.seed(dataloadingStatus="LOADING", jobId="job-1", __DR={"isJobRunning": True})
    store = (lc.aio if env.is_async else lc)._setup.store
    lc.get_status(ID)  # the async init checks the table's columns on first use
    before = store.statements
    assert lc.transition(ID, from_="LOADING", to="SUCCEEDED", owner_job_id="job-1").applied
    assert store.statements - before == 1


# -- claim scoping -------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["complete-first", "cancel-first", "redelivered"])
def test_the_claim_scoping_arrival_table(env: Env, order: str) -> None:
    lc = env.make(reservation_field=RESERVATION)
    env.seed(dataloadingStatus="CANCELLING", jobId="job-1", __DR={"isJobRunning": True})
    work: list[str] = []

    if order == "complete-first":
        claim = lc.claim_finalization(ID, "job-1", scope="complete")
        assert claim.claimed and (claim.current_holder, claim.current_scope) == (
            "job-1", "complete")
        cancel = lc.claim_finalization(ID, "job-1", scope="cancel")
        assert (cancel.claimed, cancel.reason) == (False, "HELD_BY_OTHER")
        assert (cancel.current_holder, cancel.current_scope) == ("job-1", "complete")
        assert handle(lc, "job-1", "cancel", "CANCELED", work) == 208  # never runs
        assert handle(lc, "job-1", "complete", "SUCCEEDED", work) == 200
        assert (work, lc.get_status(ID)) == (["complete"], "SUCCEEDED")
    elif order == "cancel-first":
        assert lc.claim_finalization(ID, "job-1", scope="cancel").claimed
        assert handle(lc, "job-1", "complete", "SUCCEEDED", work) == 208
        assert handle(lc, "job-1", "cancel", "CANCELED", work) == 200
        assert (work, lc.get_status(ID)) == (["cancel"], "CANCELED")
    else:
        assert lc.claim_finalization(ID, "job-1", scope="complete").claimed
        assert lc.claim_finalization(ID, "job-1", scope="complete").claimed  # redelivery
        assert handle(lc, "job-1", "complete", "SUCCEEDED", work) == 200
        # the redelivery re-claims (the row holds no claim now) and the CAS keeps it a no-op
        assert handle(lc, "job-1", "complete", "SUCCEEDED", work) == 208
        assert lc.get_status(ID) == "SUCCEEDED"
    state = lc.get_lifecycle_state(ID)
    assert state.finalizing_job_id is None and state.is_job_running is False


def test_a_claim_without_scope_is_keyed_on_the_job_alone(env: Env) -> None:
    lc = env.make()
    env.seed(dataloadingStatus="LOADING", jobId="job-1")
    assert lc.claim_finalization(ID, "job-1").claimed
    assert lc.get_lifecycle_state(ID).finalizing_scope is None  # stored as NULL
    assert lc.claim_finalization(ID, "job-1").claimed
    other = lc.claim_finalization(ID, "job-1", scope="cancel")
    assert (other.reason, other.current_holder, other.current_scope) == (
        "HELD_BY_OTHER", "job-1", None)
    assert lc.claim_finalization(ID, "job-2").reason == "HELD_BY_OTHER"
    missing = lc.claim_finalization({"userId": "u1", "datasetId": "nope"}, "job-1")
    assert (missing.claimed, missing.reason) == (False, "RECORD_NOT_FOUND")


def test_release_is_owner_checked_and_idempotent(env: Env) -> None:
    lc = env.make()
    env.seed(dataloadingStatus="LOADING", jobId="job-1")
    assert lc.claim_finalization(ID, "job-1", scope="complete").claimed

    assert not lc.release_claim(ID, "job-2", scope="complete").released
    assert not lc.release_claim(ID, "job-1", scope="cancel").released
    assert not lc.release_claim(ID, "job-1").released
    assert lc.release_claim(ID, "job-1", scope="complete").released
    assert lc.get_lifecycle_state(ID).finalizing_job_id is None
    assert lc.release_claim(ID, "job-1", scope="complete").reason == "NOT_HELD"
    assert lc.claim_finalization(ID, "job-9", scope="cancel").claimed


def test_a_stale_claim_is_taken_after_the_ttl_injected_clock(env: Env) -> None:
    clock = Clock()
    lc = env.make(stale_claim_ms=60_000, clock=clock)
    env.seed(dataloadingStatus="LOADING", jobId="job-1")
    assert lc.claim_finalization(ID, "job-1", scope="complete").claimed
    assert lc.get_lifecycle_state(ID).finalizing_claim_time == clock.now

    clock.advance(59)
    assert lc.claim_finalization(ID, "job-1", scope="cancel").reason == "HELD_BY_OTHER"
    clock.advance(2)
    stolen = lc.claim_finalization(ID, "job-1", scope="cancel")
    assert stolen.claimed and stolen.current_scope == "cancel"
    assert lc.get_lifecycle_state(ID).finalizing_claim_time == clock.now
    # the crashed holder comes back: it no longer holds anything, and cannot take it back
    assert lc.claim_finalization(ID, "job-1", scope="complete").reason == "HELD_BY_OTHER"
    assert not lc.release_claim(ID, "job-1", scope="complete").released
    assert lc.get_lifecycle_state(ID).finalizing_scope == "cancel"


@pytest.mark.parametrize("env", env_params("sqlite-sync", "postgres-sync", "dict-async"),
                         indirect=True)
def test_a_stale_claim_is_taken_after_the_ttl_real_time(env: Env) -> None:
    lc = env.make(stale_claim_ms=300)
    env.seed(dataloadingStatus="LOADING", jobId="job-1")
    assert lc.claim_finalization(ID, "job-1", scope="complete").claimed
    assert lc.claim_finalization(ID, "job-1", scope="cancel").reason == "HELD_BY_OTHER"
    time.sleep(0.35)
    assert lc.claim_finalization(ID, "job-1", scope="cancel").claimed
    assert not lc.release_claim(ID, "job-1", scope="complete").released
    assert lc.release_claim(ID, "job-1", scope="cancel").released


# -- load guards, the dry run, busy checks ----------------------------------------------------


def test_load_guards_refuse_a_load_that_races_a_busy_flag(env: Env) -> None:
    lc = env.make(load_guards=DEFAULT_LOAD_GUARDS, reservation_field=RESERVATION)
    env.seed(dataloadingStatus="SUCCEEDED", jobId="job-0", __DR={"isJobRunning": False})

    check = lc.can_transition_to(ID, "LOADING")
    assert (check.allowed, check.reasons, check.current_status) == (True, [], "SUCCEEDED")
    env.poke("__DR.isJobRunning", True)  # another writer, between the check and the write
    before = env.row()

    res = lc.transition(ID, to="LOADING", owner_job_id="job-1")

    assert (res.applied, res.reason, res.reasons) == (False, "GUARD_FAILED", ["JOB_RUNNING"])
    assert env.row() == before
    env.poke("__DR.isJobRunning", None)
    env.poke("queuedLoadToken", "tok")
    res = lc.transition(ID, from_="SUCCEEDED", to="LOADING", owner_job_id="job-1")
    assert (res.applied, res.reasons) == (False, ["LOAD_QUEUED"])
    env.poke("queuedLoadToken", None)
    assert lc.transition(ID, from_="SUCCEEDED", to="LOADING", owner_job_id="job-1").applied


def test_can_transition_to_lists_every_reason_at_once(env: Env) -> None:
    lc = env.make(load_guards=DEFAULT_LOAD_GUARDS)
    env.seed(dataloadingStatus="SUCCEEDED", jobId="job-0", queuedLoadToken="tok",
             __DR={"isJobRunning": True, "isJLORunning": True})
    assert lc.claim_finalization(ID, "job-0", scope="complete").claimed  # a late finalizer

    check = lc.can_transition_to(ID, "LOADING")
    assert not check and check.current_status == "SUCCEEDED"
    assert check.reasons == ["FINALIZATION_HELD", "JOB_RUNNING", "JLO_RUNNING", "LOAD_QUEUED"]
    res = lc.transition(ID, to="LOADING", owner_job_id="job-1")  # the ask and the do agree
    assert (res.reason, res.reasons) == ("GUARD_FAILED", check.reasons)

    env.seed(dataloadingStatus="LOADING", jobId="job-1", __DR={"isJobRunning": True})
    assert lc.can_transition_to(ID, "LOADING").reasons == ["DATALOADING_ACTIVE", "JOB_RUNNING"]
    assert lc.can_transition_to(ID, "SUCCEEDED", owner_job_id="job-2").reasons == ["NOT_OWNER"]
    assert lc.can_transition_to(ID, "SUCCEEDED", owner_job_id="job-1").allowed
    assert lc.can_transition_to(ID, "NOT_AVAILABLE").reasons == ["INVALID_TRANSITION"]
    missing = lc.can_transition_to({"userId": "u1", "datasetId": "nope"}, "LOADING")
    assert (missing.allowed, missing.reasons, missing.current_status) == (
        False, ["RECORD_NOT_FOUND"], None)


def test_a_live_claim_blocks_a_new_load_until_it_is_stale(env: Env) -> None:
    clock = Clock()
    lc = env.make(stale_claim_ms=1_000, clock=clock)
    env.seed(dataloadingStatus="CANCELED", jobId="job-0")
    assert lc.claim_finalization(ID, "job-0", scope="cancel").claimed  # a redelivery

    res = lc.transition(ID, to="LOADING", owner_job_id="job-1")
    assert (res.reason, res.reasons) == ("GUARD_FAILED", ["FINALIZATION_HELD"])
    clock.advance(1.5)
    assert lc.transition(ID, to="LOADING", owner_job_id="job-1").applied


def test_check_busy_reports_every_signal(env: Env) -> None:
    lc = env.make()
    env.seed(dataloadingStatus="SUCCEEDED", __DR={"isJobRunning": False})
    assert lc.check_busy(ID).busy is False and not lc.is_busy(ID)

    env.seed(dataloadingStatus="CANCELLING", queuedLoadToken="tok",
             __DR={"isJobRunning": True, "isJLORunning": True})
    busy = lc.check_busy(ID)
    assert busy.busy and busy.current_status == "CANCELLING"
    assert busy.reasons == ["DATALOADING_ACTIVE", "JOB_RUNNING", "JLO_RUNNING", "LOAD_QUEUED"]
    assert lc.is_busy(ID) and not lc.is_loading(ID)
    assert lc.check_busy({"userId": "u1", "datasetId": "nope"}).busy is False
    assert lc.get_status({"userId": "u1", "datasetId": "nope"}) is None
    assert lc.get_lifecycle_state({"userId": "u1", "datasetId": "nope"}) is None


def test_get_lifecycle_state_is_a_full_snapshot(env: Env) -> None:
    clock = Clock()
    lc = env.make(clock=clock)
    env.seed(DatasetIdentifier("u1", "d1").as_keys(), dataloadingStatus="LOADING",
             jobId="job-1", queuedLoadToken="tok", __DR={"isJLORunning": True})
    assert lc.claim_finalization(DatasetIdentifier("u1", "d1"), "job-1", scope="c").claimed

    state = lc.get_lifecycle_state(DatasetIdentifier("u1", "d1"))

    assert (state.user_id, state.dataset_id, state.status, state.job_id) == (
        "u1", "d1", "LOADING", "job-1")
    assert (state.finalizing_job_id, state.finalizing_scope) == ("job-1", "c")
    assert state.finalizing_claim_time == clock.now
    assert (state.is_job_running, state.is_jlo_running, state.queued_load_token) == (
        False, True, "tok")
    assert state.record["__DR"] == {"isJLORunning": True}


# -- payload -------------------------------------------------------------------------------


def test_payload_columns_are_written_with_the_status_or_not_at_all(env: Env) -> None:
    events = Events()
    lc = env.make(event_publisher=events)
    env.seed(dataloadingStatus="LOADING", jobId="job-1")
    before = env.row()

    with pytest.raises(ValidationError, match="indexName"):
        lc.transition(ID, to="SUCCEEDED", owner_job_id="job-1",
                      payload={"rowCount": 5, "indexName": "ix"})
    assert env.row() == before and events.got == []

    refused = lc.transition(ID, to="SUCCEEDED", owner_job_id="job-2", payload={"rowCount": 5})
    assert refused.reason == "NOT_OWNER" and env.row() == before

    assert lc.transition(ID, to="SUCCEEDED", owner_job_id="job-1",
                         payload={"rowCount": 5, "metadataId": "m"}).applied
    row = env.row()
    assert row is not None
    assert (row["dataloadingStatus"], row["rowCount"], row["metadataId"]) == (
        "SUCCEEDED", 5, "m")


def test_payload_columns_may_not_name_lifecycle_columns(env: Env) -> None:
    with pytest.raises(ValidationError, match="manages"):
        env.make(payload_columns=("dataloadingStatus",))
    with pytest.raises(ValidationError, match="manages"):
        env.make(payload_columns=("rowCount", "__DR"), reservation_field=RESERVATION)


# -- events --------------------------------------------------------------------------------


def test_a_failing_publisher_is_logged_and_the_write_stands(env: Env,
                                                            caplog: Any) -> None:
    class Broken:
        def publish(self, event: Any) -> None:
            raise RuntimeError("broker down")

    lc = env.make(event_publisher=Broken())
    env.seed(dataloadingStatus="LOADING", jobId="job-1")
    with caplog.at_level("ERROR", logger="dataset_lifecycle"):
        assert lc.transition(ID, to="FAILED", owner_job_id="job-1").applied
    assert "broker down" in caplog.text
    assert lc.get_status(ID) == "FAILED"


def test_a_refused_transition_publishes_nothing(env: Env) -> None:
    events = Events()
    lc = env.make(event_publisher=events)
    env.seed(dataloadingStatus="SUCCEEDED")
    assert not lc.transition(ID, from_="LOADING", to="FAILED").applied
    assert events.got == []
