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
  be a key-holder); a one-slot cellar shift only to those who know the cellar;
* it is on a night the tender is away (their time off, :mod:`pubsched.people.time_off`: a shift
  is on the night it starts): shown as "away", with the dates of the time off, not
  tickable, and a tick of it is refused. The form's refusal is for the tender's sake; the
  rule itself is generate's, which ignores a tick of an away night however it got there
  (one made before the time off was marked).

On a database without the columns yet (the legacy engine's schema) nothing needs a skill.
A list that cannot be read (not JSON, not a list of words) counts as empty: a shift whose
needs are unreadable asks for nothing, a tender whose skills are unreadable has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from ..mail.wording import days
from ..people.tenders import Tender
from ..people.time_off import Span, spans
from ..pub import Pub
from .runs import Shift
from .time import as_utc


@dataclass(frozen=True)
class Offer:
    """One shift as offered to one tender: ``started`` (left out of the form);
    ``missing``, the skills it needs that the tender lacks, and ``closed``, whether that
    leaves them no slot on it (shown, not tickable); ``away``, the tender's time off that
    covers its night (shown as away, not tickable)."""

    shift_id: int
    started: bool
    needs: frozenset[str]
    missing: frozenset[str]
    closed: bool = False
    away: Span | None = None

    @property
    def tickable(self) -> bool:
        return not self.started and not self.closed and self.away is None

    @property
    def why_not(self) -> str | None:
        if self.started:
            return "already started"
        if self.away is not None:
            return "away: your time off " + days(self.away.starts_on, self.away.ends_on)
        if self.closed:
            return "needs " + " and ".join(sorted(self.missing))
        return None


def away_of(pub: Pub, week_shifts: Sequence[Shift], tender_id: int) -> dict[int, Span]:
    """The week's shifts on a night the tender is away, each with the span covering it."""
    nights = {s.id: date.fromisoformat(s.night) for s in week_shifts}
    if not nights:
        return {}
    found = spans(pub, tender_id, since=min(nights.values()), until=max(nights.values()))
    out = {}
    for shift_id, night in nights.items():
        span = next((s for s in found if s.covers(night)), None)
        if span is not None:
            out[shift_id] = span
    return out


def offers(shifts: Iterable[tuple[int, datetime]],
           needs: Mapping[int, tuple[frozenset[str], int]],
           skills: frozenset[str], now: datetime,
           away: Mapping[int, Span] | None = None) -> dict[int, Offer]:
    """Each shift (id, starts_at) as offered to a tender with ``skills`` at ``now``;
    ``needs`` maps a shift to its needed skills and its slots, ``away`` the shifts on a
    night of the tender's time off to the span (:func:`away_of`)."""
    at = as_utc(now)
    out = {}
    for shift_id, starts_at in shifts:
        wanted, slots = needs.get(shift_id, (frozenset(), 0))
        anyones = slots > len(wanted)  # a slot no need reserves
        closed = bool(wanted) and not anyones and not (wanted & skills)
        out[shift_id] = Offer(shift_id, as_utc(starts_at) <= at, wanted, wanted - skills,
                              closed, (away or {}).get(shift_id))
    return out


def week_offers(pub: Pub, week_shifts: Sequence[Shift], tender: Tender,
                now: datetime) -> dict[int, Offer]:
    """:func:`offers` for the week's shifts as the caller read them (their needs and
    slots) to ``tender`` as read (their skills), with their time off read here: the
    caller's rows are reused, so a submission reads the week's shifts once."""
    needs = {s.id: (frozenset(s.needs), s.slots) for s in week_shifts}
    return offers(((s.id, s.starts_at) for s in week_shifts), needs,
                  frozenset(tender.skills), now, away_of(pub, week_shifts, tender.id))
