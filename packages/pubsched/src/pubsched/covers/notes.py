"""The emails a cover request owes, as :mod:`pubsched.deliveries` composers: each notice is
owed (``enqueue``) in the unit of work that decided it (:mod:`.requests`) and written here
at its turn, from what is true then.

=================  ==========================================  ===========================
kind               to                                          written when
=================  ==========================================  ===========================
``cover_offer``    each tender who may take it, when asked     the request is still open,
                                                               the shift not started and
                                                               they may still take it
                                                               (else dropped: None)
``cover_asked``    the operator, when asked                    always
``cover_taken``    the asker (their event cancelled), the      always (to the asker: only
                   taker (their event added), the operator     while they are active)
``cover_cancelled`` the asker and the operator                 always (idem)
``cover_expired``  the asker and the operator, at the start    always (idem)
=================  ==========================================  ===========================

Every notice of a request is ``about`` :func:`notice_about` (``cover:<id>``). An operator's
note with no ``PUBSCHED_OPERATOR_EMAIL`` is :class:`~pubsched.deliveries.outbox.NotSentYet`: tried
again by later deliveries once it is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime

from ..deliveries import outbox
from ..deliveries.deliver import deliver as deliver_owed
from ..mail import cover as words
from ..mail.compose import CoverFacts, CoverNote, Outgoing, Recipient, ShiftLine, compose_cover
from ..people import sequences
from ..people.links import offer_url, tender_links
from ..people.tenders import Tender, by_id
from ..pub import Pub
from ..verdicts import Verdict
from .eligible import why_not
from .machine import OPEN
from .read import Cover, get

OFFER, ASKED, TAKEN, CANCELLED, EXPIRED = (
    "cover_offer", "cover_asked", "cover_taken", "cover_cancelled", "cover_expired")
KINDS = (OFFER, ASKED, TAKEN, CANCELLED, EXPIRED)


def notice_about(cover_id: int) -> str:
    """The ``about`` of every notice request ``cover_id`` owes."""
    return f"cover:{int(cover_id)}"


def admin_url(pub: Pub) -> str:
    """The covers page of the admin, the link an operator's note carries."""
    return f"{pub.config.base_url.rstrip('/')}/admin/covers"


def facts(pub: Pub, cover: Cover) -> CoverFacts:
    line = ShiftLine(cover.shift_id, cover.label, cover.starts_at.astimezone(UTC),
                     cover.ends_at.astimezone(UTC), pub.config.tz.key)
    return CoverFacts(cover.id, date.fromisoformat(cover.week_of), line, cover.asker_name,
                      cover.taker_name, cover.note)


def _cover(pub: Pub, notice: outbox.Mail) -> Cover | None:
    number = notice.about.removeprefix("cover:")
    return get(pub, int(number)) if number.isdigit() else None


def _send(pub: Pub, note: CoverNote, to: Tender | None, cover: Cover, kind: str,
          now: datetime, calendar: str | None = None, sequence: int = 1) -> Outgoing:
    """``note`` addressed to ``to`` (None: the operator, or NotSentYet without one)."""
    settings = pub.config.mail
    if to is None and settings.operator_email is None:
        raise outbox.NotSentYet("the operator's note has nowhere to go: set "
                                 "PUBSCHED_OPERATOR_EMAIL")
    recipient = None if to is None else Recipient(to.email, to.name)
    return compose_cover(note, recipient, facts(pub, cover), kind=kind, settings=settings,
                         now=now, calendar=calendar, sequence=sequence)


def _tender(pub: Pub, notice: outbox.Mail) -> Tender | None:
    return None if notice.tender_id is None else by_id(pub, notice.tender_id)


def _left(tender: Tender | None, cover: Cover) -> bool:
    """The notice is to the asker, who is no longer active: deactivated, they were taken
    off the shift as the pub asked for cover on their behalf (:mod:`.leaving`), and a
    tender who has left is not written to about it."""
    return tender is not None and tender.id == cover.asked_by and not tender.active


