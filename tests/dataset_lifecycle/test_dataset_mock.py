"""MockDatasetLifecycle: the real engine on an in-memory database, recording its calls."""

from __future__ import annotations

from typing import Any

import pytest

from dataset_lifecycle import (
    DEFAULT_LOAD_GUARDS,
    AsyncDatasetLifecycleApi,
    DatasetIdentifier,
    DatasetLifecycleApi,
    InvalidTransitionError,
    TransitionResult,
    ValidationError,
)
from dataset_lifecycle.testing import (
    AsyncMockDatasetLifecycle,
    ClaimCall,
    MockDatasetLifecycle,
    TransitionCall,
)
from support.dataset import Clock

ID = {"userId": "user-1", "datasetId": "ds-1"}
API = [name for name in dir(DatasetLifecycleApi) if not name.startswith("_")]


def finalize(lifecycle: DatasetLifecycleApi, job: str) -> int:
    """Code under test, typed with the shared contract."""
    if not lifecycle.claim_finalization(ID, job, scope="complete").claimed:
        return 208
    try:
        return 200 if lifecycle.transition(ID, to="SUCCEEDED", owner_job_id=job) else 208
    finally:
        lifecycle.release_claim(ID, job, scope="complete")


def test_the_seeds_testing_example() -> None:
    lifecycle = MockDatasetLifecycle()
    lifecycle.set_initial_state(ID, {
        "dataloadingStatus": "LOADING",
        "jobId": "job-1",
        "finalizingJobId": None,
        "finalizingScope": None,
        "finalizingClaimTime": None,
    })

    result = lifecycle.transition(ID, to="SUCCEEDED", owner_job_id="job-1")

    assert result == TransitionResult(True, None, [], "LOADING", "SUCCEEDED")
    [call] = lifecycle.transition_calls
    assert call == TransitionCall(DatasetIdentifier("user-1", "ds-1"), "SUCCEEDED", None,
                                  "job-1", None, None, None, result)
    assert [e.to for e in lifecycle.events] == ["SUCCEEDED"]
    lifecycle.close()


def test_it_implements_the_shared_contract_and_enforces_the_real_rules() -> None:
    lifecycle = MockDatasetLifecycle(load_guards=DEFAULT_LOAD_GUARDS)
    for name in API:
        assert callable(getattr(lifecycle, name)), name
    lifecycle.set_initial_state(ID, {"dataloadingStatus": "LOADING", "jobId": "job-1"})

    assert finalize(lifecycle, "job-2") == 208  # claimed, but job-2 does not own the load
    assert finalize(lifecycle, "job-1") == 200
    claims = [c.result.claimed for c in lifecycle.claim_calls if c.result is not None]
    releases = [c.result.released for c in lifecycle.release_calls if c.result is not None]
    assert (claims, releases) == ([True, True], [True, False])
    assert isinstance(lifecycle.claim_calls[0], ClaimCall)

    with pytest.raises(InvalidTransitionError):
        lifecycle.transition(ID, to="CANCELLING", from_="SUCCEEDED")
    assert lifecycle.transition_calls[-1].result is None  # recorded, though it raised
    lifecycle.set_initial_state(ID, {"dataloadingStatus": "IDLE", "queuedLoadToken": "t",
                                     "__DR": {"isJLORunning": True}})
    check = lifecycle.can_transition_to(ID, "LOADING")
    assert check.reasons == ["JLO_RUNNING", "LOAD_QUEUED"]
    assert check.current_status == "NOT_AVAILABLE"
    assert lifecycle.check_busy(ID).reasons == ["JLO_RUNNING", "LOAD_QUEUED"]
    lifecycle.close()


