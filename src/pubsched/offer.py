"""Which of a week's shifts a tender may tick: the one rule the tender's page draws and the
submission enforces, so the page never offers what the server then refuses, and a hand-made
request cannot tick what the page did not offer.

A shift is offered to a tender unless

* it has already started (``starts_at`` at or before ``now``): availability is asked for
  shifts still to come, and an answer about one being worked changes nothing; it is left out
  of the form, and a tick of it is refused. A tender's earlier answer about it is kept as it
  was, not erased by a later submission that could not show it;
* it needs a skill the tender lacks (``pub_shifts.needs`` not within
  ``pub_tenders.skills``, both JSON lists of free words, compared without case): shown,
  but not theirs to tick, and a tick of it is refused.

On a database without the columns yet (the legacy engine's schema) nothing needs a skill.
A list that cannot be read (not JSON, not a list of words) counts as empty: a shift whose
needs are unreadable asks for nothing, a tender whose skills are unreadable has none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .pub import Pub
from .schema import has_columns
from .weektime import as_utc


def words(raw: Any) -> frozenset[str]:
    """A stored JSON list of words, lowercased and stripped (unreadable: none)."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return frozenset()
    if not isinstance(value, list):
        return frozenset()
    return frozenset(w.strip().lower() for w in value if isinstance(w, str) and w.strip())


@dataclass(frozen=True)
class Offer:
    """One shift as offered to one tender: ``started`` (left out of the form), else
    ``missing`` (the skills it needs that the tender lacks: shown, not tickable)."""

    shift_id: int
    started: bool
    needs: frozenset[str]
    missing: frozenset[str]

    @property
    def tickable(self) -> bool:
        return not self.started and not self.missing

    @property
    def why_not(self) -> str | None:
        if self.started:
            return "already started"
        if self.missing:
            return "needs " + " and ".join(sorted(self.missing))
        return None


def needs_of(pub: Pub, week: str) -> dict[int, frozenset[str]]:
    if not has_columns(pub, "pub_shifts", "needs"):  # the legacy schema: no skills yet
        return {}
    rows = pub.query("SELECT id, needs FROM pub_shifts WHERE week_of = %s", [week])
    return {int(r["id"]): words(r["needs"]) for r in rows}


def skills_of(pub: Pub, tender_id: int) -> frozenset[str]:
    if not has_columns(pub, "pub_tenders", "skills"):
        return frozenset()
    rows = pub.query("SELECT skills FROM pub_tenders WHERE id = %s", [tender_id])
    return words(rows[0]["skills"]) if rows else frozenset()


def offers(shifts: Iterable[tuple[int, datetime]], needs: Mapping[int, frozenset[str]],
           skills: frozenset[str], now: datetime) -> dict[int, Offer]:
    """Each shift (id, starts_at) as offered to a tender with ``skills`` at ``now``."""
    at = as_utc(now)
    out = {}
    for shift_id, starts_at in shifts:
        wanted = needs.get(shift_id, frozenset())
        out[shift_id] = Offer(shift_id, as_utc(starts_at) <= at, wanted, wanted - skills)
    return out


def week_offers(pub: Pub, week: str, tender_id: int, shifts: Iterable[tuple[int, datetime]],
                now: datetime) -> dict[int, Offer]:
    """:func:`offers` with the week's needs and the tender's skills read from the pub."""
    return offers(shifts, needs_of(pub, week), skills_of(pub, tender_id), now)
