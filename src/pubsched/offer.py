"""Which of a week's shifts a tender may tick: the one rule the tender's page draws and the
submission enforces, so the page never offers what the server then refuses, and a hand-made
request cannot tick what the page did not offer.

A shift is offered to a tender unless

* it has already started (``starts_at`` at or before ``now``): availability is asked for
  shifts still to come, and an answer about one being worked changes nothing; it is left out
  of the form, and a tick of it is refused. A tender's earlier answer about it is kept as it
  was, not erased by a later submission that could not show it;
* it has no slot the tender could ever be given: every one of its slots is reserved for a
  skill it needs (the picker's rule: each needed skill reserves one slot for a tender who
  has it, the others are anyone's) and the tender has none of those skills
  (``pub_shifts.needs`` against ``pub_tenders.skills``, both JSON lists of free words,
  compared without case): shown, but not theirs to tick, and a tick of it is refused. A
  Saturday of two slots that needs a key-holder is open to everyone (one of the two will
  be a key-holder); a one-slot cellar shift only to those who know the cellar.

On a database without the columns yet (the legacy engine's schema) nothing needs a skill.
A list that cannot be read (not JSON, not a list of words) counts as empty: a shift whose
needs are unreadable asks for nothing, a tender whose skills are unreadable has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import skills
from .pub import Pub
from .schema import has_columns
from .weektime import as_utc


def words(raw: Any) -> frozenset[str]:
    """A stored JSON list of words (:func:`pubsched.skills.stored`), as a set."""
    return frozenset(skills.stored(raw))


@dataclass(frozen=True)
class Offer:
    """One shift as offered to one tender: ``started`` (left out of the form);
    ``missing``, the skills it needs that the tender lacks, and ``closed``, whether that
    leaves them no slot on it (shown, not tickable)."""

    shift_id: int
    started: bool
    needs: frozenset[str]
    missing: frozenset[str]
    closed: bool = False

    @property
    def tickable(self) -> bool:
        return not self.started and not self.closed

    @property
    def why_not(self) -> str | None:
        if self.started:
            return "already started"
        if self.closed:
            return "needs " + " and ".join(sorted(self.missing))
        return None


def needs_of(pub: Pub, week: str) -> dict[int, tuple[frozenset[str], int]]:
    """Each shift's needs and slots (none on the legacy schema: no skills yet)."""
    if not has_columns(pub, "pub_shifts", "needs"):
        return {}
    rows = pub.query("SELECT id, needs, slots FROM pub_shifts WHERE week_of = %s", [week])
    return {int(r["id"]): (words(r["needs"]), int(r["slots"])) for r in rows}


def skills_of(pub: Pub, tender_id: int) -> frozenset[str]:
    if not has_columns(pub, "pub_tenders", "skills"):
        return frozenset()
    rows = pub.query("SELECT skills FROM pub_tenders WHERE id = %s", [tender_id])
    return words(rows[0]["skills"]) if rows else frozenset()


def offers(shifts: Iterable[tuple[int, datetime]],
           needs: Mapping[int, tuple[frozenset[str], int]],
           skills: frozenset[str], now: datetime) -> dict[int, Offer]:
    """Each shift (id, starts_at) as offered to a tender with ``skills`` at ``now``;
    ``needs`` maps a shift to its needed skills and its slots."""
    at = as_utc(now)
    out = {}
    for shift_id, starts_at in shifts:
        wanted, slots = needs.get(shift_id, (frozenset(), 0))
        anyones = slots > len(wanted)  # a slot no need reserves
        closed = bool(wanted) and not anyones and not (wanted & skills)
        out[shift_id] = Offer(shift_id, as_utc(starts_at) <= at, wanted, wanted - skills,
                              closed)
    return out


def week_offers(pub: Pub, week: str, tender_id: int, shifts: Iterable[tuple[int, datetime]],
                now: datetime) -> dict[int, Offer]:
    """:func:`offers` with the week's needs and the tender's skills read from the pub."""
    return offers(shifts, needs_of(pub, week), skills_of(pub, tender_id), now)
