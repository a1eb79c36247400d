"""Mail of unknown fate, and the operator's resend of one: the same for every kind of mail
(the schedule, cover mail, reminders, the operator's nudges, invitations).

An email ends UNKNOWN when its handover began and no answer came (the connection lost
after the data, or its sender killed after the handover mark, :mod:`.deliver`): it may
have arrived, so nothing sends it again on its own. :func:`unknown` lists them for the
operator (``pubsched mail unknown``, the web's Mail page) and :func:`resend` is their
explicit choice to send one again, accepting that the recipient may get it twice, but
never three times for one click: the resend moves the row back to OWED and claims it in
one unit (:func:`.deliver.claim_owed`), so of two resends, or a resend and a tick, one
claims and sends and the other is told it is being sent. A refused email whose tries are
spent may be resent the same way. The email is written by its kind's composer from what
is true now: one no longer true (a cover offer taken since, a reminder of a shift that
started) is dropped, not sent.

The composers are the caller's (the front ends pass every kind's, from
:data:`pubsched.tick.run.EVERY_COMPOSER`): this module knows no feature.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..db.instants import instant
from ..pub import Pub, utc
from ..verdicts import BadInput, Verdict
from .deliver import Sender, claim_owed
from .machine import DROPPED, OWED, REFUSED, SENT, UNKNOWN
from .outbox import OPERATOR, Composer

# the refusals of a resend, by reason
ALREADY_SENT, NOT_UNCERTAIN, SENDING = "ALREADY_SENT", "NOT_UNCERTAIN", "RESEND_CLAIMED"

# what each kind of mail is, in the operator's words (the kinds are the features' own)
KIND_WORDS: Mapping[str, str] = {
    "schedule": "the week's schedule", "invite": "invitation to their links",
    "cover_offer": "cover offer", "cover_asked": "cover asked for",
    "cover_taken": "cover taken", "cover_cancelled": "cover called off",
    "cover_expired": "cover not taken in time",
    "remind_unanswered": "reminder: the form", "remind_shift": "reminder: their shift",
    "remind_review": "reminder: a roster to review", "remind_short": "reminder: short shift",
    "late_open": "the form opened late",
}


def kind_words(kind: str) -> str:
    """The kind in words (a nudge's own name after ``nudge:``)."""
    if kind.startswith("nudge:"):
        return "nudge: " + kind.removeprefix("nudge:").replace("_", " ")
    return KIND_WORDS.get(kind, kind.replace("_", " "))


@dataclass(frozen=True)
class Uncertain:
    """One email of unknown fate, as the operator's list shows it."""

    id: int
    kind: str
    about: str
    week_of: str | None
    to_name: str | None  # the tender's name; None: the operator
    to_address: str | None  # where it went (or would go)
    subject: str | None  # as handed over (None: the sender died before it was recorded)
    error: str | None
    owed_at: datetime

    @property
    def what(self) -> str:
        return kind_words(self.kind)

    @property
    def to(self) -> str:
        who = "the operator" if self.to_name is None else self.to_name
        return f"{who} <{self.to_address}>" if self.to_address else who

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "what": self.what, "about": self.about,
                "week_of": self.week_of, "to": self.to_address, "to_name": self.to_name,
                "subject": self.subject, "error": self.error,
                "owed_at": self.owed_at.isoformat()}


_LISTED = ("SELECT m.id, m.kind, m.about, m.week_of, m.recipient, m.address, m.subject, "
           "m.error, m.owed_at, t.name, t.email FROM pub_mail m LEFT JOIN pub_tenders t "
           "ON m.recipient = 'tender:' || t.id")


def _uncertain(pub: Pub, row: Mapping[str, Any]) -> Uncertain:
    operator = row["recipient"] == OPERATOR
    address = row["address"] or (pub.config.mail.operator_email if operator else row["email"])
    return Uncertain(int(row["id"]), str(row["kind"]), str(row["about"]),
                     None if row["week_of"] is None else str(row["week_of"]),
                     None if operator or row["name"] is None else str(row["name"]),
                     None if address is None else str(address),
                     None if row["subject"] is None else str(row["subject"]),
                     None if row["error"] is None else str(row["error"]),
                     instant(row["owed_at"]))


def unknown(pub: Pub) -> list[Uncertain]:
    """Every email of unknown fate, oldest first (none before the mail machine, 0050)."""
    if not pub.schema.mail:
        return []
    rows = pub.query(f"{_LISTED} WHERE m.state = %s ORDER BY m.id", [UNKNOWN])
    return [_uncertain(pub, r) for r in rows]


def mail_id(value: object) -> int:
    """An email's number as typed (CLI, form), or :class:`BadInput`."""
    text = str(value).strip()
    if not text.isdigit() or len(text) > 18:
        raise BadInput(f"an email's number is a whole number, as `pubsched mail unknown` "
                       f"lists it; got {value!r}")
    return int(text)


def resend(pub: Pub, number: object, composers: Mapping[str, Composer],
           now: datetime | None = None) -> Verdict:
    """Send email ``number`` again, now: for one of unknown fate (or refused); see the
    module docstring. Unknown number: BadInput; refused (``reason``): ALREADY_SENT,
    NOT_UNCERTAIN (owed and waiting its turn, or no longer needed), RESEND_CLAIMED (another
    resend or the tick is sending it right now)."""
    wanted, at = mail_id(number), utc(now)
    rows = pub.query(f"{_LISTED} WHERE m.id = %s", [wanted]) if pub.schema.mail else []
    if not rows:
        raise BadInput(f"there is no email number {wanted}: `pubsched mail unknown` lists "
                       "the ones of unknown fate")
    row = rows[0]
    seen = _uncertain(pub, row)
    key = (str(row["kind"]), str(row["about"]), str(row["recipient"]))
    what = f"Email {wanted} ({seen.what} to {seen.to})"
    composer = composers.get(key[0])
    if composer is None:
        raise BadInput(f"{what} is of a kind this version cannot write: {key[0]}")
    got = claim_owed(pub, key, resend=True)
    if isinstance(got, str):
        return _refused(got, what)
    with Sender(pub) as sender:
        verdict = sender.send(*got, composer, at, retry=False)
    if verdict.applied:
        done = ("no longer needed, so not sent" if pub.mail.state(key) == DROPPED
                else "sent again")
        return Verdict(True, message=f"{what}: {done}", detail={"id": wanted})
    why = verdict.failed or verdict.reason or "not sent"
    again = ("it may not have arrived again; it stays on the list" if verdict.reason == UNKNOWN
             else "it was not delivered")
    return Verdict(False, verdict.reason, failed=why, message=f"{what}: {again} ({why})",
                   detail={"id": wanted})


def _refused(state: str, what: str) -> Verdict:
    if state == SENT:
        return Verdict(False, ALREADY_SENT, message=f"{what} was delivered: nothing to resend")
    if state == DROPPED:
        return Verdict(False, NOT_UNCERTAIN, message=f"{what} was no longer needed: "
                                                     "nothing to resend")
    if state == "sending":
        return Verdict(False, SENDING, message=f"{what} is being sent right now (another "
                                               "resend or the tick): see the list again "
                                               "in a minute")
    assert state in (OWED, REFUSED, UNKNOWN, "missing"), state
    return Verdict(False, NOT_UNCERTAIN, message=f"{what} is waiting its turn: the next "
                                                 "tick sends it")


__all__ = ["ALREADY_SENT", "NOT_UNCERTAIN", "SENDING", "Uncertain", "kind_words", "mail_id",
           "resend", "unknown"]
