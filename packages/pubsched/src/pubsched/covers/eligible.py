"""Who may take a cover: one rule, judged inside a unit of work, read by the ask (whom to
offer it), the offer's email (is it still theirs to take) and the take (may they, now).

A tender may take the asker's place on the shift when they are

1. active;
2. not away that day (:func:`pubsched.people.time_off.away_clause`, the picker's own test);
3. not already working then: no shift of theirs starts that local date (one shift a
   night, the picker's rule), and none overlaps it in time
   (:func:`pubsched.week.runs.clash_clause`): whoever works Thursday 18:00-02:00 may not
   take Friday 01:00-05:00, though it is another night;
4. under their weekly maximum: their own (``pub_tenders.max_shifts``) and, if they
   answered that week's form, the week's (``pub_availability.max_shifts``), counting the
   shifts they work that week now (after earlier covers);
5. not making the shift's skills worse: with them in the asker's place, the tenders on the
   shift meet as many of its needs (:func:`pubsched.picker.needs.matched`, the one reading
   of a need met) as they did with the asker. A shift that needs the keys, whose asker
   held them and nobody else on it does, is offered to key-holders only; one whose keys
   another tender on it holds is offered to everyone;

and are not the asker. Those who may are offered it least recently covering first (never
before, then the longest ago), then by name: the work of covering goes round.

Judged on what the unit reads, so the take, which holds the week exclusively first, judges
on what every earlier take committed: someone who went away, or reached their maximum,
since the offer was sent cannot take it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .. import words
from ..db.instants import instant
from ..people import skills
from ..people.tenders import Tender, every
from ..people.time_off import away_clause
from ..picker.needs import matched
from ..week.runs import clash_clause

_JUDGED = (  # each tender's facts for one cover (the people themselves: people.tenders)
    "SELECT t.id, "
    "(SELECT COUNT(*) FROM pub_assignments a WHERE a.week_of = %s "
    " AND a.tender_id = t.id) AS working, "
    "(SELECT COUNT(*) FROM pub_assignments a JOIN pub_shifts s ON s.id = a.shift_id "
    " WHERE a.tender_id = t.id AND s.night = %s) AS that_night, "
    "(SELECT COUNT(*) FROM pub_assignments a JOIN pub_shifts s ON s.id = a.shift_id "
    f" JOIN pub_shifts c ON c.id = %s WHERE a.tender_id = t.id AND {clash_clause('s', 'c')}"
    ") AS clashing, "
    "(SELECT v.max_shifts FROM pub_availability v WHERE v.week_of = %s "
    " AND v.tender_id = t.id) AS week_most, "
    "(SELECT MAX(c.taken_at) FROM pub_covers c WHERE c.taken_by = t.id "
    " AND c.state = 'TAKEN') AS last_covered, "
    f"CASE WHEN {away_clause('t.id', '%s')} THEN 1 ELSE 0 END AS away "
    "FROM pub_tenders t WHERE t.id <> %s"
)


@dataclass(frozen=True)
class Judged:
    """One tender as the rule sees them for one cover: ``why_not`` (None: they may take
    it) in the operator's words, and when they last covered (None: never)."""

    tender: Tender
    why_not: str | None
    last_covered: datetime | None

    @property
    def order(self) -> tuple[bool, datetime | str, str, int]:
        """Least recently covering first, then by name."""
        return (self.last_covered is not None, self.last_covered or "",
                self.tender.name.lower(), self.tender.id)


def judged(tx: Any, cover: Mapping[str, Any]) -> list[Judged]:
    """Every tender but the asker, judged for ``cover`` (a row with ``week_of``,
    ``shift_id``, ``asked_by``) as ``tx`` reads the database now, in offer order."""
    week, shift_id, asker = str(cover["week_of"]), int(cover["shift_id"]), int(cover["asked_by"])
    [shift] = tx.execute("SELECT night, needs FROM pub_shifts WHERE id = %s", [shift_id])
    night = str(shift["night"])
    needs = skills.stored(shift["needs"])
    on_shift = {int(r["tender_id"]): skills.stored(r["skills"]) for r in tx.execute(
        "SELECT a.tender_id, t.skills FROM pub_assignments a JOIN pub_tenders t "
        "ON t.id = a.tender_id WHERE a.shift_id = %s", [shift_id])}
    others = {str(tid): have for tid, have in on_shift.items() if tid != asker}
    asker_skills = on_shift.get(asker)
    if asker_skills is None:  # the asker has left the shift (a take committed): as they had
        asker_skills = skills.stored(tx.execute(
            "SELECT skills FROM pub_tenders WHERE id = %s", [asker])[0]["skills"])
    bar = matched(needs, {**others, "asker": asker_skills})
    rows = tx.execute(_JUDGED, [week, night, shift_id, week, night, asker])
    people = every(tx)
    out = []
    for row in rows:
        tender = people[int(row["id"])]
        why = _why_not(tender, row, needs, others, bar)
        last = None if row["last_covered"] is None else instant(row["last_covered"])
        out.append(Judged(tender, why, last))
    return sorted(out, key=lambda j: j.order)


def _why_not(tender: Tender, row: Mapping[str, Any], needs: tuple[str, ...],
             others: Mapping[str, tuple[str, ...]], bar: int) -> str | None:
    if not tender.active:
        return words.NOT_ACTIVE
    if row["away"]:
        return words.AWAY
    if int(row["that_night"]):
        return words.SAME_NIGHT
    if int(row["clashing"]):
        return words.SAME_TIME
    limits = [m for m in (tender.max_shifts, row["week_most"]) if m is not None]
    if limits and int(row["working"]) >= min(int(m) for m in limits):
        return words.AT_MOST.format(most=min(int(m) for m in limits))
    if needs and matched(needs, {**others, "candidate": tender.skills}) < bar:
        lacking = sorted(set(needs) - set(tender.skills))
        return words.LACKS_SKILL.format(skills=" or ".join(lacking))
    return None


def why_not(tx: Any, cover: Mapping[str, Any], tender_id: int) -> str | None:
    """Why tender ``tender_id`` may not take ``cover`` now (None: they may)."""
    for one in judged(tx, cover):
        if one.tender.id == tender_id:
            return one.why_not
    return None  # pragma: no cover - the asker is refused before this is asked


__all__ = ["Judged", "judged", "why_not"]
