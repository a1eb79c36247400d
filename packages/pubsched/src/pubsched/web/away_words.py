"""What the time-off forms say (:mod:`.away`): to a tender whose time off was refused, on
the tender's page after one was saved (``?saved=...``, read by :mod:`.tender`), and bad
input in the form's words. A module of its own so that the tender's page can say it
without importing the handlers, which import the page."""

from __future__ import annotations

from typing import Any

from ..verdicts import Verdict
from .forms import text

NOTICES = {"away": "Your time off is saved.", "back": "Your time off is cancelled."}


def dates(form: Any) -> tuple[str, str]:
    return (text(form, "from") or "").strip(), (text(form, "to") or "").strip()


def tender_refusal(outcome: Verdict) -> str:
    """A refused time off, said to the tender."""
    if outcome.reason == "ON_THE_ROSTER":
        shifts = "; ".join(str(s["when"]) for s in outcome.detail.get("shifts", ()))
        return (f"You are on the schedule already sent for {shifts}. Ask for cover for "
                "that shift first, then mark your time off. Nothing was saved.")
    if outcome.reason == "OVERLAPS":
        return ("This overlaps time off you already have (listed below): cancel that one "
                "first, then mark the whole time off. Nothing was saved.")
    if outcome.reason == "NO_TIME_OFF":
        return "That time off was already cancelled."
    return "Your time off could not be saved just now: please try again in a minute."


def in_words(problem: str) -> str:
    """Bad input as a person reads it: the form's fields, not the CLI's FROM and TO."""
    return (problem.replace("FROM is a date YYYY-MM-DD, got None", "give the first day away")
            .replace("TO is a date YYYY-MM-DD, got None", "give the last day away")
            .replace("FROM is a date", "the first day is a date")
            .replace("TO is a date", "the last day is a date"))


def notice(saved: str | None) -> str | None:
    """The tender page's line after a time-off form (``?saved=...``)."""
    if saved == "away-warned":
        return ("Your time off is saved. You were on the roster being planned for one of "
                "those nights: the operator will see it and plan it again without you.")
    return NOTICES.get(saved or "")


__all__ = ["NOTICES", "dates", "in_words", "notice", "tender_refusal"]
