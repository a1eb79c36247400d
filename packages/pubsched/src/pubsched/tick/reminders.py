"""Reminders, on the tick: each once per person per thing, as owed mail
(:mod:`pubsched.deliveries`).

Four kinds, each found by one rule (a *finder*) that is asked twice: by :func:`owe`,
every tick, to owe what is due (:func:`pubsched.deliveries.outbox.owe`: the mail's key
makes a second owing of the same reminder, by this tick or a racing one, write nothing),
and by the kind's composer at its turn (:func:`pubsched.deliveries.deliver.deliver`), to
check it is still true: a reminder the finder no longer gives (answered meanwhile, the
shift removed or covered, the tender deactivated or away, a cover taken, the moment gone)
is dropped, its composer returning None. So "who is owed" and "is it still owed" cannot
disagree.

=================  ==========================================  ============================
kind               who, when                                   setting (hours, 0 = off)
=================  ==========================================  ============================
remind_unanswered  each active tender with no answer to the    PUBSCHED_REMIND_UNANSWERED_
                   open form (the week COLLECTING, as the      HOURS, default 24
                   engine in charge reads it), that long
                   before its deadline (the engine's
                   deadline: an extension moves it); not one
                   away on every night the week has a shift
remind_shift       each tender on a shift of a sent week (the  PUBSCHED_REMIND_SHIFT_HOURS,
                   roster as it is now), that long before it   default 6
                   starts; not if they switched it off
                   (``pub_tenders.shift_reminders``), are
                   inactive, or are away that night
remind_review      the operator, once per week, when autopilot none: sent while the roster
                   (the v2 tick; the legacy crons) has made a  waits, until the week's
                   roster that waits for review (ASSIGNED)     first shift starts
remind_short       the operator, that long before a shift of a PUBSCHED_SHORT_HOURS,
                   sent week that is short: fewer on it than   default 24
                   its slots, or a cover nobody has taken
=================  ==========================================  ============================

**"That long before" is counted on the pub's wall clock** (:func:`pubsched.week.time.
wall_clock_before`): 24 hours before a Sunday 20:00 deadline is Saturday 20:00, 6 hours
before an 18:00 shift is 12:00, even in the week the clocks change.

**The form's quiet hour, and a deadline that moved** (issue 29). No form reminder is owed
in the hour after the form opens or its deadline moves (``pub_schedule_runs.form_moved_at``,
stamped by the open, a reopen and an extension with their own instant): the operator may
still be setting the deadline, and nobody has had their link yet. Once it is over, each
active tender whose latest form reminder (sent, or of unknown fate) named another deadline
than the one in force is told the new one, answered or not (the email says "now closes
..., not ..."): it is the reminder of that deadline, under the same key, so it goes once
whatever the number of tickers, and no second reminder of the same deadline follows it.

**The window.** A reminder is owed from its moment until the thing it is about begins:
the deadline, the shift's start (the review: the week's first shift). A ticker that
was down past that owes nothing when it comes back (no reminder of a shift that started
yesterday, of a deadline that passed); one down for less sends it late but still before.
The composer applies the same window, so a refused reminder retried by a later tick is
dropped once its shift has started.

**The operator's notes** are owed only while ``PUBSCHED_OPERATOR_EMAIL`` is set (with
nowhere to go, there is no one to remind); one owed and then left with nowhere to go is
failed and retried (``NotSentYet``).

Each notice row's ``about`` names the thing: ``form:WEEK:DEADLINE`` (an extension makes a
new deadline: those told the old one are told it, those still not answering are reminded
before it; a deadline moved back to one a tender had an email about is
``form:WEEK:DEADLINE#MOVED_AT``, named for that move), ``shift:ID``, ``roster:WEEK``.
The tick (:mod:`pubsched.tick.run`) runs :func:`owe` after the engine's
tick, outside the flag fence (it moves no week), and delivers what is owed with the rest
of the outbox.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from .. import covers
from ..covers import Cover
from ..db.instants import instant, maybe_instant
from ..deliveries import outbox
from ..deliveries.machine import DROPPED, SENT, UNKNOWN
from ..engines.base import Engine
from ..engines.choose import engine_for
from ..engines.v2_tick import TICK
from ..machine import ASSIGNED, COLLECTING
from ..mail.compose import Outgoing, Recipient, ShiftLine
from ..mail.reminder import (
    RosterState,
    compose_review,
    compose_shift_reminder,
    compose_short,
    compose_unanswered,
)
from ..people import links, time_off, usual
from ..people.tenders import Tender, all_tenders, by_id
from ..pub import Pub
from ..verdicts import BadInput
from ..week import submissions
from ..week.generate import missing
from ..week.time import wall_clock_before
from ..week.view import iso, moved_by

UNANSWERED = "remind_unanswered"
SHIFT = "remind_shift"
REVIEW = "remind_review"
SHORT = "remind_short"

# a lead counted on the wall clock can be up to an hour (a DST change) longer in elapsed
# time: the shifts read for a lead are those starting within it plus this margin, and
# the exact moment is then judged per shift
MARGIN = timedelta(hours=3)
# no form reminder in the hour after the form opens or its deadline moves: the operator
# may still be setting it (an open, then an extension a moment later), and nobody has been
# invited yet
QUIET = timedelta(hours=1)


@dataclass(frozen=True)
class Due:
    """One reminder owed now: the notice row it is (``kind``, ``about``, ``recipient``,
    ``week_of``) and how to write it from the facts the finder read (``write(now)``)."""

    kind: str
    about: str
    recipient: str
    week_of: str
    write: Callable[[datetime], Outgoing]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.about, self.recipient)


Finder = Callable[[Pub, Engine, datetime, str | None], list[Due]]
"""A kind's rule: the reminders of that kind owed at ``now`` (of one week, or all)."""


