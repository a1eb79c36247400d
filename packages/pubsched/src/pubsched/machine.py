"""The pub's machines, at the ground floor: the week's run (below) and the cover request
(:data:`COVER`, at the end), so that :class:`pubsched.pub.Pub` binds both without
importing any domain built on it.

The v2 run lifecycle: the seed's six states and its TRANSITIONS table, bound to
``pub_schedule_runs`` (migration 0035's columns plus the engine's own, 0036).

This is the one machine of the pub run. ``transition`` (pubsched.engines.v2) is the only way a
run's ``v2_state`` changes; every actor (operator buttons, the autopilot tick, reopen)
goes through it. ``v2_state`` NULL means "not yet adopted": the effective state is
derived from the legacy ``status`` (pending -> DRAFT, approved -> APPROVED, sent -> SENT)
until the first transition writes the column. APPROVED and SENT write the legacy status
through, and every other state entered writes it back to 'pending' (un-approve leaves
APPROVED), so a flag rollback lands the legacy engine on a coherent value; ``sent_at`` is
stamped only by a genuine send (the SENT finalize).
"""

from __future__ import annotations

from rowstate import Binding, Derived, Edge, Lease, Machine, Notice, TimedEdge, Unique

DRAFT, COLLECTING, CLOSED, ASSIGNED, APPROVED, SENT = (
    "DRAFT", "COLLECTING", "CLOSED", "ASSIGNED", "APPROVED", "SENT")
STATES = (DRAFT, COLLECTING, CLOSED, ASSIGNED, APPROVED, SENT)


class ACT:
    """The lease kinds of the side-effecting edges (the seed's ACT.CLOSE, ...)."""

    CLOSE = "close"
    GENERATE = "generate"
    SEND = "send"


RUN = Machine(
    "pub_run",
    states=STATES,
    initial=DRAFT,
    active=[COLLECTING, CLOSED, ASSIGNED, APPROVED],
    edges=[
        Edge("open", DRAFT, COLLECTING, label="open form"),
        Edge("extend", COLLECTING, COLLECTING, label="extend deadline"),
        Edge("close", COLLECTING, CLOSED, lease=ACT.CLOSE, label="close form"),
        Edge("reopen", CLOSED, COLLECTING, label="reopen"),
        Edge("generate", CLOSED, ASSIGNED, lease=ACT.GENERATE, label="generate"),
        Edge("regenerate", ASSIGNED, ASSIGNED, lease=ACT.GENERATE,
             label="regenerate in place"),
        Edge("reopen_after_generate", ASSIGNED, COLLECTING,
             label="reopen after generate"),
        Edge("approve", ASSIGNED, APPROVED, label="operator approves"),
        Edge("unapprove", APPROVED, ASSIGNED, label="un-approve"),
        Edge("send", APPROVED, SENT, lease=ACT.SEND, label="send schedule email"),
    ],
    notes={SENT: "terminal: never re-sends.\nAPPROVED and SENT write the\n"
                 "legacy status column THROUGH."},
)

# the legacy status each v2 state writes through; COLLECTING/CLOSED/ASSIGNED have no legacy
# analog and write 'pending' (with ``approved_at`` cleared, as the legacy un-approve does)
LEGACY_STATUS_FOR = {APPROVED: "approved", SENT: "sent"}
PENDING = {"status": "pending", "approved_at": None}
SEND_LEASE_TTL = 600.0  # a send may wait on SMTP timeouts per recipient: room for that

