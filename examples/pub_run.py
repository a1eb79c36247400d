"""The pub scheduler's weekly run (shared/seeds/pub-scheduler-v2.md) as a rowstate machine.

Used by ``make demo`` and by the tests; ``rowstate diagram examples.pub_run:RUNS`` draws it.
"""

from __future__ import annotations

from rowstate import NOW, Binding, Derived, Edge, Lease, Machine, Notice, TimedEdge, Unique

RUN = Machine(
    "pub_run",
    states=["DRAFT", "COLLECTING", "CLOSED", "ASSIGNED", "APPROVED", "SENT"],
    initial="DRAFT",
    active=["COLLECTING", "CLOSED", "ASSIGNED", "APPROVED"],
    edges=[
        Edge("open", "DRAFT", "COLLECTING", label="open form"),
        Edge("extend", "COLLECTING", "COLLECTING", label="extend deadline"),
        Edge("close", "COLLECTING", "CLOSED", lease="close", label="close form"),
        Edge("reopen", "CLOSED", "COLLECTING", label="reopen"),
        Edge("generate", "CLOSED", "ASSIGNED", lease="generate", label="generate"),
        Edge("regenerate", "ASSIGNED", "ASSIGNED", lease="generate",
             label="regenerate in place"),
        Edge("reopen_after_generate", "ASSIGNED", "COLLECTING",
             label="reopen after generate"),
        Edge("approve", "ASSIGNED", "APPROVED", label="operator approves"),
        Edge("unapprove", "APPROVED", "ASSIGNED", label="un-approve"),
        Edge("send", "APPROVED", "SENT", lease="send", label="send schedule email"),
    ],
    notes={"SENT": "terminal: never re-sends.\nAPPROVED and SENT write the\n"
                   "legacy status column THROUGH."},
)

RUNS = Binding(
    RUN,
    table="pub_schedule_runs",
    key=("week_of",),
    state="v2_state",
    derived=Derived("status", {"pending": "DRAFT", "approved": "APPROVED", "sent": "SENT"}),
    version="version",
    lease=Lease(at="acting_at", kind="acting_kind", token="acting_token", error="last_error",
                ttl=300),
    on_enter={"APPROVED": {"status": "approved"}, "SENT": {"status": "sent", "sent_at": NOW}},
    columns=("autopilot",),
    invariants=(Unique("COLLECTING"),),
    timers=(TimedEdge("close", due="deadline_at", guards={"autopilot": 1}),),
    notices=(Notice("collecting_alert", ("COLLECTING",), due="deadline_at",
                    claim="collecting_alert_at"),),
    column_types={"autopilot": "INTEGER NOT NULL DEFAULT 0",
                  "status": "TEXT NOT NULL DEFAULT 'pending'"},
)
