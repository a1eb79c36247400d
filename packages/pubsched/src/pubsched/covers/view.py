"""What the pages show of cover requests (:mod:`pubsched.covers`): the admin's covers page,
a sent week's roster, a tender's page and the offer link's page all read them here, so they
say one thing in one set of words.

Reads only: every move goes through :mod:`pubsched.covers` (its machine's door). A request
is said as the operator and the tenders say it, never by its state's name: "looking for
cover", "taken by Ann", "cancelled", "expired (the shift started)". An email a request owes
is said by whether it went (:mod:`pubsched.deliveries`): waiting, sent, not delivered and why,
uncertain, not needed any more.

A request still OPEN whose shift has started is already over for the people reading it
(nobody can take it or cancel it: the tick's expiry is only the bookkeeping that follows),
so the pages say "expired (the shift started)" for it too and offer no button.

A database the covers' migration (0045) has not reached yet (the seed's schema, a legacy
engine's) has no requests: the week page and the tender's page show none, as the tick and
``week show`` skip them (``pub.schema.covers``, :mod:`pubsched.db.level`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .. import covers
from ..deliveries import outbox
from ..deliveries.machine import UNKNOWN
from ..people.tenders import Tender, all_tenders
from ..pub import Pub
from ..week.time import as_utc
from . import Cover
from .machine import CANCELLED, EXPIRED, OPEN, TAKEN

# an email's fate, as the covers page says it (pubsched.deliveries.outbox.STATUS)
SENT_WORDS = {
    outbox.PENDING: "waiting to go",
    # claimed: being handed over right now, or its answer was lost (then with the error);
    # never sent again on its own (pubsched.deliveries)
    outbox.IN_FLIGHT: "handed to the mail server, no answer yet",
    outbox.SENT_WORD: "sent",
    outbox.FAILED: "not delivered",
    outbox.DROPPED_WORD: "not sent: no longer needed",
}


def kept(pub: Pub) -> bool:
    """Whether this database has the requests' table (migration 0045)."""
    return pub.schema.covers


def started(cover: Cover, now: datetime) -> bool:
    """Whether the shift of ``cover`` has begun at ``now``."""
    return as_utc(cover.starts_at) <= as_utc(now)


def is_open(cover: Cover, now: datetime) -> bool:
    """Whether someone may still take or cancel it: OPEN and its shift not started."""
    return cover.state == OPEN and not started(cover, now)


def state_words(cover: Cover, now: datetime) -> str:
    """``looking for cover``, ``taken by Ann``, ``cancelled``, ``expired (the shift
    started)``."""
    if cover.state == TAKEN:
        return f"taken by {cover.taker_name or cover.taker_email or 'someone'}"
    if cover.state == CANCELLED:
        return "cancelled"
    if cover.state == EXPIRED or started(cover, now):
        return "expired (the shift started)"
    return "looking for cover"


def on_roster(cover: Cover, now: datetime) -> str:
    """What a sent week's roster says on the shift: ``Bob can't make it — looking for
    cover``, ``Bob can't make it — covered by Ann``, ``... nobody took it``."""
    who = cover.asker_name
    if cover.state == TAKEN:
        return f"{who} can't make it — covered by {cover.taker_name}"
    if cover.state == EXPIRED or started(cover, now):
        return f"{who} asked for cover — nobody took it"
    if cover.state == CANCELLED:
        return f"{who} asked for cover, then cancelled"
    return f"{who} can't make it — looking for cover"


def when(pub: Pub, cover: Cover) -> str:
    """The cover's shift as the emails and the tender's page write it (the zone is said
    once per page)."""
    return cover.shift_text(pub.config.tz)


@dataclass(frozen=True)
class Mail:
    """One email a request owes, as the covers page lists it."""

    to: str  # a tender's name, or "you" for the operator
    what: str  # what it tells, in words (TOLD)
    kind: str  # the notice's kind (pubsched.covers.KINDS)
    went: str  # its fate, in words (SENT_WORDS, with the error when there is one)
    status: str  # the notice's status, for the page's styles and the tests


# what each email of a request tells its reader (pubsched.covers.KINDS; a test checks
# that every kind has its words), after "Told Alice ..."
TOLD = {
    "cover_offer": "it is theirs to take",
    "cover_asked": "it was asked",
    "cover_taken": "it was taken",
    "cover_cancelled": "it was called off",
    "cover_expired": "nobody took it",
}
OFFER = "cover_offer"


