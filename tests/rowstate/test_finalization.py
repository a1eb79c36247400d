"""Finalization claims (the dataset lifecycle's ``finalizingJobId``/``finalizingScope``):
keyed by (holder, scope), re-claimable by the same holder, stealable after the TTL, released
by their owner only, cleared in the same write by a move into a state that is not active.

None of these is a conformance test: a finalization claim is the core's SQL, run the way
every move runs (the transitions' and leases' conformance tests cover the store's part),
so the contrib stores run them under ``-m contrib`` only. The bad calls are
``@refused_before_io``: one backend, no statement sent.
"""

from __future__ import annotations

import pytest

from rowstate import ValidationError
from support.engine import JOBS, RUNS, Backend, Clock, as_dict, refused_before_io

FIN = ("fin_holder", "fin_scope", "fin_at")


def claim_columns(row: dict[str, object]) -> tuple[object, ...]:
    return tuple(row[c] for c in FIN)


def test_claim_and_reclaim_by_the_same_holder_and_scope(backend: Backend) -> None:
    clock = Clock()
    jobs = backend.make(JOBS, clock=clock)
    backend.seed(JOBS, id="j1", state="RUNNING")

    first = jobs.claim_finalization("j1", "job-7", "publish")
    assert (first.claimed, first.reason, first.holder, first.scope) == (True, None, "job-7",
                                                                        "publish")
    assert first.token == 1
    row = as_dict(first.row)
    assert (row["fin_holder"], row["fin_scope"]) == ("job-7", "publish")
    assert backend.time(row["fin_at"]) == clock.now

    clock.advance(30)  # a redelivered message: the same holder claims again
    again = jobs.claim_finalization("j1", "job-7", "publish")
    assert again.claimed and again.token == 2
    assert backend.time(as_dict(jobs.get("j1"))["fin_at"]) == clock.now


def test_another_holder_or_scope_is_told_who_holds_it(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="RUNNING")
    assert jobs.claim_finalization("j1", "job-7", "publish").claimed

    other = jobs.claim_finalization("j1", "job-8", "publish")
    assert (other.claimed, other.reason) == (False, "HELD_BY_OTHER")
    assert (other.holder, other.scope, other.token) == ("job-7", "publish", None)
    scope = jobs.claim_finalization("j1", "job-7", "delete")  # keyed by (holder, scope)
    assert (scope.claimed, scope.reason, scope.scope) == (False, "HELD_BY_OTHER", "publish")
    assert as_dict(jobs.get("j1"))["fin_token"] == 1

    missing = jobs.claim_finalization("nobody", "job-7", "publish")
    assert (missing.claimed, missing.reason) == (False, "RECORD_NOT_FOUND")


def test_a_claim_without_scope_is_keyed_by_holder_and_null(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="RUNNING")
    assert jobs.claim_finalization("j1", "job-7").claimed
    assert jobs.claim_finalization("j1", "job-7").claimed
    assert jobs.claim_finalization("j1", "job-7", "publish").reason == "HELD_BY_OTHER"
    assert jobs.claim_finalization("j1", "job-8").reason == "HELD_BY_OTHER"


def test_an_old_claim_is_stolen_after_the_ttl(backend: Backend) -> None:
    clock = Clock()
    jobs = backend.make(JOBS, clock=clock)  # finalization ttl: 120 s
    backend.seed(JOBS, id="j1", state="RUNNING")
    assert jobs.claim_finalization("j1", "crashed", "publish").token == 1

    clock.advance(120)
    assert jobs.claim_finalization("j1", "healer", "publish").reason == "HELD_BY_OTHER"
    clock.advance(1)
    stolen = jobs.claim_finalization("j1", "healer", "publish")
    assert (stolen.claimed, stolen.holder, stolen.token) == (True, "healer", 2)
    assert jobs.claim_finalization("j1", "crashed", "publish").reason == "HELD_BY_OTHER"
    assert not jobs.release_finalization("j1", "crashed", "publish")


def test_release_is_owner_checked_and_idempotent(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="RUNNING")
    assert jobs.claim_finalization("j1", "job-7", "publish").claimed

    assert not jobs.release_finalization("j1", "job-8", "publish")
    assert not jobs.release_finalization("j1", "job-7", "delete")
    assert as_dict(jobs.get("j1"))["fin_holder"] == "job-7"

    assert jobs.release_finalization("j1", "job-7", "publish").released
    assert claim_columns(as_dict(jobs.get("j1"))) == (None, None, None)
    assert not jobs.release_finalization("j1", "job-7", "publish")  # nothing held: no-op
    assert not jobs.release_finalization("nobody", "job-7", "publish")
    assert jobs.claim_finalization("j1", "job-8", "publish").claimed


def test_a_move_into_a_state_that_is_not_active_clears_it(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")
    backend.seed(JOBS, id="j2", state="RUNNING")
    assert jobs.claim_finalization("j1", "job-7", "publish").claimed
    assert jobs.claim_finalization("j2", "job-9", "publish").claimed

    # READY -> RUNNING: both active, the claim stays
    assert jobs.run("j1", "start", lambda lease: True).applied
    assert as_dict(jobs.get("j1"))["fin_holder"] == "job-7"
    # a refused move into DONE clears nothing
    assert jobs.transition("j1", "DONE", guards={"priority": 1}).reason == "GUARD_FAILED"
    assert as_dict(jobs.get("j1"))["fin_holder"] == "job-7"

    done = jobs.transition("j1", "DONE")
    assert done.applied
    assert claim_columns(as_dict(done.row)) == (None, None, None)  # in the same write
    assert claim_columns(as_dict(jobs.get("j1"))) == (None, None, None)

    assert jobs.transition("j2", "FAILED").applied  # FAILED is not active either
    assert claim_columns(as_dict(jobs.get("j2"))) == (None, None, None)
    assert as_dict(jobs.get("j2"))["fin_token"] == 1  # the token only ever grows


BAD_CLAIMANTS: list[tuple[object, object]] = [("", "s"), (7, "s"), ("h", 7), ("x" * 5000, "s"),
                                              ("h\x00", "s"), (None, "s")]


@refused_before_io
def test_bad_holders_and_scopes_are_refused(backend: Backend) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="RUNNING")
    before = backend.rows(JOBS)
    with backend.no_io():
        for holder, scope in BAD_CLAIMANTS:
            with pytest.raises(ValidationError):
                jobs.claim_finalization("j1", holder, scope)
    assert backend.rows(JOBS) == before


@refused_before_io
def test_a_binding_without_finalization_columns_refuses(backend: Backend) -> None:
    runs = backend.make(RUNS)
    backend.seed(RUNS, week_of="w1")
    with backend.no_io():
        with pytest.raises(ValidationError, match="no finalization claim"):
            runs.claim_finalization("w1", "job-7", "publish")
        with pytest.raises(ValidationError, match="no finalization claim"):
            runs.release_finalization("w1", "job-7", "publish")