def compose_offer(pub: Pub, notice: outbox.Mail, now: datetime) -> Outgoing | None:
    cover, tender = _cover(pub, notice), _tender(pub, notice)
    if cover is None or tender is None or cover.state != OPEN or cover.starts_at <= now:
        return None
    with pub.atomic() as tx:
        if why_not(tx, {"week_of": cover.week_of, "shift_id": cover.shift_id,
                        "asked_by": cover.asked_by}, tender.id) is not None:
            return None  # away, busy or at their most since it was asked: not theirs
    url = offer_url(pub.config, cover.id, tender.id, tender.link_version)
    note = words.offer(facts(pub, cover), pub.config.mail.pub_name, tender.name, url)
    return _send(pub, note, tender, cover, "offer", now)


def compose_asked(pub: Pub, notice: outbox.Mail, now: datetime) -> Outgoing | None:
    cover = _cover(pub, notice)
    if cover is None:
        return None
    offered = [n.tender_id for n in outbox.listed(pub, about=notice.about)
               if n.kind == OFFER and n.tender_id is not None]
    names = tuple(t.name for t in (by_id(pub, i) for i in offered) if t is not None)
    note = words.asked(facts(pub, cover), pub.config.mail.pub_name, names, admin_url(pub))
    return _send(pub, note, None, cover, "asked", now)


def compose_taken(pub: Pub, notice: outbox.Mail, now: datetime) -> Outgoing | None:
    cover, tender = _cover(pub, notice), _tender(pub, notice)
    if cover is None or cover.taken_by is None or _left(tender, cover):
        return None
    said, pub_name = facts(pub, cover), pub.config.mail.pub_name
    if tender is None:
        return _send(pub, words.taken_operator(said, pub_name, admin_url(pub)), None, cover,
                     "taken", now)
    # the SEQUENCE of this change to their event (owed with it; a notice owed before
    # 0055 has none: the number now, which is at least as high)
    seq = outbox.facts_of(pub, notice).get("sequence")
    if seq is None:
        seq = sequences.current(pub, tender.id).get(cover.shift_id, 0)
    if tender.id == cover.asked_by:
        return _send(pub, words.taken_asker(said, pub_name, tender.name), tender, cover,
                     "taken", now, calendar="cancel", sequence=max(1, int(seq)))
    links = tender_links(pub.config, tender.id, tender.link_version)
    return _send(pub, words.taken_taker(said, pub_name, tender.name, links), tender, cover,
                 "taken", now, calendar="add", sequence=int(seq))


def compose_cancelled(pub: Pub, notice: outbox.Mail, now: datetime) -> Outgoing | None:
    cover, tender = _cover(pub, notice), _tender(pub, notice)
    if cover is None or _left(tender, cover):
        return None
    note = words.cancelled(facts(pub, cover), pub.config.mail.pub_name,
                           None if tender is None else tender.name, admin_url(pub))
    return _send(pub, note, tender, cover, "cancelled", now)


def compose_expired(pub: Pub, notice: outbox.Mail, now: datetime) -> Outgoing | None:
    cover, tender = _cover(pub, notice), _tender(pub, notice)
    if cover is None or _left(tender, cover):
        return None
    note = words.expired(facts(pub, cover), pub.config.mail.pub_name,
                         None if tender is None else tender.name, admin_url(pub))
    return _send(pub, note, tender, cover, "expired", now)


COMPOSERS: Mapping[str, outbox.Composer] = {
    OFFER: compose_offer, ASKED: compose_asked, TAKEN: compose_taken,
    CANCELLED: compose_cancelled, EXPIRED: compose_expired,
}


def deliver(pub: Pub, now: datetime) -> list[Verdict]:
    """Send every cover email owed and not yet sent (what a command does right after its
    commit, and the tick for what is left)."""
    return deliver_owed(pub, COMPOSERS, now)


__all__ = ["ASKED", "CANCELLED", "COMPOSERS", "EXPIRED", "KINDS", "OFFER", "TAKEN",
           "admin_url", "deliver", "facts", "notice_about"]
