"""Availability: which of a week's shifts a tender can work, and their maximum that week.

One global survey, open for at most one week at a time. A submission is bucketed into the
week it was made for (the form names it), never by the date it arrived: the seed's H1 fix.
It is stored inside a unit of work that the engine in charge holds open
(:meth:`pubsched.engines.base.Engine.hold_form`): with v2, ``tx.hold(week, COLLECTING)``,
so a submission racing a close either commits before the close applies (the close's
UPDATE waits for it) or is refused; with the legacy engine, the same row lock, and the
legacy "open" rule (``opened_at`` set, ``closed_at`` not). Past the deadline it is still
accepted while the form is open: the deadline drives nudges and autopilot; the close is
what ends submissions.

A submission is the tender's own answer (``pub_availability.source = 'form'``, 0046): it
replaces one the close took from their usual (:mod:`pubsched.people.usual`) after a reopen. With
``save_usual`` it also becomes their usual, in the same unit.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from rowstate import Unit

from ..db.instants import instant
from ..engines.choose import engine_for
from ..mail.wording import shift_when
from ..people.links import verify
from ..people.tenders import Tender, by_id, check_max, get
from ..people.usual import identity
from ..people.usual import write as write_usual
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from .offer import week_offers
from .runs import shifts, week_key


def submit(pub: Pub, week: str, email: str, shift_ids: Iterable[int], *,
           max_shifts: int | None = None, now: datetime | None = None,
           save_usual: bool = False) -> Verdict:
    """Store (or replace) a tender's availability for ``week``; with ``save_usual``, make it
    their usual too (:func:`pubsched.people.usual.write`)."""
    # one unit for the reads and the write: the checks judge what the write commits, and
    # SQLite's write lock is taken once per answer (a rush of tenders queues on it)
    with pub.atomic() as tx:
        tender = get(pub, email)
        if not tender.active:
            raise BadInput(f"{tender.email} is not an active tender")
        return _store(pub, tx, week, tender, shift_ids, max_shifts, utc(now), save_usual)


def submit_by_link(pub: Pub, token: str, week: str, shift_ids: Iterable[int], *,
                   max_shifts: int | None = None, now: datetime | None = None,
                   save_usual: bool = False,
                   ) -> tuple[Tender, Verdict | BadInput] | None:
    """A tender's answer from their own form: :func:`submit`, with the link checked by
    :func:`pubsched.people.links.tender_for_link`'s rules inside the answer's unit (one
    unit an answer: under a deadline rush each is a wait). None when the link must do
    nothing; else the tender and the verdict, or the bad input, nothing saved."""
    got = verify(pub.config, token, "form")
    if got is None:
        return None
    tender_id, version = got
    tender: Tender | None = None
    try:
        with pub.atomic() as tx:
            tender = by_id(pub, tender_id)
            if tender is None or not tender.active or tender.link_version != version:
                return None
            return tender, _store(pub, tx, week, tender, shift_ids, max_shifts, utc(now),
                                  save_usual)
    except BadInput as exc:
        if tender is None:
            raise
        return tender, exc


def _store(pub: Pub, tx: Unit, week: str, tender: Tender, shift_ids: Iterable[int],
           max_shifts: int | None, at: datetime, save_usual: bool) -> Verdict:
    """The answer's checks and its write, in ``tx`` (the caller read ``tender`` in it)."""
    key = week_key(week)
    try:
        wanted = sorted({int(s) for s in shift_ids})
    except (TypeError, ValueError):
        raise BadInput(f"shift ids are whole numbers, got {shift_ids!r}") from None
    limit = check_max(max_shifts, "the week's maximum")
    # the hold first: an answer after the close (half of a deadline rush's) is refused
    # without reading the week's shifts and the tender's time off
    run = engine_for(pub).hold_form(tx, key)
    if isinstance(run, Verdict):
        return run
    week_shifts = {s.id: s for s in shifts(pub, key)}
    if not week_shifts:
        raise BadInput(f"week {key} has no shifts (is it created?)")
    foreign = [s for s in wanted if s not in week_shifts]
    if foreign:
        raise BadInput(f"shift(s) {foreign} are not shifts of week {key}")
    offered = week_offers(pub, list(week_shifts.values()), tender, at)
    refused = [s for s in wanted if not offered[s].tickable]
    if refused:
        tz = pub.config.tz
        said = "; ".join(
            f"{shift_when(week_shifts[s].starts_at, week_shifts[s].ends_at, tz)} "
            f"({offered[s].why_not})" for s in refused)
        raise BadInput(f"{tender.name} cannot be put down for {said}. Nothing was saved"
                       + (": a shift's skills are the operator's to give"
                          if any(offered[s].missing for s in refused) else "."))
    started = {s for s, offer in offered.items() if offer.started}
    sourced = pub.schema.usual  # 0046; not on legacy
    if save_usual and not sourced:
        raise BadInput("this database has no usual yet: run `pubsched init`")
    source = (("source, ", "'form', ", ", source = excluded.source") if sourced
              else ("", "", ""))
    if save_usual and started:  # their usual is what the week holds after the answer
        kept = [int(r["shift_id"]) for r in tx.execute(
            "SELECT shift_id FROM pub_availability_shifts WHERE week_of = %s AND "
            "tender_id = %s", [key, tender.id]) if int(r["shift_id"]) in started]
    else:
        kept = []
    ticked = sorted({*wanted, *kept})
    # the answer's three writes touch none of one another's rows: the DELETE spares every
    # shift ticked now (and the started ones, whose answers stay), the INSERT skips one
    # already there. So on PostgreSQL they go as one statement (one round trip; under a
    # deadline rush each is a wait), and on SQLite, which has no writes in WITH, in turn.
    spared = sorted({*wanted, *started})
    writes: list[tuple[str, list[Any]]] = [
        ("DELETE FROM pub_availability_shifts WHERE week_of = %s AND tender_id = %s"
         + (f" AND shift_id NOT IN ({', '.join(['%s'] * len(spared))})" if spared else ""),
         [key, tender.id, *spared]),
        (f"INSERT INTO pub_availability (week_of, tender_id, max_shifts, "
         f"{source[0]}submitted_at, updated_at) VALUES (%s, %s, %s, "
         f"{source[1]}%s, %s) ON CONFLICT (week_of, tender_id) DO UPDATE SET "
         f"max_shifts = excluded.max_shifts, updated_at = excluded.updated_at"
         f"{source[2]}", [key, tender.id, limit, at, at])]
    if wanted:
        writes.append(("INSERT INTO pub_availability_shifts (week_of, tender_id, shift_id) "
                       "VALUES " + ", ".join(["(%s, %s, %s)"] * len(wanted))
                       + " ON CONFLICT DO NOTHING",
                       [value for s in wanted for value in (key, tender.id, s)]))
    _write_together(pub, tx, writes)
    if save_usual:
        tz = pub.config.tz
        write_usual(tx, tender.id,
                    {identity(week_shifts[s].starts_at, tz) for s in ticked},
                    limit, at, not_offered={
                        identity(week_shifts[s].starts_at, tz)
                        for s, offer in offered.items() if not offer.tickable})
    deadline = run.get("deadline_at")
    late = deadline is not None and at >= instant(deadline)
    note = " (the deadline has passed; the form is still open)" if late else ""
    usual = "; saved as their usual" if save_usual else ""
    return Verdict(True, message=f"saved {len(wanted)} shift(s) for {tender.email}{usual}"
                   f"{note}", detail={"deadline_passed": late, "shift_ids": wanted,
                                      "usual": save_usual})


