"""The legacy send, under the single-purpose send lease of the seed's AD-12
(``send_lease_at`` / ``send_lease_holder``).

The lease is claimed by a conditional UPDATE only while the week is approved and unsent and
the lease is free or older than :data:`~pubsched.machine.SEND_LEASE_TTL` (by the database
clock); every unit the shared :func:`pubsched.week.send.send_body` opens locks the row and checks
the lease is still this claim's (a zombie whose lease was taken over hands nothing more to
SMTP); success writes status 'sent', ``sent_at`` and clears the lease in one statement
conditioned on the claim; failure clears the lease and stamps ``last_error``, the week stays
approved and a retry sends only to recipients never attempted or failed. A live v2 lease
(``acting_at``, which only a forced flip could leave there) also refuses the send.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rowstate

from ..machine import SEND_LEASE_TTL
from ..pub import Pub, utc
from ..verdicts import Verdict
from ..week.runs import week_key
from ..week.send import failure_text, send_body
from .legacy_state import (
    ACT_FAILED,
    LEASE_HELD,
    LEASE_LOST,
    STATE_MISMATCH,
    applied,
    db_now_sql,
    existing_row,
    inferred_state,
    lease_live,
    refused,
    run_row,
    stale_sql,
    update_run,
)


@dataclass(frozen=True)
class SendClaim:
    """One successful claim of the send lease: the holder (unique per claim) and the
    stamp the claim wrote. Every later write of the send is conditioned on both."""

    week: str
    holder: str
    at: datetime


def claim_send(pub: Pub, week: str, *, holder: str | None = None) -> SendClaim | Verdict:
    """Take the send lease: one conditional UPDATE, so of two senders exactly one gets it.
    A refusal says why (STATE_MISMATCH: not approved, or sent; LEASE_HELD: a live lease)."""
    key = week_key(week)
    row = existing_row(pub, key)
    if lease_live(row.get("acting_at"), row["db_now"]):
        return refused(pub, key, "send", LEASE_HELD, "a v2 lease is live on the week")
    name = f"{holder or 'legacy'}:{uuid.uuid4().hex}"
    stale, ttl = stale_sql(pub, SEND_LEASE_TTL)
    with pub.atomic() as tx:
        rows = tx.execute(
            f"UPDATE pub_schedule_runs SET send_lease_at = {db_now_sql(pub)}, "
            "send_lease_holder = %s WHERE week_of = %s AND status = 'approved' AND "
            f"sent_at IS NULL AND (send_lease_at IS NULL OR send_lease_at < {stale}) "
            "RETURNING send_lease_at", [name, key, ttl])
    if rows:
        return SendClaim(key, name, rows[0]["send_lease_at"])
    row = existing_row(pub, key)
    if inferred_state(row) == "APPROVED" and lease_live(row["send_lease_at"], row["db_now"]):
        return refused(pub, key, "send", LEASE_HELD, f"held by {row['send_lease_holder']}")
    return refused(pub, key, "send", STATE_MISMATCH)


@contextmanager
def fenced_by(pub: Pub, claim: SendClaim) -> Iterator[Any]:
    """A unit whose writes commit only while ``claim`` still holds the send lease: the row
    is locked and checked in the unit itself, so a takeover after the check waits for the
    commit. Raises :class:`rowstate.UnitRefusedError` (LEASE_LOST / LEASE_HELD) otherwise,
    with nothing written."""
    with pub.atomic() as tx:
        row = run_row(pub, claim.week, tx, lock=True)
        ours = (row is not None and row["send_lease_holder"] == claim.holder
                and row["send_lease_at"] == claim.at and row["status"] == "approved"
                and row["sent_at"] is None)
        if not ours:
            raise rowstate.UnitRefusedError(f"{claim.week}: the send lease is no longer "
                                            f"{claim.holder}'s", reason=LEASE_LOST)
        assert row is not None
        if lease_live(row.get("acting_at"), row["db_now"]):
            raise rowstate.UnitRefusedError(f"{claim.week}: a v2 lease is live on the week",
                                            reason=LEASE_HELD)
        yield tx


def _release(pub: Pub, claim: SendClaim, error: str) -> None:
    with pub.atomic() as tx:
        update_run(tx, "send_lease_at = NULL, send_lease_holder = NULL, last_error = %s",
                   "week_of = %s AND send_lease_holder = %s AND send_lease_at = %s",
                   [error, claim.week, claim.holder, claim.at])


def send(pub: Pub, week: str, *, now: datetime | None = None,
         holder: str | None = None) -> Verdict:
    """Send the approved week's schedule email under the send lease (see the module
    docstring): applied and 'sent'; refused (not approved, sent, lease held or lost); or
    failed (a recipient or SMTP refused: the week stays approved with ``last_error``)."""
    key = week_key(week)
    at = utc(now)
    got = claim_send(pub, key, holder=holder)
    if isinstance(got, Verdict):
        return got
    claim = got
    try:
        outcome = send_body(pub, key, at, lambda: fenced_by(pub, claim), None)
    except rowstate.UnitRefusedError as exc:  # the lease was taken over: not ours to clear
        return refused(pub, key, "send", exc.reason, str(exc))
    except OSError as exc:
        _release(pub, claim, str(exc))
        return Verdict(False, ACT_FAILED, str(exc), message=f"{key} send failed: {exc}",
                       detail={"state": "APPROVED"})
    except BaseException as exc:
        _release(pub, claim, f"{type(exc).__name__}: {exc}")
        raise
    if outcome["failed"]:
        error = failure_text(outcome)
        _release(pub, claim, error)
        return Verdict(False, ACT_FAILED, error, message=f"{key} send failed: {error}",
                       detail={"state": "APPROVED", **outcome})
    with pub.atomic() as tx:
        done = update_run(tx, "status = 'sent', sent_at = %s, send_lease_at = NULL, "
                          "send_lease_holder = NULL, last_error = NULL",
                          "week_of = %s AND send_lease_holder = %s AND send_lease_at = %s "
                          "AND status = 'approved'", [at, key, claim.holder, claim.at])
    if not done:
        return refused(pub, key, "send", LEASE_LOST, "the lease was taken over before "
                       "the finalize")
    return applied(pub, key, "send", "APPROVED", **outcome)