RUNS = Binding(
    RUN,
    table="pub_schedule_runs",
    key=("week_of",),
    state="v2_state",
    derived=Derived("status", {"pending": DRAFT, "approved": APPROVED, "sent": SENT}),
    version="version",
    lease=Lease(at="acting_at", kind="acting_kind", token="acting_token", error="last_error",
                failed_at="acting_failed_at", ttl=SEND_LEASE_TTL),
    # the write-through is an entry write: no edge into APPROVED or SENT can forget it, and
    # no edge out of APPROVED can leave 'approved' behind (un-approve enters ASSIGNED: the
    # legacy engine must not read, after a rollback, a week the operator took back)
    on_enter={COLLECTING: PENDING, CLOSED: PENDING, ASSIGNED: PENDING,
              APPROVED: {"status": "approved"}, SENT: {"status": "sent"}},
    # stamps the actions write with their move, at the business instant they act at
    payload=("opened_at", "closed_at", "generated_at", "approved_at", "sent_at",
             "reopened_at", "deadline_at", "generate_at", "send_window_at"),
    columns=("autopilot", "kind", "settings_override", "opens_at", "created_at"),
    invariants=(Unique(COLLECTING, name="idx_pub_runs_v2_collecting"),),
    # autopilot's open is the tick's own move (pubsched.engines.v2_tick): a late open moves
    # the deadline in the same write, so the close below is never due in that tick
    timers=(TimedEdge("close", due="deadline_at", guards={"autopilot": 1}),
            TimedEdge("generate", due="generate_at", guards={"autopilot": 1})),
    notices=(Notice("collecting_alert", (COLLECTING,), due="deadline_at",
                    claim="collecting_alert_at", guards={"autopilot": 0}),
             Notice("unsent_alert", (APPROVED,), due="send_window_at",
                    claim="unsent_alert_at")),
    column_types={"autopilot": "INTEGER NOT NULL DEFAULT 0",
                  "status": "TEXT NOT NULL DEFAULT 'pending'",
                  "kind": "TEXT NOT NULL DEFAULT 'week'"},
)


# -- the cover request: the pub's second machine ------------------------------------------
# Bound to ``pub_covers`` (migration 0045).
#
# A tender who cannot work a shift of a sent week asks for cover; the request is OPEN until
# someone takes it (TAKEN), the asker or the operator calls it off (CANCELLED) or the shift
# starts with nobody found (EXPIRED, the tick's timed edge on ``starts_at``). Every move is
# one compare-and-set through this binding, so of two takes at once exactly one applies and
# the other is told why; the week itself stays SENT (the seed: it never re-sends).
#
# ``pub_covers`` has a key of its own (a small number people type, ``cover take 3``), the
# week, shift and asker it is about, and the stamps the moves write with the business instant
# they act at (``taken_by``/``taken_at``, ``closed_at``). One OPEN request per shift and
# asker is a partial UNIQUE index (:class:`rowstate.Unique`), so two asks at once cannot
# both open one.

OPEN, TAKEN, CANCELLED, EXPIRED = "OPEN", "TAKEN", "CANCELLED", "EXPIRED"
COVER_STATES = (OPEN, TAKEN, CANCELLED, EXPIRED)

COVER = Machine(
    "pub_cover",
    states=COVER_STATES,
    initial=OPEN,
    active=[OPEN],
    edges=[
        Edge("take", OPEN, TAKEN, label="someone takes the shift"),
        Edge("cancel", OPEN, CANCELLED, label="the asker or the operator calls it off"),
        Edge("expire", OPEN, EXPIRED, label="the shift starts, nobody took it"),
    ],
    notes={TAKEN: "the shift's assignment moves\nfrom the asker to the taker\n"
                  "in the same unit of work"},
)

COVERS = Binding(
    COVER,
    table="pub_covers",
    key=("id",),
    state="state",
    version="version",
    # stamps the moves write, at the business instant they act at
    payload=("taken_by", "taken_at", "closed_at"),
    columns=("week_of", "shift_id", "asked_by", "note", "starts_at", "asked_at"),
    invariants=(Unique(OPEN, per=("shift_id", "asked_by"), name="idx_pub_covers_one_open"),),
    timers=(TimedEdge("expire", due="starts_at"),),
    column_types={"id": "BIGINT", "week_of": "TEXT NOT NULL", "shift_id": "INTEGER NOT NULL",
                  "asked_by": "INTEGER NOT NULL", "taken_by": "INTEGER",
                  "state": "TEXT NOT NULL DEFAULT 'OPEN'"},
)