def _recipient(tender: Tender) -> Recipient:
    return Recipient(tender.email, tender.name)


def _page(pub: Pub, tender: Tender) -> str:
    return links.tender_url(pub.config, tender.id, tender.link_version)


def _week_page(pub: Pub, week: str) -> str:
    return f"{pub.config.base_url.rstrip('/')}/admin/weeks/{week}"


def _weeks_in(pub: Pub, engine: Engine, state: str, week: str | None) -> list[dict[str, Any]]:
    """The weeks not yet sent (of ``week`` only, when given) that the engine in charge
    reads as ``state``."""
    sql, params = "SELECT * FROM pub_schedule_runs WHERE status = 'pending'", []
    if week is not None:
        sql, params = sql + " AND week_of = %s", [week]
    rows = pub.query(sql + " ORDER BY week_of", params)
    return [r for r in rows if engine.state_of(pub, r) == state]


def _within(starts: datetime, hours: float, pub: Pub, now: datetime) -> bool:
    """Whether ``now`` is in the window of a reminder ``hours`` before ``starts``."""
    return wall_clock_before(starts, hours, pub.config.tz) <= now < starts


def _names_on(pub: Pub, shift_ids: Iterable[int]) -> dict[int, list[str]]:
    """shift id -> the names of who is on it now, in name order."""
    wanted = sorted(set(shift_ids))
    if not wanted:
        return {}
    marks = ", ".join(["%s"] * len(wanted))
    rows = pub.query("SELECT a.shift_id, t.name FROM pub_assignments a JOIN pub_tenders t "
                     f"ON t.id = a.tender_id WHERE a.shift_id IN ({marks}) "
                     "ORDER BY a.shift_id, lower(t.name), t.id", wanted)
    out: dict[int, list[str]] = {i: [] for i in wanted}
    for r in rows:
        out[int(r["shift_id"])].append(str(r["name"]))
    return out


def _open_covers(pub: Pub, rows: list[dict[str, Any]]) -> dict[int, list[Cover]]:
    """shift id -> the cover requests of it nobody has taken yet (:mod:`pubsched.covers`),
    for the shifts ``rows`` (each with its ``id`` and ``week_of``)."""
    wanted = {int(r["id"]) for r in rows}
    out: dict[int, list[Cover]] = {}
    for week in sorted({str(r["week_of"]) for r in rows}):
        for cover in covers.listed(pub, week):
            if cover.state == covers.OPEN and cover.shift_id in wanted:
                out.setdefault(cover.shift_id, []).append(cover)
    return out


