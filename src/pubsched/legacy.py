"""The legacy engine (flag ``PUB_SCHEDULER_V2`` off, the default): the implicit-status flow
that a rollback lands on.

A week's progress is read from which of its timestamps are NULL (the seed's "state lived
in the absence of data"), the same reading as :func:`pubsched.view.inferred_state`:

=============  ==========================================================================
not opened     ``opened_at`` NULL (status 'pending')
open           ``opened_at`` set, ``closed_at`` NULL: submissions are accepted (the rule
               :mod:`pubsched.submissions` applies to the held row)
closed         ``closed_at`` set, ``generated_at`` NULL
generated      ``generated_at`` set, status 'pending'
approved       status 'approved' (``approved_at``)
sent           status 'sent' (``sent_at``): terminal, never re-sent
=============  ==========================================================================

Every move is ONE conditional UPDATE whose WHERE is the expected timestamps state, so two
app instances doing the same thing at once (two crons, a cron and a double-clicked button)
act once: the second UPDATE finds the row already moved (on PostgreSQL a waiting UPDATE
re-checks its WHERE against the committed row) and its verdict is a refusal with a reason,
not an exception. The legacy rules, beside v2's TRANSITIONS:

* **one survey at a time** (v2's H3): an open or reopen is refused (INVARIANT) while
  another week is open. The check is in the UPDATE (``NOT EXISTS``); on PostgreSQL the two
  opens of different weeks are serialised by a transaction-scoped advisory lock first, since
  READ COMMITTED would let each one's ``NOT EXISTS`` miss the other's uncommitted open;
* **reopen** clears ``closed_at`` and ``generated_at`` but keeps the assignments (a
  regenerate replaces them in place) and stamps ``reopened_at`` (0034) when the week had
  been generated: like v2's ASSIGNED -> COLLECTING, the week must be generated again before
  it can be approved, and the cron's "closed and not generated" rule regenerates it;
* **generate** is the shared :func:`pubsched.generate.generate_body`; its fence is a unit
  whose first statement stamps ``generated_at`` on a row still closed, pending and unsent,
  so the assignments and the stamp commit together or not at all (no lease: the unit is
  the whole act, and a crash rolls it back);
* **approve** needs a generated, closed, pending week; **unapprove** (v2's H4) is refused
  while the send lease is live;
* **send** is the single-purpose send lease of the seed's AD-12, on ``send_lease_at`` /
  ``send_lease_holder``: claimed by a conditional UPDATE only while the week is approved and
  unsent and the lease is free or older than :data:`SEND_LEASE_TTL`; every unit the shared
  :func:`pubsched.send.send_body` opens locks the row and checks the lease is still this
  claim's (a zombie whose lease was taken over hands nothing more to SMTP); success writes
  status 'sent', ``sent_at`` and clears the lease in one statement conditioned on the
  claim; failure clears the lease and stamps ``last_error``, the week stays approved and a
  retry sends only to recipients never attempted or failed.

**Times.** The legacy engine runs on the fixed cron clock: a week's opens-at, deadline and
generate time come from the pub's settings with the week's ``settings_override`` (0033) on
top (:func:`pubsched.weeks.times_of`), and an extension is written there. It reads and
writes only the base columns and 0033/0034 (never ``v2_state`` or any other column of
0035/0036), so applying 0035 changes none of its behaviour, which the tests check by running
it on the same data before and after. The one look beyond them is defensive: a fenced send
unit also refuses while a live v2 lease (``acting_at``) is on the row, which only a forced
flip could leave there; it reads the row with ``SELECT *``, so that works on either schema.

Leases age by the database clock (PostgreSQL's, or the SQLite host's), as rowstate's do,
so instances with skewed clocks agree on what is stale; the business instant ``now`` is
what the timestamps record and what the crons compare the week's times with.

With the flag on, :func:`crons` stands down (returns no verdicts): the v2 tick owns time.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import rowstate

from .app import BadInput, Pub, Verdict, utc
from .flags import v2_enabled
from .generate import generate_body
from .machine import SEND_LEASE_TTL
from .send import failure_text, send_body
from .view import inferred_state
from .weeks import ensure_week, settings_override, times_of, week_key

STATE_MISMATCH = str(rowstate.Reason.STATE_MISMATCH)
LEASE_HELD = str(rowstate.Reason.LEASE_HELD)
LEASE_LOST = str(rowstate.Reason.LEASE_LOST)
INVARIANT = str(rowstate.Reason.INVARIANT)
ACT_FAILED = str(rowstate.Reason.ACT_FAILED)  # ran and failed (v2's verdict for it too)
BAD_SETTINGS = "BAD_SETTINGS"

# pg_advisory_xact_lock key of the legacy survey ("pubsurv" in ASCII): serialises opens
SURVEY_LOCK = 0x70756273757276

# the legacy states as SQL over the timestamps (one source for the moves and the crons)
UNSENT = "status <> 'sent' AND sent_at IS NULL"
OPEN = "opened_at IS NOT NULL AND closed_at IS NULL"  # submissions.py's "open" rule
NOT_OPENED = f"opened_at IS NULL AND status = 'pending' AND {UNSENT}"
CLOSED_PENDING = f"closed_at IS NOT NULL AND status = 'pending' AND {UNSENT}"
NO_OTHER_OPEN = ("NOT EXISTS (SELECT 1 FROM pub_schedule_runs o "
                 "WHERE o.week_of <> %s AND o.opened_at IS NOT NULL AND o.closed_at IS NULL)")

_NOW = {"postgresql": "clock_timestamp()",
        "sqlite": "strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now')"}
_STALE = {"postgresql": "clock_timestamp() - make_interval(secs => %s)",
          "sqlite": "strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now', %s)"}


def db_now_sql(pub: Pub) -> str:
    """SQL for the database clock ("now" of leases), in the stored time form."""
    return _NOW[pub.dialect]


def _stale(pub: Pub, ttl: float) -> tuple[str, Any]:
    """SQL for "the database clock minus ``ttl``" and its one parameter."""
    return _STALE[pub.dialect], ttl if pub.dialect == "postgresql" else f"-{ttl} seconds"


def lease_live(stamp: Any, db_now: datetime, ttl: float = SEND_LEASE_TTL) -> bool:
    """Is a lease stamped at ``stamp`` still live at the database's ``db_now``?"""
    return isinstance(stamp, datetime) and stamp >= db_now - timedelta(seconds=ttl)


