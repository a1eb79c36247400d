"""The legacy engine (flag ``PUB_SCHEDULER_V2`` off, the default): the implicit-status flow
that a rollback lands on.

A week's progress is read from which of its timestamps are NULL (the seed's "state lived
in the absence of data"), the same reading as
:func:`pubsched.engines.legacy_state.inferred_state`:

=============  ==========================================================================
not opened     ``opened_at`` NULL (status 'pending')
open           ``opened_at`` set, ``closed_at`` NULL: submissions are accepted (the rule
               :func:`hold_form` applies to the held row)
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
* **generate** is the shared :func:`pubsched.week.generate.generate_body`; its fence is a unit
  whose first statement stamps ``generated_at`` on a row still closed, pending and unsent,
  so the assignments and the stamp commit together or not at all (no lease: the unit is
  the whole act, and a crash rolls it back);
* **approve** needs a generated, closed, pending week; **unapprove** (v2's H4) is refused
  while the send lease is live;
* **send** is the single-purpose send lease of the seed's AD-12, on ``send_lease_at`` /
  ``send_lease_holder`` (:mod:`pubsched.engines.legacy_send`): one claim, every unit of the
  shared :func:`pubsched.week.send.send_body` fenced by it, a failure releasing it with
  ``last_error``, the week still approved and retryable.

**Times.** The legacy engine runs on the fixed cron clock: a week's opens-at, deadline and
generate time come from the pub's settings with the week's ``settings_override`` (0033) on
top (:func:`pubsched.week.runs.times_of`), and an extension is written there. It reads and
writes only the base columns and 0033/0034 (never ``v2_state`` or any other column of
0035/0036), so applying 0035 changes none of its behaviour, which the tests check by running
it on the same data before and after. The one look beyond them is defensive: a fenced send
unit also refuses while a live v2 lease (``acting_at``) is on the row, which only a forced
flip could leave there; it reads the row with ``SELECT *``, so that works on either schema.

Leases age by the database clock (PostgreSQL's, or the SQLite host's), as rowstate's do,
so instances with skewed clocks agree on what is stale; the business instant ``now`` is
what the timestamps record and what the crons compare the week's times with.

With the flag on, :func:`crons` stands down (returns no verdicts): the v2 tick owns time.

The module itself is the engine: it has every member of :class:`pubsched.engines.base.Engine`
(the actions above, ``tick`` = :func:`crons`, the readings of a week at its end), and
:data:`pubsched.engines.choose.ENGINES` holds it as one, which mypy checks. No class
forwards to these functions; the tests and the crons call them by name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Final

from ..machine import RUN, SEND_LEASE_TTL
from ..people.usual import fill_unanswered
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from ..week.generate import generate_body
from ..week.runs import (
    create_week,
    new_deadline,
    opening_deadline,
    plan_week,
    settings_override,
    stamp_closed,
    stamp_form_moved,
    times_of,
    week_key,
    write_week,
)
from .base import Times
from .flags import v2_enabled
from .legacy_send import SendClaim, claim_send, fenced_by, send
from .legacy_state import (
    BAD_SETTINGS,
    CLOSED_PENDING,
    INVARIANT,
    LEASE_HELD,
    NO_OTHER_OPEN,
    NOT_OPENED,
    OPEN,
    STATE_MISMATCH,
    UNSENT,
    applied,
    collecting_week,
    existing_row,
    inferred_state,
    is_open,
    lease_live,
    lock_survey,
    other_open,
    refused,
    run_row,
    stale_sql,
    update_run,
)

__all__ = [  # the engine's surface, the send lease's included (the tests drive it directly)
    "OPEN", "SEND_LEASE_TTL", "SendClaim", "approve", "autopilot", "claim_send", "close",
    "create", "crons", "enabled_edges", "extend", "fenced_by", "generate", "hold_form",
    "hold_week", "name", "open_form", "open_week", "reopen", "run_row", "send", "state_of",
    "tick", "times", "unapprove",
]

# -- the operator's actions (v2's names and signatures) -------------------------------------


def open_form(pub: Pub, week: str, *, now: datetime | None = None,
              deadline: datetime | None = None) -> Verdict:
    """Open the survey for ``week``: ``opened_at``. One unit of work: the check that no
    other week is open, the week's creation (if new) with its shifts (any it lacks, too),
    and the stamp. So a refused open writes nothing, and a crash leaves either the whole
    week or none of it. Refused while another week is open (INVARIANT, naming it) or once
    this one was opened. ``deadline``: the one the operator chose, kept in the week's
    ``settings_override`` as an extension keeps it (checked before any write)."""
    key = week_key(week)
    at = utc(now)
    plan = plan_week(pub, key)  # BadInput (a bad week, a bad template) before any write
    sets = "opened_at = %s"
    values: list[Any] = [at]
    if deadline is not None:
        override, _ = opening_deadline(pub, key, plan.override, deadline, at)
        sets, values = sets + ", settings_override = %s", [at, override]
    with pub.atomic() as tx:
        lock_survey(pub, tx)
        others = tx.execute(f"SELECT week_of FROM pub_schedule_runs WHERE week_of <> %s AND "
                            f"{OPEN} ORDER BY week_of", [key])
        if not others:
            write_week(pub, tx, plan, at, door=False)
            done = update_run(tx, sets,
                              f"week_of = %s AND {NOT_OPENED} AND {NO_OTHER_OPEN}",
                              [*values, key, key])
            if done:
                stamp_form_moved(pub, tx, key, at)
    if others:
        why = f"week {others[0]['week_of']} is open (one survey at a time)"
        if run_row(pub, key) is None:  # refused before it was created: nothing written
            return Verdict(False, INVARIANT, message=f"{key} open refused: {why}",
                           detail={"state": None})
        return refused(pub, key, "open", INVARIANT, why)
    if done:
        return applied(pub, key, "open", "DRAFT")
    return _open_refusal(pub, key, "open", NOT_OPENED)


def _open_refusal(pub: Pub, key: str, what: str, expected: str) -> Verdict:
    rows = pub.query(f"SELECT week_of FROM pub_schedule_runs WHERE week_of = %s AND {expected}",
                     [key])
    other = other_open(pub, key)
    if rows and other is not None:
        return refused(pub, key, what, INVARIANT, f"week {other} is open (one survey at a time)")
    return refused(pub, key, what, STATE_MISMATCH)


def close(pub: Pub, week: str, *, now: datetime | None = None,
          holder: str | None = None) -> Verdict:
    """Close the open survey: ``closed_at``. A submission holding the row commits first
    (the UPDATE waits for it) or is refused after. In the same unit, every tender who did
    not answer is answered from their usual (:func:`pubsched.people.usual.fill_unanswered`;
    nothing on the legacy schema, which has none). ``holder`` is accepted for v2's
    signature; the legacy close has no lease."""
    key = week_key(week)
    at = utc(now)
    with pub.atomic() as tx:
        done = update_run(tx, "closed_at = %s", f"week_of = %s AND {OPEN}", [at, key])
        if done:  # the stamp again, now that it holds the row (v2's close does the same)
            fill_unanswered(pub, tx, key, stamp_closed(tx, key, at))
    if done:
        return applied(pub, key, "close", "COLLECTING")
    return refused(pub, key, "close", STATE_MISMATCH)


def reopen(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """Reopen a closed (or generated, not approved) week: ``closed_at`` and
    ``generated_at`` cleared, the assignments kept, ``reopened_at`` stamped if it had been
    generated. Refused while another week is open (INVARIANT)."""
    key = week_key(week)
    at = utc(now)
    with pub.atomic() as tx:
        lock_survey(pub, tx)
        # every SET expression reads the row as it was, so the CASE sees the old generated_at
        done = update_run(tx, "closed_at = NULL, generated_at = NULL, reopened_at = CASE WHEN "
                          "generated_at IS NOT NULL THEN %s ELSE reopened_at END",
                          f"week_of = %s AND {CLOSED_PENDING} AND {NO_OTHER_OPEN}",
                          [at, key, key])
        if done:
            stamp_form_moved(pub, tx, key, at)
    if done:
        return applied(pub, key, "reopen", "CLOSED/ASSIGNED")
    return _open_refusal(pub, key, "reopen", CLOSED_PENDING)


def extend(pub: Pub, week: str, deadline: datetime, *, now: datetime | None = None) -> Verdict:
    """A new deadline while the survey is open, kept in the week's ``settings_override``
    (the generate time follows a later deadline), as the legacy fixed clock reads it."""
    key = week_key(week)
    at = utc(now)
    new = utc(deadline)
    row = existing_row(pub, key)
    # the week's moments still in order, or BadInput
    override, _ = new_deadline(pub, key, settings_override(row), new)
    with pub.atomic() as tx:
        done = update_run(tx, "settings_override = %s", f"week_of = %s AND {OPEN}",
                          [override, key])
        if done:
            stamp_form_moved(pub, tx, key, at)
    if done:
        return Verdict(True, message=f"{key} extend to {new.isoformat()}",
                       detail={"state": "COLLECTING", "deadline_at": new.isoformat()})
    return refused(pub, key, f"extend to {new.isoformat()}", STATE_MISMATCH)


class _Unmoved(Exception):
    """The fenced unit found the row no longer in the expected state: roll it back."""


def _generate(pub: Pub, key: str, at: datetime, *, cron: bool) -> Verdict:
    row = existing_row(pub, key)
    before = inferred_state(row)
    expected = CLOSED_PENDING + (" AND generated_at IS NULL" if cron else "")

    @contextmanager
    def fenced() -> Iterator[Any]:
        with pub.atomic() as tx:
            if not update_run(tx, "generated_at = %s", f"week_of = %s AND {expected}", [at, key]):
                raise _Unmoved
            yield tx

    try:
        filled = generate_body(pub, key, at, fenced)
    except _Unmoved:
        return refused(pub, key, "generate", STATE_MISMATCH)
    return applied(pub, key, "generate", before, **filled)


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
        done = update_run(tx, "status = 'approved', approved_at = %s",
                          f"week_of = %s AND {CLOSED_PENDING} AND generated_at IS NOT NULL",
                          [at, key])
        if done:
            tx.execute("UPDATE pub_assignments SET approved_at = %s WHERE week_of = %s",
                       [at, key])
    if done:
        return applied(pub, key, "approve", "ASSIGNED")
    return refused(pub, key, "approve", STATE_MISMATCH)


def unapprove(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """status 'approved' -> 'pending'; refused while the send lease is live (LEASE_HELD),
    so it cannot pull a week out from under a send in flight."""
    key = week_key(week)
    utc(now)
    stale, ttl = stale_sql(pub, SEND_LEASE_TTL)
    with pub.atomic() as tx:
        done = update_run(tx, "status = 'pending', approved_at = NULL",
                          f"week_of = %s AND status = 'approved' AND sent_at IS NULL AND "
                          f"(send_lease_at IS NULL OR send_lease_at < {stale})", [key, ttl])
        if done:
            tx.execute("UPDATE pub_assignments SET approved_at = NULL WHERE week_of = %s",
                       [key])
    if done:
        return applied(pub, key, "unapprove", "APPROVED")
    row = existing_row(pub, key)
    if inferred_state(row) == "APPROVED" and lease_live(row["send_lease_at"], row["db_now"]):
        return refused(pub, key, "unapprove", LEASE_HELD, "a send is in flight")
    return refused(pub, key, "unapprove", STATE_MISMATCH)


def autopilot(pub: Pub, week: str, on: bool = True, *, now: datetime | None = None) -> Verdict:
    """Refused (NOT_IN_LEGACY): autopilot is a v2 setting. The legacy crons open, close and
    generate every week at its times, whatever the per-run column says, so a toggle here
    would promise what the running engine does not do (``weeks.set_autopilot`` sets the
    column ahead of a cutover)."""
    key = week_key(week)
    utc(now)
    existing_row(pub, key)
    return Verdict(False, "NOT_IN_LEGACY", message=f"{key} autopilot {'on' if on else 'off'} "
                   "refused: the legacy engine has no autopilot (its crons advance every "
                   "week at its times); it is a v2 setting")




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
        if is_open(row) and times.deadline_at <= at:
            out.append(close(pub, key, now=at))
            moved.add(key)
    for key, row, times in due:
        if (key not in moved and row["closed_at"] is not None and row["generated_at"] is None
                and row["status"] == "pending" and times.generate_at <= at):
            out.append(_generate(pub, key, at, cron=True))
            moved.add(key)
    if other_open(pub, "") is None:
        for key, row, times in due:
            if (key not in moved and inferred_state(row) == "DRAFT"
                    and times.opens_at <= at < times.deadline_at):
                out.append(open_form(pub, key, now=at))
                break
    return out

# -- the rest of the engine: the module is the Engine -------------------------------------------

name: Final = "legacy"
# the tick of this engine (:meth:`pubsched.engines.base.Engine.tick`): the crons
tick = crons


def create(pub: Pub, week: str, *, now: datetime | None = None) -> Verdict:
    """The week created as a draft by a plain insert: this engine writes no event."""
    return create_week(pub, week, now=now, door=False)


def state_of(pub: Pub, row: dict[str, Any]) -> str:
    """The state inferred from the week's timestamps."""
    return inferred_state(row)