def _shift_line(pub: Pub, row: dict[str, Any], names: list[str]) -> ShiftLine:
    return ShiftLine(int(row["id"]), str(row["label"]), instant(row["starts_at"]),
                     instant(row["ends_at"]), pub.config.tz.key, tuple(names),
                     int(row["slots"]))


# -- the four rules --------------------------------------------------------------------------


def unanswered(pub: Pub, engine: Engine, now: datetime, week: str | None = None) -> list[Due]:
    """The form reminders owed at ``now`` (module docstring): to each active tender not
    away all week who has not answered, that long before the deadline; and, the moment the
    quiet hour is over, to each one who was told another deadline than the one now in
    force (answered or not), once: the same email, saying the deadline moved."""
    lead = pub.config.remind_unanswered_hours
    if not lead:
        return []
    out: list[Due] = []
    for row in _weeks_in(pub, engine, COLLECTING, week):
        key = str(row["week_of"])
        try:
            deadline = engine.times(pub, row)["deadline_at"]
        except BadInput:  # a week whose settings are bad: the legacy crons report it
            continue
        quiet = _quiet_since(row)
        if deadline is None or now >= deadline or (quiet is not None and now < quiet + QUIET):
            continue
        nights = {date.fromisoformat(str(r["night"])) for r in pub.query(
            "SELECT night FROM pub_shifts WHERE week_of = %s", [key])}
        if not nights:  # nothing to answer about
            continue
        away = time_off.away_on(pub, nights)
        answered = {int(s["tender_id"]) for s in submissions.of_week(pub, key)}
        told, spent = _told(pub, key)
        due = _within(deadline, lead, pub, now)
        for tender in sorted(all_tenders(pub, active_only=True), key=lambda t: t.id):
            if all(tender.id in away[night] for night in nights):
                continue  # away the whole week: nothing to ask them
            was = told.get(tender.id)
            if was == deadline:
                continue  # told this deadline already
            if was is None and (tender.id in answered or not due):
                continue  # nothing told yet, and no reminder due now
            about = f"form:{key}:{iso(deadline)}"
            if about in spent.get(tender.id, set()):
                # a deadline moved back to one they had an email about: a new one, named
                # for this move (the same for every ticker: the week's own stamp)
                if quiet is None:
                    continue
                about += f"#{iso(quiet)}"

            def write(at: datetime, tender: Tender = tender, key: str = key,
                      deadline: datetime = deadline, before: datetime | None = was,
                      has_answered: bool = tender.id in answered) -> Outgoing:
                return compose_unanswered(
                    _recipient(tender), date.fromisoformat(key), deadline=deadline,
                    tz=pub.config.tz.key, page_url=_page(pub, tender),
                    settings=pub.config.mail, now=at,
                    usual=usual.of(pub, tender.id) is not None, was=before,
                    answered=has_answered)

            out.append(Due(UNANSWERED, about, outbox.to_tender(tender.id), key, write))
    return out


def _quiet_since(row: dict[str, Any]) -> datetime | None:
    """When the week's form last opened or had its deadline moved (0052's stamp; a week
    opened before it: its opening)."""
    return maybe_instant(row.get("form_moved_at")) or maybe_instant(row.get("opened_at"))


def _told(pub: Pub, week: str) -> tuple[dict[int, datetime], dict[int, set[str]]]:
    """Per tender id: the deadline the latest form reminder that reached them (or may have:
    its fate unknown) named; and the ``about`` of each of their form reminders of the week
    that is spent (sent, of unknown fate or dropped: its key is never owed again)."""
    rows = pub.query("SELECT about, recipient, state FROM pub_mail WHERE kind = %s AND "
                     "week_of = %s ORDER BY id", [UNANSWERED, week]) if pub.schema.mail else []
    told: dict[int, datetime] = {}
    spent: dict[int, set[str]] = {}
    for r in rows:
        recipient, about, state = str(r["recipient"]), str(r["about"]), str(r["state"])
        if not recipient.startswith("tender:") or state not in (SENT, UNKNOWN, DROPPED):
            continue
        tender = int(recipient.removeprefix("tender:"))
        spent.setdefault(tender, set()).add(about)
        if state != DROPPED:
            told[tender] = instant(about.removeprefix(f"form:{week}:").split("#", 1)[0])
    return told, spent