def run_row(pub: Pub, week: str, tx: Any = None, *, lock: bool = False) -> dict[str, Any] | None:
    """The week's run row, every column there is, with the database clock as ``db_now``;
    ``lock`` (inside ``tx``) locks it until the unit ends (SQLite's unit already holds the
    one writer lock)."""
    sql = f"SELECT *, {db_now_sql(pub)} AS db_now FROM pub_schedule_runs WHERE week_of = %s"
    if lock and pub.dialect == "postgresql":
        sql += " FOR UPDATE"
    rows = tx.execute(sql, [week]) if tx is not None else pub.query(sql, [week])
    return rows[0] if rows else None


def _existing(pub: Pub, week: str) -> dict[str, Any]:
    row = run_row(pub, week)
    if row is None:
        raise BadInput(f"no week {week}")
    return row


def _refused(pub: Pub, week: str, what: str, reason: str, why: str = "") -> Verdict:
    row = run_row(pub, week)
    if row is None:
        raise BadInput(f"no week {week}")
    state = inferred_state(row)
    extra = f": {why}" if why else ""
    return Verdict(False, reason, message=f"{week} {what} refused: {reason} "
                   f"(the week is {state}){extra}", detail={"state": state})


def _applied(pub: Pub, week: str, what: str, before: str, **detail: Any) -> Verdict:
    row = _existing(pub, week)
    state = inferred_state(row)
    return Verdict(True, message=f"{week} {what}: {before} -> {state}",
                   detail={"state": state, **detail})


