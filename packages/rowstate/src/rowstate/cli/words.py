"""What each reason code means, in words a person reads beside the code (the codes are
:mod:`rowstate.results`'s, and the diagnosis' own)."""

from __future__ import annotations

MEANINGS: dict[str, str] = {
    "RECORD_NOT_FOUND": "no row has this key",
    "STATE_MISMATCH": "the row is not in a from-state of this edge",
    "LEASE_HELD": "a live lease of a side-effecting edge blocks every other edge",
    "NOT_OWNER": "the row's owner is not the caller's",
    "GUARD_FAILED": "a guard (the caller's or the binding's entry guard) does not hold",
    "INVARIANT": "another row already holds the state this edge enters (allowed once)",
    "LEASE_LOST": "the lease was taken over (its fencing token moved)",
    "HELD_BY_OTHER": "a finalization claim is held by another (holder, scope)",
    "FINALIZATION_HELD": "a live finalization claim blocks entering this state",
    "ACT_FAILED": "the side effect failed; the lease was released",
    "RECORD_EXISTS": "a row with this key already exists",
    "NOT_DUE": "its due time has not come (or is not set)",
    "BACKING_OFF": "its act failed recently: it waits out the timer's back-off",
    "ALREADY_SENT": "the notice was sent already",
    "LEASE_EXPIRED": "the lease is past its TTL",
    "CLAIM_EXPIRED": "the finalization claim is past its TTL",
    "UNRELAYED": "no relay has delivered the event",
}


def meaning(code: str) -> str:
    return MEANINGS.get(code, "a guard's own reason (see the binding)")


def why(code: str) -> str:
    """``CODE — what it means``."""
    return f"{code} \u2014 {meaning(code)}"
