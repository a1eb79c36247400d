"""What the operator reads after an action: the engine's verdict said in the pub's words and
local time, with the zone, never the machine's vocabulary.

The engines answer in their own terms (``2026-12-14 -> COLLECTING``, ``refused:
INVARIANT``), which is what a log or a test wants. A person wants to know what happened
and what to do next: "The form for the week of 14 Dec is open until Wed 9 Dec, 20:00 EST",
"Another week's form is open (the week of 7 Dec): close it first". :func:`told` turns one
into the other; :func:`pubsched.engines.actions.perform` applies it, so the CLI and the web
say the same sentence. The reason code stays on the verdict (the CLI prints it beside the
words, scripts test it), and the engine's own text stays in ``detail["engine_message"]``.

Wording does no I/O: what a sentence needs of the week (its state and moments as the
engine in charge reads them, the other week whose form is open) is read by the caller and
handed over as :class:`WeekFacts` (:func:`pubsched.engines.facts.week_facts`), so the words
can be tested, and changed, without a database.

The states as people say them (:data:`STATE_WORDS`) are also what the pages show.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, tzinfo

from .machine import APPROVED, ASSIGNED, CLOSED, COLLECTING, DRAFT, SENT
from .verdicts import Verdict

# what a week in each state is, after "the week of 14 Dec ..."
STATE_WORDS: Mapping[str, str] = {
    DRAFT: "is a draft: its form is not open yet",
    COLLECTING: "is taking availability: its form is open",
    CLOSED: "has its form closed and no roster yet",
    ASSIGNED: "has a roster waiting for your approval",
    APPROVED: "has an approved roster, not sent yet",
    SENT: "was sent already: it is done",
}
# each state's name on a page (a badge, a list of weeks)
STATE_LABELS: Mapping[str, str] = {
    DRAFT: "Draft", COLLECTING: "Taking availability", CLOSED: "Form closed",
    ASSIGNED: "Roster to approve", APPROVED: "Approved, not sent", SENT: "Sent",
}
# what an action does, after "cannot ..."
DOING: Mapping[str, str] = {
    "create": "create", "open": "open the form for", "extend": "extend the deadline of",
    "close": "close the form for", "reopen": "reopen the form for",
    "generate": "make the roster for", "approve": "approve the roster of",
    "unapprove": "take back the approval of", "send": "send the schedule of",
    "autopilot": "change autopilot for", "resend": "resend the schedule of",
}
# what a live lease is doing, as "... right now"
BUSY: Mapping[str, str] = {
    "close": "the form is being closed", "generate": "the roster is being made",
    "send": "the schedule is being sent",
}


# -- cover requests: the reasons a request or a take is refused (the Verdict's ``reason``),
# each said with what to do next; the facts are filled in by pubsched.covers
WEEK_NOT_SENT = "WEEK_NOT_SENT"
NOT_ON_SHIFT = "NOT_ON_SHIFT"
SHIFT_STARTED = "SHIFT_STARTED"
ALREADY_ASKED = "ALREADY_ASKED"
COVER_TAKEN = "COVER_TAKEN"
COVER_CANCELLED = "COVER_CANCELLED"
COVER_EXPIRED = "COVER_EXPIRED"
OWN_REQUEST = "OWN_REQUEST"
CANNOT_TAKE = "CANNOT_TAKE"
COVER_REFUSALS: Mapping[str, str] = {
    WEEK_NOT_SENT: "The schedule for {week} is not sent yet, so its roster can still "
                   "change: change the roster instead of asking for cover.",
    NOT_ON_SHIFT: "{who} is not on {shift}: only someone working a shift can ask for "
                  "cover for it.",
    SHIFT_STARTED: "{shift} has already started: it is too late for a cover request.",
    ALREADY_ASKED: "{who} has already asked for cover for {shift} (request {id}): it is "
                   "still open.",
    COVER_TAKEN: "Request {id} ({shift}) was already taken by {taker}: nothing changed.",
    COVER_CANCELLED: "Request {id} ({shift}) was called off: {asker} still works it.",
    COVER_EXPIRED: "Request {id} ({shift}) ended when the shift started, with nobody found.",
    OWN_REQUEST: "{who} asked for this cover, so cannot take it: to stay on {shift}, call "
                 "the request off.",
    CANNOT_TAKE: "{who} cannot take {shift}: {why}.",
}
# why a tender is not offered a cover (CANNOT_TAKE's {why}), in the order they are judged
NOT_ACTIVE = "they are not an active tender"
AWAY = "they are away that day"
SAME_NIGHT = "they already work that night"
SAME_TIME = "they already work a shift at that time"
AT_MOST = "they already have as many shifts that week as they can work ({most})"
LACKS_SKILL = "the shift needs {skills}, which they do not have"
# a request's state on a page or in a listing
COVER_STATE_LABELS: Mapping[str, str] = {
    "OPEN": "Looking for cover", "TAKEN": "Covered", "CANCELLED": "Called off",
    "EXPIRED": "Nobody found",
}


def cover_refusal(reason: str, **facts: object) -> str:
    """A cover refusal's sentence, the request's facts filled in."""
    return COVER_REFUSALS[reason].format(**facts)


def when(instant: datetime | None, tz: tzinfo) -> str:
    """An instant in the pub's zone as people write it, the zone named: ``Wed 9 Dec, 20:00
    EST``. No year: every moment an operator is told about is within weeks of now."""
    if instant is None:
        return "(not set)"
    here = instant.astimezone(tz)
    return f"{here:%a} {here.day} {here:%b}, {here:%H:%M} {here.tzname()}"


def week_words(week: str) -> str:
    """``2026-12-14`` as ``the week of 14 Dec``."""
    monday = date.fromisoformat(week)
    return f"the week of {monday.day} {monday:%b}"


@dataclass(frozen=True)
class WeekFacts:
    """What the words of a verdict on a week may need, read by the caller: the pub's zone;
    the week's state and its four moments (``opens_at``, ``deadline_at``, ``generate_at``,
    ``send_window_at``) as the engine in charge reads them, and the kind of side effect
    running on it (``acting_kind``), all empty for a week that does not exist; and, for a
    refusal by the one-open-form invariant, the other week whose form is open."""

    tz: tzinfo
    state: str | None = None
    times: Mapping[str, datetime | None] = field(default_factory=dict)
    acting_kind: str | None = None
    open_week: str | None = None


def told(name: str, week: str, verdict: Verdict, facts: WeekFacts) -> Verdict:
    """The verdict of action ``name`` on ``week`` with its message in the operator's words
    (the engine's text kept in ``detail["engine_message"]``)."""
    say = _APPLIED.get(name) if verdict.applied else None
    if say is not None:
        text = say(_Facts(week, verdict, facts))
    elif verdict.applied:
        return verdict
    else:
        refused = _refusal(_Facts(week, verdict, facts), name)
        if refused is None:
            return verdict
        text = refused
    # what the operator must know besides (a shift the clocks moved: week.time.clocks)
    text += "".join(f"\nNote: {note}" for note in verdict.detail.get("notes") or ())
    return replace(verdict, message=text,
                   detail={**verdict.detail, "engine_message": verdict.message})


class _Facts:
    """What a sentence may say: the week's name, the verdict, the facts read for it."""

    def __init__(self, week: str, verdict: Verdict, facts: WeekFacts) -> None:
        self.key = week
        self.week = week_words(week)
        self.Week = self.week[0].upper() + self.week[1:]  # a sentence's first words
        self.verdict = verdict
        self.detail = verdict.detail
        self.facts = facts
        self.state = facts.state

    def at(self, moment: str) -> str:
        return when(self.facts.times.get(moment), self.facts.tz)


def _filled(f: _Facts) -> str:
    filled, unfilled = f.detail.get("filled"), f.detail.get("unfilled")
    if filled is None:
        return ""
    if not unfilled:
        return f": every slot is filled ({filled})"
    return f": {filled} of {filled + unfilled} slots filled, {unfilled} left empty"


def _sent(f: _Facts) -> str:
    sent = int(f.detail.get("sent") or 0)
    uncertain = len(f.detail.get("uncertain") or [])
    text = f"The schedule for {f.week} is sent ({sent} email{'' if sent == 1 else 's'} delivered"
    return text + (f", {uncertain} uncertain)." if uncertain else ").")


_APPLIED: Mapping[str, Callable[[_Facts], str]] = {
    "create": lambda f: f"{f.Week} is created as a draft with {f.detail.get('shifts', 0)} "
                        f"shifts: open its form when you are ready (it is due to open "
                        f"{f.at('opens_at')}).",
    "open": lambda f: f"The form for {f.week} is open until {f.at('deadline_at')}.",
    "extend": lambda f: f"The form for {f.week} now stays open until {f.at('deadline_at')}.",
    "close": lambda f: f"The form for {f.week} is closed: make the roster next.",
    "reopen": lambda f: f"The form for {f.week} is open again until {f.at('deadline_at')}.",
    "generate": lambda f: f"The roster for {f.week} is made{_filled(f)}. Check it, then "
                          "approve it.",
    "approve": lambda f: f"The roster for {f.week} is approved: send it before "
                         f"{f.at('send_window_at')}.",
    "unapprove": lambda f: f"The roster for {f.week} is no longer approved: change it, then "
                           "approve it again.",
    "send": _sent,
    "autopilot": lambda f: (
        f"Autopilot is on for {f.week}: the form closes and the roster is made on time; "
        "you approve and send." if f.detail.get("autopilot")
        else f"Autopilot is off for {f.week}: you close the form and make the roster."),
}


def _refusal(f: _Facts, name: str) -> str | None:
    """A refusal's sentence, or None to keep the engine's own (a reason with its own words,
    e.g. a resend's)."""
    doing = DOING.get(name, name)
    reason = f.verdict.reason
    if f.verdict.failed:
        return _failure(f, name)
    if reason == "INVARIANT":
        other = f.facts.open_week
        named = f" ({week_words(other)})" if other else ""
        return f"Another week's form is open{named}: close it first."
    if reason == "STATE_MISMATCH" and f.state is not None:
        return f"Cannot {doing} {f.week}: it {STATE_WORDS.get(f.state, f.state)}."
    if reason == "LEASE_HELD":
        kind = BUSY.get(f.facts.acting_kind or "", "something is running on it")
        return f"Cannot {doing} {f.week} right now: {kind}. Wait a minute and look again."
    if reason == "FLAG_CHANGED":
        return (f"Nothing was done to {f.week}: the scheduler switched engines while this "
                "ran. Try again.")
    if reason == "NOT_IN_LEGACY":
        return ("Autopilot needs the new engine: switch to it on the cutover page first "
                "(the old one opens, closes and makes every roster at its times).")
    if reason == "WEEK_EXISTS":
        return f"{f.Week} exists already: nothing changed."
    return None


def _failure(f: _Facts, name: str) -> str:
    """An action that ran and failed: for a send, who did not get it, never an exception's
    text (each recipient's reason is on the week's page)."""
    failed = [str(entry).partition(": ")[0] for entry in f.detail.get("failed") or []]
    if name == "send" and failed:
        sent = int(f.detail.get("sent") or 0)
        named = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3
                                         else "")
        return (f"The schedule for {f.week} did not reach {len(failed)} "
                f"tender{'' if len(failed) == 1 else 's'} ({named}); {sent} got it. Each "
                f"one's reason is on the week's page (`pubsched week show {f.key}`); fix "
                "it, then send again: only those are mailed.")
    return (f"Could not {DOING.get(name, name)} {f.week}; nothing changed. Try again; if it "
            "keeps failing, the reason is on the week's page.")


__all__ = ["ALREADY_ASKED", "AT_MOST", "AWAY", "BUSY", "CANNOT_TAKE", "COVER_CANCELLED",
           "COVER_EXPIRED", "COVER_REFUSALS", "COVER_STATE_LABELS", "COVER_TAKEN", "DOING",
           "LACKS_SKILL", "NOT_ACTIVE", "NOT_ON_SHIFT", "OWN_REQUEST", "SAME_NIGHT", "SAME_TIME",
           "SHIFT_STARTED", "STATE_LABELS", "STATE_WORDS", "WEEK_NOT_SENT", "WeekFacts",
           "cover_refusal", "told", "week_words", "when"]