def _lock_survey(pub: Pub, tx: Any) -> None:
    if pub.dialect == "postgresql":
        tx.execute("SELECT pg_advisory_xact_lock(%s)", [SURVEY_LOCK])


def _other_open(pub: Pub, week: str) -> str | None:
    rows = pub.query(f"SELECT week_of FROM pub_schedule_runs WHERE week_of <> %s AND {OPEN} "
                     "ORDER BY week_of", [week])
    return str(rows[0]["week_of"]) if rows else None


def _is_open(row: dict[str, Any]) -> bool:
    """:data:`OPEN`, read in Python."""
    return row.get("opened_at") is not None and row.get("closed_at") is None


def _update(tx: Any, sets: str, where: str, params: list[Any]) -> bool:
    rows = tx.execute(f"UPDATE pub_schedule_runs SET {sets} WHERE {where} RETURNING week_of",
                      params)
    return bool(rows)


# -- the operator's actions (v2's names and signatures) -------------------------------------


def open_form(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """Open the survey for ``week`` (the week is created first, if new): ``opened_at``.
    Refused while another week is open (INVARIANT) or once this one was opened."""
    key = week_key(week)
    at = utc(now)
    if run_row(pub, key) is None:
        ensure_week(pub, key, now=at)
    with pub.atomic() as tx:
        _lock_survey(pub, tx)
        done = _update(tx, "opened_at = %s", f"week_of = %s AND {NOT_OPENED} AND {NO_OTHER_OPEN}",
                       [at, key, key])
    if done:
        return _applied(pub, key, "open", "DRAFT")
    return _open_refusal(pub, key, "open", NOT_OPENED)


def _open_refusal(pub: Pub, key: str, what: str, expected: str) -> Verdict:
    rows = pub.query(f"SELECT week_of FROM pub_schedule_runs WHERE week_of = %s AND {expected}",
                     [key])
    other = _other_open(pub, key)
    if rows and other is not None:
        return _refused(pub, key, what, INVARIANT, f"week {other} is open (one survey at a time)")
    return _refused(pub, key, what, STATE_MISMATCH)


def close(pub: Pub, week: str, *, now: datetime | None = None,
          holder: str | None = None) -> Verdict:
    """Close the open survey: ``closed_at``. A submission holding the row commits first
    (the UPDATE waits for it) or is refused after. ``holder`` is accepted for v2's
    signature; the legacy close has no lease."""
    key = week_key(week)
    at = utc(now)
    with pub.atomic() as tx:
        done = _update(tx, "closed_at = %s", f"week_of = %s AND {OPEN}", [at, key])
    if done:
        return _applied(pub, key, "close", "COLLECTING")
    return _refused(pub, key, "close", STATE_MISMATCH)


def reopen(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """Reopen a closed (or generated, not approved) week: ``closed_at`` and
    ``generated_at`` cleared, the assignments kept, ``reopened_at`` stamped if it had been
    generated. Refused while another week is open (INVARIANT)."""
    key = week_key(week)
    at = utc(now)
    with pub.atomic() as tx:
        _lock_survey(pub, tx)
        # every SET expression reads the row as it was, so the CASE sees the old generated_at
        done = _update(tx, "closed_at = NULL, generated_at = NULL, reopened_at = CASE WHEN "
                       "generated_at IS NOT NULL THEN %s ELSE reopened_at END",
                       f"week_of = %s AND {CLOSED_PENDING} AND {NO_OTHER_OPEN}",
                       [at, key, key])
    if done:
        return _applied(pub, key, "reopen", "CLOSED/ASSIGNED")
    return _open_refusal(pub, key, "reopen", CLOSED_PENDING)


def extend(pub: Pub, week: str, deadline: datetime, *, now: datetime | None = None) -> Verdict:
    """A new deadline while the survey is open, kept in the week's ``settings_override``
    (the generate time follows a later deadline), as the legacy fixed clock reads it."""
    key = week_key(week)
    utc(now)
    new = utc(deadline)
    row = _existing(pub, key)
    current = settings_override(row)
    override = {**current, "deadline_at": new.isoformat()}
    if times_of(pub, key, current).generate_at < new:
        override["generate_at"] = new.isoformat()
    times_of(pub, key, override)  # the week's moments still in order, or BadInput
    with pub.atomic() as tx:
        done = _update(tx, "settings_override = %s", f"week_of = %s AND {OPEN}",
                       [override, key])
    if done:
        return Verdict(True, message=f"{key} extend to {new.isoformat()}",
                       detail={"state": "COLLECTING", "deadline_at": new.isoformat()})
    return _refused(pub, key, f"extend to {new.isoformat()}", STATE_MISMATCH)


class _Unmoved(Exception):
    """The fenced unit found the row no longer in the expected state: roll it back."""


def _generate(pub: Pub, key: str, at: datetime, *, cron: bool) -> Verdict:
    row = _existing(pub, key)
    before = inferred_state(row)
    expected = CLOSED_PENDING + (" AND generated_at IS NULL" if cron else "")

    @contextmanager
    def fenced() -> Iterator[Any]:
        with pub.atomic() as tx:
            if not _update(tx, "generated_at = %s", f"week_of = %s AND {expected}", [at, key]):
                raise _Unmoved
            yield tx

    try:
        filled = generate_body(pub, key, at, fenced)
    except _Unmoved:
        return _refused(pub, key, "generate", STATE_MISMATCH)
    return _applied(pub, key, "generate", before, **filled)


def generate(pub: Pub, week: str, *, now: datetime | None = None,
             holder: str | None = None) -> Verdict:
    """Run the picker on a closed, unapproved week (again: regenerate in place). The
    assignments and ``generated_at`` land in one unit, only while the week is still closed,
    pending and unsent. ``holder`` is accepted for v2's signature (no lease here)."""
    return _generate(pub, week_key(week), utc(now), cron=False)


def approve(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """status 'pending' -> 'approved' (``approved_at``, on the week's assignments too), only
    for a generated, closed week."""
    key = week_key(week)
    at = utc(now)
    with pub.atomic() as tx:
        done = _update(tx, "status = 'approved', approved_at = %s",
                       f"week_of = %s AND {CLOSED_PENDING} AND generated_at IS NOT NULL",
                       [at, key])
        if done:
            tx.execute("UPDATE pub_assignments SET approved_at = %s WHERE week_of = %s",
                       [at, key])
    if done:
        return _applied(pub, key, "approve", "ASSIGNED")
    return _refused(pub, key, "approve", STATE_MISMATCH)


def unapprove(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """status 'approved' -> 'pending'; refused while the send lease is live (LEASE_HELD),
    so it cannot pull a week out from under a send in flight."""
    key = week_key(week)
    utc(now)
    stale, ttl = _stale(pub, SEND_LEASE_TTL)
    with pub.atomic() as tx:
        done = _update(tx, "status = 'pending', approved_at = NULL",
                       f"week_of = %s AND status = 'approved' AND sent_at IS NULL AND "
                       f"(send_lease_at IS NULL OR send_lease_at < {stale})", [key, ttl])
        if done:
            tx.execute("UPDATE pub_assignments SET approved_at = NULL WHERE week_of = %s",
                       [key])
    if done:
        return _applied(pub, key, "unapprove", "APPROVED")
    row = _existing(pub, key)
    if inferred_state(row) == "APPROVED" and lease_live(row["send_lease_at"], row["db_now"]):
        return _refused(pub, key, "unapprove", LEASE_HELD, "a send is in flight")
    return _refused(pub, key, "unapprove", STATE_MISMATCH)


def autopilot(pub: Pub, week: str, on: bool = True, *, now: datetime | None = None) -> Verdict:
    """Refused (NOT_IN_LEGACY): autopilot is a v2 setting. The legacy crons open, close and
    generate every week at its times, whatever the per-run column says, so a toggle here
    would promise what the running engine does not do (``weeks.set_autopilot`` sets the
    column ahead of a cutover)."""
    key = week_key(week)
    utc(now)
    _existing(pub, key)
    return Verdict(False, "NOT_IN_LEGACY", message=f"{key} autopilot {'on' if on else 'off'} "
                   "refused: the legacy engine has no autopilot (its crons advance every "
                   "week at its times); it is a v2 setting")


# -- send under the AD-12 send lease ---------------------------------------------------------


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
    row = _existing(pub, key)
    if lease_live(row.get("acting_at"), row["db_now"]):
        return _refused(pub, key, "send", LEASE_HELD, "a v2 lease is live on the week")
    name = f"{holder or 'legacy'}:{uuid.uuid4().hex}"
    stale, ttl = _stale(pub, SEND_LEASE_TTL)
    with pub.atomic() as tx:
        rows = tx.execute(
            f"UPDATE pub_schedule_runs SET send_lease_at = {db_now_sql(pub)}, "
            "send_lease_holder = %s WHERE week_of = %s AND status = 'approved' AND "
            f"sent_at IS NULL AND (send_lease_at IS NULL OR send_lease_at < {stale}) "
            "RETURNING send_lease_at", [name, key, ttl])
    if rows:
        return SendClaim(key, name, rows[0]["send_lease_at"])
    row = _existing(pub, key)
    if inferred_state(row) == "APPROVED" and lease_live(row["send_lease_at"], row["db_now"]):
        return _refused(pub, key, "send", LEASE_HELD, f"held by {row['send_lease_holder']}")
    return _refused(pub, key, "send", STATE_MISMATCH)


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
        _update(tx, "send_lease_at = NULL, send_lease_holder = NULL, last_error = %s",
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
        return _refused(pub, key, "send", exc.reason, str(exc))
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
        done = _update(tx, "status = 'sent', sent_at = %s, send_lease_at = NULL, "
                       "send_lease_holder = NULL, last_error = NULL",
                       "week_of = %s AND send_lease_holder = %s AND send_lease_at = %s "
                       "AND status = 'approved'", [at, key, claim.holder, claim.at])
    if not done:
        return _refused(pub, key, "send", LEASE_LOST, "the lease was taken over before "
                        "the finalize")
    return _applied(pub, key, "send", "APPROVED", **outcome)


# -- the crons ---------------------------------------------------------------------------------


def crons(pub: Pub, now: datetime | None = None) -> list[Verdict]:
    """The legacy every-minute crons, in this order: close every open week whose deadline
    passed, generate every closed week not generated whose generate time passed, then open
    the earliest week whose opens-at passed (and whose deadline has not: a week whose whole
    window was missed is left to the operator) if no week is open. A week moves at most one
    step per call, so a form opened now gets at least one tick. Each step is the action's
    own conditional UPDATE: an instance that lost the race gets a refused verdict, never a
    second act. With the flag on it stands down (no verdicts)."""
    at = utc(now)
    if v2_enabled(pub):
        return []
    out: list[Verdict] = []
    moved: set[str] = set()
    rows = pub.query(f"SELECT * FROM pub_schedule_runs WHERE {UNSENT} ORDER BY week_of")
    due: list[tuple[str, dict[str, Any], Any]] = []
    for row in rows:
        key = str(row["week_of"])
        try:
            due.append((key, row, times_of(pub, key, settings_override(row))))
        except BadInput as exc:
            out.append(Verdict(False, BAD_SETTINGS, message=f"{key}: {exc}"))
    for key, row, times in due:
        if _is_open(row) and times.deadline_at <= at:
            out.append(close(pub, key, now=at))
            moved.add(key)
    for key, row, times in due:
        if (key not in moved and row["closed_at"] is not None and row["generated_at"] is None
                and row["status"] == "pending" and times.generate_at <= at):
            out.append(_generate(pub, key, at, cron=True))
            moved.add(key)
    if _other_open(pub, "") is None:
        for key, row, times in due:
            if (key not in moved and inferred_state(row) == "DRAFT"
                    and times.opens_at <= at < times.deadline_at):
                out.append(open_form(pub, key, now=at))
                break
    return out