def shifts(pub: Pub, engine: Engine, now: datetime, week: str | None = None) -> list[Due]:
    """The reminders before a shift owed at ``now`` (module docstring). A sent week reads
    alike under both engines (the legacy ``status`` is written through), so the engine is
    not asked."""
    lead = pub.config.remind_shift_hours
    if not lead:
        return []
    sql = ("SELECT s.id, s.week_of, s.label, s.starts_at, s.ends_at, s.slots, a.tender_id "
           "FROM pub_assignments a JOIN pub_shifts s ON s.id = a.shift_id "
           "JOIN pub_schedule_runs r ON r.week_of = s.week_of "
           "JOIN pub_tenders t ON t.id = a.tender_id "
           "WHERE r.status = 'sent' AND t.active = 1 AND t.shift_reminders = 1 "
           f"AND s.starts_at > %s AND s.starts_at <= %s AND NOT "
           f"{time_off.away_clause('t.id', 's.night')}")
    params: list[Any] = [now, now + timedelta(hours=lead) + MARGIN]
    if week is not None:
        sql, params = sql + " AND s.week_of = %s", [*params, week]
    rows = [r for r in pub.query(sql + " ORDER BY s.starts_at, s.id, a.tender_id", params)
            if _within(instant(r["starts_at"]), lead, pub, now)]
    names = _names_on(pub, (int(r["id"]) for r in rows))
    asking = _open_covers(pub, rows)
    out: list[Due] = []
    for r in rows:
        tender = by_id(pub, int(r["tender_id"]))
        assert tender is not None  # the join found them
        line = _shift_line(pub, r, names[int(r["id"])])
        asked = any(c.asked_by == tender.id for c in asking.get(int(r["id"]), []))

        def write(at: datetime, tender: Tender = tender, line: ShiftLine = line,
                  asked: bool = asked) -> Outgoing:
            return compose_shift_reminder(_recipient(tender), line, lead_hours=lead,
                                          page_url=_page(pub, tender),
                                          settings=pub.config.mail, now=at,
                                          cover_asked=asked)

        out.append(Due(SHIFT, f"shift:{line.id}", outbox.to_tender(tender.id),
                       str(r["week_of"]), write))
    return out


def reviews(pub: Pub, engine: Engine, now: datetime, week: str | None = None) -> list[Due]:
    """The operator's note that a roster autopilot made waits for review (module
    docstring): the week ASSIGNED, made by the tick (v2: its generate's event says so;
    the legacy crons generate every week themselves), its first shift not started (past
    its send window it is all the more needed: after a late open the window may close
    at the very generate)."""
    if pub.config.mail.operator_email is None:
        return []
    out: list[Due] = []
    for row in _weeks_in(pub, engine, ASSIGNED, week):
        key = str(row["week_of"])
        made = maybe_instant(row.get("generated_at"))
        try:
            send_by = engine.times(pub, row)["send_window_at"]
        except BadInput:
            continue
        first = pub.query("SELECT MIN(starts_at) AS first FROM pub_shifts WHERE week_of = %s",
                          [key])[0]["first"]
        if made is None or made > now or (first is not None and now >= instant(first)):
            continue
        if engine.name != "legacy" and not _made_by_autopilot(pub, key):
            continue

        def write(at: datetime, key: str = key, made: datetime = made,
                  send_by: datetime | None = send_by) -> Outgoing:
            return compose_review(date.fromisoformat(key), _roster_state(pub, key),
                                  generated_at=made, send_by=send_by, tz=pub.config.tz.key,
                                  settings=pub.config.mail, now=at,
                                  admin_url=_week_page(pub, key))

        out.append(Due(REVIEW, f"roster:{key}", outbox.OPERATOR, key, write))
    return out


def _made_by_autopilot(pub: Pub, week: str) -> bool:
    """Whether the week's latest move into ASSIGNED was the tick's (its event's ``by``)."""
    into = [e for e in pub.runs.history(week) if e.to_state == ASSIGNED]
    return bool(into) and moved_by(into[-1]) == TICK


def _roster_state(pub: Pub, week: str) -> RosterState:
    rows = pub.query("SELECT id, slots FROM pub_shifts WHERE week_of = %s", [week])
    names = _names_on(pub, (int(r["id"]) for r in rows))
    unmet = sorted({need for needs in missing(pub, week).values() for need in needs})
    return RosterState(sum(min(int(r["slots"]), len(names[int(r["id"])])) for r in rows),
                       sum(int(r["slots"]) for r in rows), tuple(unmet))