def test_claims_and_their_ttl_on_an_injected_clock() -> None:
    clock = Clock()
    lifecycle = MockDatasetLifecycle(stale_claim_ms=1_000, clock=clock)
    lifecycle.set_initial_state(ID, {"dataloadingStatus": "CANCELLING", "jobId": "j",
                                     "finalizingJobId": "j", "finalizingScope": "cancel",
                                     "finalizingClaimTime": clock.now})
    assert lifecycle.claim_finalization(ID, "j", scope="complete").reason == "HELD_BY_OTHER"
    clock.advance(1.001)
    assert lifecycle.claim_finalization(ID, "j", scope="complete").claimed
    lifecycle.close()


def test_payload_columns_reservation_and_validation() -> None:
    lifecycle = MockDatasetLifecycle(payload_columns=("rowCount", "indexName"),
                                     reservation_field="__DR.isJobRunning")
    lifecycle.set_initial_state(ID, {"dataloadingStatus": "LOADING", "jobId": "j",
                                     "__DR": {"isJobRunning": True}})
    assert lifecycle.transition(ID, to="FAILED", owner_job_id="j",
                                payload={"rowCount": 12, "indexName": "ix"}).applied
    state = lifecycle.get_lifecycle_state(ID)
    assert state is not None
    assert (state.record["rowCount"], state.record["indexName"]) == (12, "ix")
    assert state.record["__DR"] == {"isJobRunning": False} and not state.is_job_running
    with pytest.raises(ValidationError):
        lifecycle.transition(ID, to="LOADING", owner_job_id="j2", payload={"other": 1})
    with pytest.raises(ValidationError, match="unknown column"):
        lifecycle.set_initial_state(ID, {"nope": 1})
    with pytest.raises(InvalidTransitionError):
        lifecycle.set_initial_state(ID, {"dataloadingStatus": "DONE"})
    lifecycle.close()


def test_reset_starts_over_and_mocks_are_isolated() -> None:
    publisher_got: list[Any] = []
    one = MockDatasetLifecycle(event_publisher=publisher_got.append)
    two = MockDatasetLifecycle()
    one.set_initial_state(ID, {"dataloadingStatus": "FAILED"})
    assert two.get_status(ID) is None
    assert one.transition(ID, to="LOADING", owner_job_id="j").applied
    assert len(one.events) == 1 and publisher_got == one.events  # forwarded too
    one.reset()
    assert one.get_status(ID) is None
    assert (one.transition_calls, one.events) == ([], [])
    one.close()
    two.close()


async def test_the_async_mock() -> None:
    lifecycle = AsyncMockDatasetLifecycle()
    for name in API:
        assert callable(getattr(lifecycle, name)), name

    async def run(api: AsyncDatasetLifecycleApi) -> bool:
        return (await api.transition(ID, to="SUCCEEDED", owner_job_id="job-1")).applied

    lifecycle.set_initial_state(ID, {"dataloadingStatus": "LOADING", "jobId": "job-1"})
    assert await run(lifecycle)
    assert await lifecycle.claim_finalization(ID, "job-1")
    assert [c.to for c in lifecycle.transition_calls] == ["SUCCEEDED"]
    assert len(lifecycle.claim_calls) == 1 and len(lifecycle.events) == 1
    await lifecycle.reset()
    assert await lifecycle.get_status(ID) is None
    await lifecycle.close()


def test_the_two_api_protocols_declare_the_same_methods_alike() -> None:
    """The protocols are the one twin kept by hand (``_types.py`` says why): the async one
    has exactly the sync one's methods, each with the same parameters, as a coroutine."""
    import inspect

    def methods(protocol: type) -> dict[str, inspect.Signature]:
        return {name: inspect.signature(getattr(protocol, name))
                for name in dir(protocol) if not name.startswith("_")}

    sync, async_ = methods(DatasetLifecycleApi), methods(AsyncDatasetLifecycleApi)
    assert sync.keys() == async_.keys()
    for name, signature in sync.items():
        assert list(signature.parameters) == list(async_[name].parameters), name
        assert inspect.iscoroutinefunction(getattr(AsyncDatasetLifecycleApi, name)), name