def enabled_edges(pub: Pub, week: str) -> list[str]:
    """The machine's edges out of the inferred state: the legacy engine has no dry run
    (the action itself still refuses what its rules refuse)."""
    row = pub.runs.get(week_key(week))
    if row is None:
        return []
    state = inferred_state(row)
    return [e.name for e in RUN.edges if e.src == state]


def times(pub: Pub, row: dict[str, Any]) -> Times:
    """Computed from the settings and the week's ``settings_override`` (where the legacy
    extensions are written): the fixed cron clock."""
    moments = times_of(pub, str(row["week_of"]), settings_override(row))
    return {"opens_at": moments.opens_at, "deadline_at": moments.deadline_at,
            "generate_at": moments.generate_at, "send_window_at": moments.send_window_end}


def open_week(pub: Pub, besides: str) -> str | None:
    """The first other week whose inferred state is COLLECTING."""
    return collecting_week(pub, besides)


def hold_form(tx: Any, week: str) -> Verdict | Mapping[str, Any]:
    """The row lock, and the legacy "open" rule read from the held row (``opened_at`` set,
    ``closed_at`` not)."""
    held = tx.hold(week, RUN.states)
    if not held:
        if held.reason == "RECORD_NOT_FOUND":
            raise BadInput(f"no week {week}")
        return Verdict(False, held.reason, message=f"week {week} is busy")
    if not is_open(held.row or {}):
        return Verdict(False, "FORM_CLOSED", message=f"the form for week {week} is not open")
    return held.row or {}


def hold_week(tx: Any, week: str, states: tuple[str, ...], *,
              exclusive: bool = False) -> Verdict | None:
    """The row lock, and the legacy state inferred from the held row."""
    held = tx.hold(week, RUN.states, exclusive=exclusive)
    if not held:
        if held.reason == "RECORD_NOT_FOUND":
            raise BadInput(f"no week {week}")
        return Verdict(False, held.reason, message=f"week {week} is busy")
    state = inferred_state(held.row or {})
    if state not in states:
        return Verdict(False, "STATE_MISMATCH", message=f"week {week} is {state}",
                       detail={"state": state})
    return None