def shorts(pub: Pub, engine: Engine, now: datetime, week: str | None = None) -> list[Due]:
    """The operator's notes of short shifts owed at ``now`` (module docstring)."""
    lead = pub.config.short_hours
    if not lead or pub.config.mail.operator_email is None:
        return []
    sql = ("SELECT s.id, s.week_of, s.label, s.starts_at, s.ends_at, s.slots "
           "FROM pub_shifts s JOIN pub_schedule_runs r ON r.week_of = s.week_of "
           "WHERE r.status = 'sent' AND s.starts_at > %s AND s.starts_at <= %s")
    params: list[Any] = [now, now + timedelta(hours=lead) + MARGIN]
    if week is not None:
        sql, params = sql + " AND s.week_of = %s", [*params, week]
    rows = [r for r in pub.query(sql + " ORDER BY s.starts_at, s.id", params)
            if _within(instant(r["starts_at"]), lead, pub, now)]
    names = _names_on(pub, (int(r["id"]) for r in rows))
    open_covers = _open_covers(pub, rows)
    out: list[Due] = []
    for r in rows:
        shift_id = int(r["id"])
        asking = open_covers.get(shift_id, [])
        if len(names[shift_id]) >= int(r["slots"]) and not asking:
            continue
        line = _shift_line(pub, r, names[shift_id])
        askers = [c.asker_name for c in asking]
        key = str(r["week_of"])

        def write(at: datetime, line: ShiftLine = line, key: str = key,
                  askers: list[str] = askers) -> Outgoing:
            return compose_short(line, date.fromisoformat(key), open_covers=askers,
                                 settings=pub.config.mail, now=at,
                                 admin_url=_week_page(pub, key))

        out.append(Due(SHORT, f"shift:{shift_id}", outbox.OPERATOR, key, write))
    return out


FINDERS: dict[str, Finder] = {UNANSWERED: unanswered, SHIFT: shifts, REVIEW: reviews,
                              SHORT: shorts}
TO_OPERATOR = frozenset({REVIEW, SHORT})


# -- owing and composing --------------------------------------------------------------------


def owed(pub: Pub, now: datetime, engine: Engine | None = None) -> list[Due]:
    """Every reminder owed at ``now``, in one order (kind, about, recipient), so that two
    ticks owing the same ones take the outbox's row locks in the same order."""
    chosen = engine or engine_for(pub)
    found = [due for finder in FINDERS.values() for due in finder(pub, chosen, now, None)]
    return sorted(found, key=lambda due: due.key)


def _composer(kind: str) -> outbox.Composer:
    """The kind's composer: the finder asked again, for the notice's week, at its turn."""
    finder = FINDERS[kind]

    def compose(pub: Pub, notice: outbox.Mail, now: datetime) -> Outgoing | None:
        if kind in TO_OPERATOR and pub.config.mail.operator_email is None:
            raise outbox.NotSentYet("the operator's note has nowhere to go: set "
                                     "PUBSCHED_OPERATOR_EMAIL; the next tick tries again")
        still = [d for d in finder(pub, engine_for(pub), now, notice.week_of)
                 if d.key == (notice.kind, notice.about, notice.recipient)]
        return still[0].write(now) if still else None

    return compose


COMPOSERS: dict[str, outbox.Composer] = {kind: _composer(kind) for kind in FINDERS}


def owe(pub: Pub, now: datetime) -> int:
    """Owe every reminder due now, in one unit of work (a second owing of one, by this
    tick or a racing one, writes nothing: the outbox's UNIQUE); how many were new. The
    tick then delivers them with the rest of the outbox (:data:`COMPOSERS`)."""
    due = owed(pub, now)
    if not due:
        return 0
    with pub.atomic():
        return sum(outbox.owe(pub, d.kind, d.about, d.recipient, week_of=d.week_of, now=now)
                   for d in due)


__all__ = ["COMPOSERS", "FINDERS", "REVIEW", "SHIFT", "SHORT", "UNANSWERED", "Due", "owe",
           "owed", "reviews", "shifts", "shorts", "unanswered"]
