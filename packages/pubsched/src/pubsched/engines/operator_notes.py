"""The v2 tick's notes to the operator, as mail of the mail machine: the manual-mode
nudges ("ready to close and generate?" past the deadline, "approved but not sent" past
the send window) and the word that autopilot opened a form late and moved its deadline.

The tick owes each one (:func:`owe_nudge`, :func:`owe_late_open`), once per week, and the
deliveries send it (:data:`COMPOSERS`), so a note the mail server refused is tried again
after its wait and one whose fate is unknown is never sent twice. A nudge no longer true at
its turn (the operator closed the form, or sent the week, meanwhile) is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from ..db.instants import instant, maybe_instant
from ..deliveries.outbox import OPERATOR, Composer, Mail, NotSentYet, facts_of, owe
from ..machine import APPROVED, COLLECTING
from ..mail.compose import Nudge, Outgoing, compose_late_open, compose_nudge
from ..pub import Pub

LATE_OPEN = "late_open"
NUDGE_KIND = {Nudge.READY_TO_CLOSE: "nudge:ready_to_close",
              Nudge.APPROVED_NOT_SENT: "nudge:approved_not_sent"}
# the state a nudge is about, and the moment that passed in it
_NUDGE_FACTS = {Nudge.READY_TO_CLOSE: (COLLECTING, "deadline_at"),
                Nudge.APPROVED_NOT_SENT: (APPROVED, "send_window_at")}


def owe_nudge(pub: Pub, kind: Nudge, week: str, now: datetime) -> bool:
    """Owe the week's nudge (False: owed before: once per week)."""
    return owe(pub, NUDGE_KIND[kind], week, OPERATOR, week_of=week, now=now)


def owe_late_open(pub: Pub, week: str, *, old_deadline: datetime | None,
                  new_deadline: datetime, now: datetime) -> bool:
    """Owe the note that the form opened late, in the open's unit of work."""
    facts = {"old_deadline": None if old_deadline is None else old_deadline.isoformat(),
             "new_deadline": new_deadline.isoformat(), "opened_at": now.isoformat()}
    return owe(pub, LATE_OPEN, week, OPERATOR, week_of=week, now=now, facts=facts)


def week_page(pub: Pub, week: str) -> str:
    """The week's page in the admin, the link an operator's note carries."""
    return f"{pub.config.base_url.rstrip('/')}/admin/weeks/{week}"


def _operator_address(pub: Pub, what: str) -> None:
    if pub.config.mail.operator_email is None:
        raise NotSentYet(f"the {what} has nowhere to go: set PUBSCHED_OPERATOR_EMAIL")


def _nudge(kind: Nudge) -> Composer:
    state, moment = _NUDGE_FACTS[kind]

    def compose(pub: Pub, mail: Mail, at: datetime) -> Outgoing | None:
        row = pub.runs.get(mail.about)
        if row is None or row.get("v2_state") != state:
            return None  # the operator did it meanwhile
        _operator_address(pub, f"{kind.value!r} reminder for the week of {mail.about}")
        due_at = maybe_instant(row.get(moment)) or at
        return compose_nudge(kind, date.fromisoformat(mail.about), due_at=due_at,
                             tz=pub.config.tz.key, settings=pub.config.mail, now=at,
                             admin_url=week_page(pub, mail.about))
    return compose


def _late_open(pub: Pub, mail: Mail, at: datetime) -> Outgoing:
    _operator_address(pub, f"note that the week of {mail.about} opened late")
    facts: Mapping[str, Any] = facts_of(pub, mail)
    old = facts.get("old_deadline")
    return compose_late_open(
        date.fromisoformat(mail.about), opened_at=instant(facts["opened_at"]),
        old_deadline=None if old is None else instant(old),
        new_deadline=instant(facts["new_deadline"]), tz=pub.config.tz.key,
        settings=pub.config.mail, now=at, admin_url=week_page(pub, mail.about))


COMPOSERS: Mapping[str, Composer] = {
    **{name: _nudge(kind) for kind, name in NUDGE_KIND.items()}, LATE_OPEN: _late_open}

__all__ = ["COMPOSERS", "LATE_OPEN", "NUDGE_KIND", "owe_late_open", "owe_nudge", "week_page"]
