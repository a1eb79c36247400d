"""The rehearsal's steps: one complete real lifecycle of a week on the v2 engine, on the
throwaway copy (:mod:`.scratch`), the seed's "open -> extend -> close -> generate -> reopen
-> regenerate -> approve -> send" with the tenders' answers between the extension and the
close (so the roster the picker fills, and the email each tender would get, are real).

Each step is the v2 engine's own action at the caller's instant (operator actions are not
time-gated), and each checks its outcome, not just that it was applied: the state the week
reached, the deadline moved, every tender answered, every slot the answers can fill
filled, every email handed to the operator's server. A step either returns its message in
the operator's words or raises :class:`StepFailed` with why: the rehearsal stops there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from ..db.instants import maybe_instant
from ..engines import v2
from ..engines.facts import in_words
from ..machine import APPROVED, ASSIGNED, CLOSED, COLLECTING, SENT
from ..people import tenders
from ..pub import Pub
from ..verdicts import BadInput, Verdict
from ..week import runs as weeks
from ..week import submissions
from ..week.send import deliveries
from ..week.time import as_utc


class StepFailed(Exception):
    """A step did not reach what it checks; the message says what happened instead."""


@dataclass(frozen=True)
class Step:
    """``name``: the step's word in the record; ``words(week)``: what it does, said to the
    operator; ``run(copy, week, now)``: does it, returns what happened."""

    name: str
    words: Callable[[str], str]
    run: Callable[[Pub, str, datetime], str]


def next_week(pub: Pub, now: datetime) -> str:
    """The Monday after the one of ``now``'s week, in the pub's zone: the week an operator
    prepares (the copy has no weeks, so nothing is in its way)."""
    today = as_utc(now).astimezone(pub.config.tz).date()
    return (today - timedelta(days=today.weekday()) + timedelta(days=7)).isoformat()


def day(week: str) -> str:
    monday = date.fromisoformat(week)
    return f"{monday.day} {monday:%b}"


def _state(copy: Pub, week: str) -> str | None:
    return copy.runs.state(week)


def _expect(copy: Pub, week: str, got: Verdict, state: str, action: str) -> str:
    """The verdict of ``action`` applied and the week in ``state``, or the step fails with
    the refusal in the operator's words (:func:`pubsched.engines.facts.in_words`)."""
    if not got.applied:
        said = in_words(copy, action, week, got)
        raise StepFailed(said.message or got.failed or got.reason or "refused")
    reached = _state(copy, week)
    if reached != state:
        raise StepFailed(f"the week is {reached}, not {state}")
    return got.message


def _open(copy: Pub, week: str, now: datetime) -> str:
    _expect(copy, week, v2.open_form(copy, week, now=now), COLLECTING, "open")
    return f"the form is open, {len(weeks.shifts(copy, week))} shifts"


def _extend(copy: Pub, week: str, now: datetime) -> str:
    before = _deadline(copy, week)
    if before is None:
        raise StepFailed("the week has no deadline to extend")
    wanted = before + timedelta(days=1)
    try:
        got = v2.extend(copy, week, wanted, now=now)
    except BadInput as exc:
        raise StepFailed(str(exc)) from None
    _expect(copy, week, got, COLLECTING, "extend")
    after = _deadline(copy, week)
    if after != wanted:
        raise StepFailed(f"the deadline is {after}, not {wanted}")
    local = wanted.astimezone(copy.config.tz)
    return f"the deadline is now {local:%a} {local.day} {local:%b %H:%M %Z}"


def _deadline(copy: Pub, week: str) -> datetime | None:
    """The week's deadline column, read back as an aware instant on either database."""
    return maybe_instant((copy.runs.get(week) or {}).get("deadline_at"))


def _answers(copy: Pub, week: str, now: datetime) -> str:
    crew = tenders.all_tenders(copy, active_only=True)
    if not crew:
        raise StepFailed("the pub has no active tenders to rehearse with")
    ids = [s.id for s in weeks.shifts(copy, week)]
    for tender in crew:
        got = submissions.submit(copy, week, tender.email, ids, now=now)
        if not got.applied:
            raise StepFailed(f"{tender.email}: {got.message or got.reason}")
    return f"{len(crew)} tender(s) can work all {len(ids)} shifts"


def _close(copy: Pub, week: str, now: datetime) -> str:
    _expect(copy, week, v2.close(copy, week, now=now), CLOSED, "close")
    return "the form is closed"


def _generated(copy: Pub, week: str, got: Verdict) -> str:
    _expect(copy, week, got, ASSIGNED, "generate")
    filled, unfilled = got.detail.get("filled", 0), got.detail.get("unfilled", 0)
    if not filled:
        raise StepFailed(f"the roster filled no slot ({unfilled} unfilled)")
    return f"{filled} slot(s) filled, {unfilled} unfilled"


def _generate(copy: Pub, week: str, now: datetime) -> str:
    return _generated(copy, week, v2.generate(copy, week, now=now))


def _reopen(copy: Pub, week: str, now: datetime) -> str:
    _expect(copy, week, v2.reopen(copy, week, now=now), COLLECTING, "reopen")
    return "open again, the roster kept"


def _regenerate(copy: Pub, week: str, now: datetime) -> str:
    _expect(copy, week, v2.close(copy, week, now=now), CLOSED, "close")
    return "closed again; " + _generated(copy, week, v2.generate(copy, week, now=now))


def _approve(copy: Pub, week: str, now: datetime) -> str:
    _expect(copy, week, v2.approve(copy, week, now=now), APPROVED, "approve")
    return "the roster is approved"


def _send(copy: Pub, week: str, now: datetime) -> str:
    got = v2.send(copy, week, now=now)
    detail: dict[str, Any] = dict(got.detail)
    if detail.get("failed"):
        raise StepFailed("not every email was accepted: " + "; ".join(detail["failed"]))
    if detail.get("uncertain"):
        raise StepFailed("the mail server never answered for "
                         + ", ".join(detail["uncertain"]))
    _expect(copy, week, got, SENT, "send")
    rows = list(deliveries(copy, week).values())
    unsent = [str(r["email"]) for r in rows if r["status"] != "sent"]
    if not rows or unsent:
        raise StepFailed(f"not delivered: {', '.join(unsent) or 'nobody was mailed'}")
    operator = copy.config.mail.operator_email
    return f"{len(rows)} email(s), every one to {operator}"


STEPS: tuple[Step, ...] = (
    Step("open", lambda w: f"open the form for the week of {day(w)}", _open),
    Step("extend", lambda w: "extend the deadline by a day", _extend),
    Step("answers", lambda w: "every tender answers (all shifts)", _answers),
    Step("close", lambda w: "close the form", _close),
    Step("generate", lambda w: "generate the roster", _generate),
    Step("reopen", lambda w: "reopen the form", _reopen),
    Step("regenerate", lambda w: "close and regenerate the roster", _regenerate),
    Step("approve", lambda w: "approve the roster", _approve),
    Step("send", lambda w: "send the schedule (to the operator only)", _send),
)