def mails(pub: Pub, cover: Cover, names: dict[int, str]) -> list[Mail]:
    """Every email the request owed, in the order owed."""
    out = []
    for notice in outbox.listed(pub, about=covers.notice_about(cover.id)):
        tender = notice.tender_id
        to = "you" if tender is None else names.get(tender, f"tender {tender}")
        went = SENT_WORDS.get(notice.status, notice.status)
        if notice.error and notice.status in (outbox.FAILED, outbox.IN_FLIGHT):
            went = f"{went} ({notice.error})"
        if notice.status == outbox.FAILED and notice.attempts < outbox.MAX_ATTEMPTS:
            wait = outbox.retry_wait(notice.attempts)
            went += (f", tried again in {int(wait.total_seconds() // 60)} min"
                     if wait < timedelta(hours=1) else ", tried again within the hour")
        elif notice.status == outbox.FAILED:
            went += f", given up after {notice.attempts} tries"
        if notice.state == UNKNOWN:  # only the operator's word sends it again
            went += "; it may have arrived: the Mail page can resend it"
        out.append(Mail(to, TOLD.get(notice.kind, notice.kind), notice.kind, went,
                        notice.status))
    return out


def _names(pub: Pub) -> dict[int, str]:
    return {t.id: t.name for t in all_tenders(pub)}


def admin_rows(pub: Pub, week: str | None, now: datetime) -> list[dict[str, Any]]:
    """The covers page: every request (of ``week``, or all) in the order asked, each with
    its words, whether it can still be cancelled, who was offered it and what else was
    sent."""
    names = _names(pub)
    rows = []
    for cover in covers.listed(pub, week):
        owed = mails(pub, cover, names)
        offers = [m for m in owed if m.kind == OFFER]
        rows.append({
            "cover": cover, "when": when(pub, cover), "state": state_words(cover, now),
            "open": is_open(cover, now), "offers": offers,
            "others": [m for m in owed if m.kind != OFFER]})
    return rows


def weeks_with_covers(pub: Pub) -> list[str]:
    """The weeks that have a request, for the page's filter."""
    return sorted({c.week_of for c in covers.listed(pub)})


def on_shifts(pub: Pub, week: str, now: datetime) -> dict[int, list[dict[str, str]]]:
    """A sent week's roster notes: per shift, its requests still worth saying (open,
    taken, expired; a cancelled one changed nothing)."""
    out: dict[int, list[dict[str, str]]] = {}
    for cover in covers.listed(pub, week) if kept(pub) else ():
        if cover.state == CANCELLED:
            continue
        tone = "open" if is_open(cover, now) else "taken" if cover.state == TAKEN else "over"
        out.setdefault(cover.shift_id, []).append(
            {"text": on_roster(cover, now), "tone": tone, "id": str(cover.id)})
    return out


def _open_by_shift(mine: Iterable[Cover], now: datetime) -> dict[int, Cover]:
    return {c.shift_id: c for c in mine if is_open(c, now)}


def for_tender(pub: Pub, tender: Tender, now: datetime) -> dict[str, Any]:
    """The tender's page: their open requests by shift (each upcoming shift shows either
    its request or "Can't make it? Ask for cover"), the shifts they gave away that others
    took and that are still to come, and the requests of others they could take now
    (eligible: :func:`pubsched.covers.eligible`), soonest first."""
    listed = covers.listed(pub) if kept(pub) else []
    mine = [c for c in listed if c.asked_by == tender.id]
    takeable = []
    for cover in listed:
        if cover.asked_by == tender.id or not is_open(cover, now):
            continue
        if any(t.id == tender.id for t in covers.eligible(pub, cover.id)):
            takeable.append({"cover": cover, "when": when(pub, cover)})
    given = [{"cover": c, "when": when(pub, c)} for c in mine
             if c.state == TAKEN and not started(c, now)]
    return {"open": _open_by_shift(mine, now), "max_note": covers.MAX_NOTE,
            "given": sorted(given, key=lambda g: as_utc(g["cover"].starts_at)),
            "takeable": sorted(takeable, key=lambda g: as_utc(g["cover"].starts_at))}