def of_week(pub: Pub, week: str, tender_id: int | None = None) -> list[dict[str, Any]]:
    """Every submission of the week (or only ``tender_id``'s: a tender's own page reads
    one answer, not the whole pub's): email, tender id, shift ids, maximum, and ``source``: ``form``
    (their own answer) or ``usual`` (the close used their usual for them)."""
    source = ("a.source" if pub.schema.usual
              else "'form' AS source")
    only, params = ("", [week]) if tender_id is None else (" AND tender_id = %s",
                                                           [week, tender_id])
    rows = pub.query(
        f"SELECT t.email, a.tender_id, a.max_shifts, a.updated_at, {source} "
        "FROM pub_availability a JOIN pub_tenders t ON t.id = a.tender_id "
        f"WHERE a.week_of = %s{only.replace('tender_id', 'a.tender_id')} ORDER BY t.email",
        params)
    picks = pub.query("SELECT tender_id, shift_id FROM pub_availability_shifts "
                      f"WHERE week_of = %s{only} ORDER BY shift_id", params)
    by_tender: dict[int, list[int]] = {}
    for p in picks:
        by_tender.setdefault(int(p["tender_id"]), []).append(int(p["shift_id"]))
    return [{"email": r["email"], "tender_id": int(r["tender_id"]),
             "shift_ids": by_tender.get(int(r["tender_id"]), []), "max": r["max_shifts"],
             "updated_at": r["updated_at"],
             "source": str(r["source"])} for r in rows]


def _write_together(pub: Pub, tx: Unit, writes: list[tuple[str, list[Any]]]) -> None:
    """``writes`` (none reading or touching another's rows) in one statement on
    PostgreSQL: every one but the last as a WITH of the last; in turn on SQLite."""
    if pub.dialect != "postgresql" or len(writes) == 1:
        for sql, params in writes:
            tx.execute(sql, params)
        return
    *before, (last, params) = writes
    tx.execute("WITH " + ", ".join(f"w{i} AS ({sql})" for i, (sql, _) in enumerate(before))
               + " " + last, [value for _, p in before for value in p] + params)
