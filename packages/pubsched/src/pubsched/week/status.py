"""What the week page says first: where the week is and what the operator does next, in
the pub's words and local time (the page's opening box; the CLI's ``week show`` too).

Read from the week as ``week show --json`` describes it (:func:`pubsched.week.view.week_show`),
so the sentence and the JSON can never disagree: the state, the moments, who answered,
how many slots are filled, which skills are missing, what became of each email.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..machine import APPROVED, ASSIGNED, CLOSED, COLLECTING, DRAFT, SENT
from ..people.tenders import all_tenders
from ..pub import Pub
from ..words import BUSY, when


@dataclass(frozen=True)
class Status:
    """``now``: where the week is; ``next``: what to do about it (empty when nothing);
    ``busy``: a side effect running right now (a send), said apart; ``tone``: "ok",
    "todo" (the operator's turn) or "warn" (something needs looking at)."""

    now: str
    next: str
    busy: str
    tone: str


def _at(pub: Pub, shown: Mapping[str, Any], name: str) -> str:
    raw = shown.get(name)
    return when(datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None,
                pub.config.tz)


def _answers(pub: Pub, shown: Mapping[str, Any]) -> str:
    answered = len(shown["submissions"])
    crew = len(all_tenders(pub, active_only=True))
    if not crew:
        return "the pub has no tenders yet (add them on the Tenders page)"
    return f"{answered} of {crew} tender{'' if crew == 1 else 's'} answered"


def _roster(shown: Mapping[str, Any]) -> tuple[str, bool]:
    """How full the roster is, and whether anything is short."""
    slots = sum(int(s["slots"]) for s in shown["shifts"])
    unfilled = int(shown["unfilled"])
    missing = sorted({need for s in shown["shifts"] for need in s.get("missing", [])})
    said = (f"every slot is filled ({slots})" if not unfilled
            else f"{slots - unfilled} of {slots} slots filled, {unfilled} empty")
    if missing:
        said += f"; still needs {', '.join(missing)}"
    return said, bool(unfilled or missing)


def _away(shown: Mapping[str, Any]) -> str:
    """Who is on the roster for a night they are away (time off marked after it was
    made), as a sentence; empty when nobody."""
    names = sorted({shown.get("names", {}).get(e, e) for s in shown["shifts"]
                    for e in set(s.get("away", ())) & set(s["assigned"])})
    if not names:
        return ""
    who = ", ".join(names)
    return (f"{who} {'is' if len(names) == 1 else 'are'} on the roster for a night of "
            "their time off (marked away below).")


def week_status(pub: Pub, shown: Mapping[str, Any]) -> Status:
    """The opening sentences of the week ``shown`` (``week show --json``)."""
    state = shown["state"]
    lease = shown.get("lease")
    busy = (f"Right now {BUSY.get(lease['kind'], 'something is running')} (since "
            f"{_at(pub, lease, 'since')})." if lease else "")
    auto = bool(shown.get("autopilot"))
    if state == DRAFT:
        return Status(f"Not open yet: the form is due to open {_at(pub, shown, 'opens_at')}.",
                      "Autopilot opens it then." if auto
                      else "Open the form when you are ready.", busy, "todo")
    if state == COLLECTING:
        return Status(f"Taking availability until {_at(pub, shown, 'deadline_at')}: "
                      f"{_answers(pub, shown)}.",
                      "Autopilot closes the form then and makes the roster." if auto
                      else "Close the form at the deadline, then make the roster.",
                      busy, "ok")
    if state == CLOSED:
        return Status(f"The form is closed: {_answers(pub, shown)}.",
                      "Make the roster.", busy, "todo")
    away = _away(shown)
    if state == ASSIGNED:
        said, short = _roster(shown)
        first = ("Regenerate it so someone else is picked (a tender put on by hand stays: "
                 "take them off), then check it" if away else
                 "Check it below (put a tender on or take one off by hand if needed), then "
                 "approve it")
        return Status(f"The roster is made: {said}.{' ' + away if away else ''}",
                      f"{first}. Send it before {_at(pub, shown, 'send_window_at')}.",
                      busy, "warn" if short or away else "todo")
    if state == APPROVED:
        if away:
            return Status(f"The roster is approved, not sent yet. {away}",
                          "Un-approve it and regenerate it so someone else is picked, then "
                          f"send it before {_at(pub, shown, 'send_window_at')}.", busy, "warn")
        return Status("The roster is approved, not sent yet.",
                      f"Send it before {_at(pub, shown, 'send_window_at')}.", busy, "todo")
    if state == SENT:
        sent = _sent(shown, busy)
        if not away:
            return sent
        return Status(f"{sent.now} {away}",
                      " ".join(p for p in (sent.next, "Ask for cover for those shifts "
                                           "(their page, or `pubsched cover ask`).") if p),
                      busy, "warn")
    return Status(f"The week is {state}.", "", busy, "warn")


def _sent(shown: Mapping[str, Any], busy: str) -> Status:
    fates = [d["status"] for d in shown["deliveries"]]
    sent = fates.count("sent")
    uncertain, failed = fates.count("in_flight"), fates.count("failed")
    now = f"Sent: {sent} tender{'' if sent == 1 else 's'} got the schedule."
    if not (uncertain or failed):
        return Status(now, "", busy, "ok")
    trouble = ", ".join(part for part in (
        f"{failed} failed" if failed else "",
        f"{uncertain} uncertain (the mail server never answered)" if uncertain else "")
        if part)
    return Status(f"{now} {trouble.capitalize()}.",
                  "See the deliveries below: resend to each one on purpose.", busy, "warn")


__all__ = ["Status", "week_status"]
