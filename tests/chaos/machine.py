"""The machine the chaos runs and the hypothesis model exercise.

It is cyclic (every state has a pure way out), so histories never run dry and a sweeper can
always show that a row is not stuck. It has every feature the engine guards:

* pure edges, several from-states into one target (``DRAFT`` has four ways in), a pure edge
  and a side-effecting edge between the same two states (``fail``/``abort``);
* side-effecting edges of five lease kinds, three kinds leaving ``CLOSED`` (a live lease of
  one blocks the others), a leased self-loop (``regenerate``) and a leased edge into the
  invariant state (``resume``: its finalize can be refused by the invariant);
* a finalization claim (two scopes are used) that survives the active states, is cleared
  on entering any other state, and while live blocks entering ``OPEN`` (a pure edge) and
  ``SENT`` (a side-effecting one);
* a Unique invariant: at most one row per group (``grp``) in ``COLLECTING``;
* entry writes (``sent_at``), an entry guard (``SENT`` needs ``note`` NULL or ``n1``), a
  payload column, an owner column, versions and events.
"""

from __future__ import annotations

from typing import Any

from rowstate import NOW, Binding, Edge, FinalizationClaim, Guard, Lease, Machine, Unique
from rowstate.ext import Batch

LEASE_TTL = 0.6
FINAL_TTL = 0.8
INVARIANT_STATE = "COLLECTING"
BLOCKED = ("OPEN", "SENT")  # not enterable while a live finalization claim is held
TABLE = "chaos_rows"

MACHINE = Machine(
    "chaos",
    states=["DRAFT", "OPEN", "COLLECTING", "CLOSED", "GENERATED", "APPROVED", "SENT", "FAILED"],
    initial="DRAFT",
    active=["COLLECTING", "CLOSED", "GENERATED"],
    edges=[
        Edge("open", "DRAFT", "OPEN"),
        Edge("collect", "OPEN", "COLLECTING"),
        Edge("cancel_open", "OPEN", "DRAFT"),
        Edge("extend", "COLLECTING", "COLLECTING"),
        Edge("reopen", "COLLECTING", "OPEN"),
        Edge("close", "COLLECTING", "CLOSED", lease="close"),
        Edge("generate", "CLOSED", "GENERATED", lease="generate"),
        Edge("abort", "CLOSED", "FAILED", lease="abort"),
        Edge("fail", "CLOSED", "FAILED"),
        Edge("resume", "CLOSED", "COLLECTING", lease="resume"),
        Edge("regenerate", "GENERATED", "GENERATED", lease="generate"),
        Edge("redo", "GENERATED", "CLOSED"),
        Edge("approve", "GENERATED", "APPROVED"),
        Edge("fail_generated", "GENERATED", "FAILED"),
        Edge("send", "APPROVED", "SENT", lease="send"),
        Edge("cancel_approved", "APPROVED", "DRAFT"),
        Edge("archive", "SENT", "DRAFT"),
        Edge("retry", "FAILED", "DRAFT"),
    ],
)

BINDING = Binding(
    MACHINE,
    table=TABLE,
    key=("grp", "rid"),
    state="state",
    owner="tenant",
    version="version",
    lease=Lease(at="acting_at", kind="acting_kind", token="lease_token", holder="acting_by",
                error="last_error", ttl=LEASE_TTL),
    finalization=FinalizationClaim(holder="fin_holder", scope="fin_scope", at="fin_at",
                                   token="fin_token", ttl=FINAL_TTL, blocks=BLOCKED),
    on_enter={"SENT": {"sent_at": NOW}, "DRAFT": {"sent_at": None}},
    enter_guards={"SENT": {"note": Guard((None, "n1"), "NOTE_VETO")}},
    payload=("note",),
    invariants=(Unique(INVARIANT_STATE, per=("grp",)),),
    events="rowstate_events",
    column_types={"rid": "BIGINT", "state": "TEXT NOT NULL DEFAULT 'DRAFT'"},
)

LEASED = tuple(e for e in MACHINE.edges if e.lease)
PURE = tuple(e for e in MACHINE.edges if not e.lease)


def edges_from(state: str | None) -> tuple[Edge, ...]:
    return tuple(e for e in MACHINE.edges if e.src == state)


def pure_sources(to: str) -> tuple[str, ...]:
    """From-states that ``transition(to, from_=...)`` accepts (a pure edge into ``to``)."""
    return tuple(dict.fromkeys(e.src for e in PURE if e.dst == to))


PURE_TARGETS = tuple(dict.fromkeys(e.dst for e in PURE))


def insert_rows(store: Any, keys: list[tuple[str, int]],
                tenants: dict[int, str | None] | None = None,
                states: dict[int, str] | None = None,
                notes: dict[int, str | None] | None = None) -> None:
    """Insert rows, in the initial state unless told (plain SQL: creating rows is not the
    engine's job)."""
    if not keys:
        return
    p = "?" if store.dialect == "sqlite" else "%s"
    values = ", ".join(f"({p}, {p}, {p}, {p}, {p})" for _ in keys)
    params: list[Any] = []
    for grp, rid in keys:
        params += [grp, rid, (states or {}).get(rid, MACHINE.initial), (tenants or {}).get(rid),
                   (notes or {}).get(rid)]
    store.run(Batch(((f"INSERT INTO {TABLE} (grp, rid, state, tenant, note) VALUES {values}",
                      params),)))
