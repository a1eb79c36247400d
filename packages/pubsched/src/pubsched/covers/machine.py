"""The cover request: the pub's second machine, bound to ``pub_covers`` (migration 0045).

A tender who cannot work a shift of a sent week asks for cover; the request is OPEN until
someone takes it (TAKEN), the asker or the operator calls it off (CANCELLED) or the shift
starts with nobody found (EXPIRED, the tick's timed edge on ``starts_at``). Every move is
one compare-and-set through this binding, so of two takes at once exactly one applies and
the other is told why; the week itself stays SENT (the seed: it never re-sends).

``pub_covers`` has a key of its own (a small number people type, ``cover take 3``), the
week, shift and asker it is about, and the stamps the moves write with the business instant
they act at (``taken_by``/``taken_at``, ``closed_at``). One OPEN request per shift and
asker is a partial UNIQUE index (:class:`rowstate.Unique`), so two asks at once cannot
both open one.
"""

from __future__ import annotations

from rowstate import Binding, Edge, Machine, TimedEdge, Unique

OPEN, TAKEN, CANCELLED, EXPIRED = "OPEN", "TAKEN", "CANCELLED", "EXPIRED"
STATES = (OPEN, TAKEN, CANCELLED, EXPIRED)

COVER = Machine(
    "pub_cover",
    states=STATES,
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

__all__ = ["CANCELLED", "COVER", "COVERS", "EXPIRED", "OPEN", "STATES", "TAKEN"]
