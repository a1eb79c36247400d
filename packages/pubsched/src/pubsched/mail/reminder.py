"""The reminders' emails (:mod:`pubsched.tick.reminders` decides who is owed one and when; this
module only decides how it reads). No I/O, no clock: the input is small frozen values and
``now``, so the same facts give the same message.

Four messages, each plain text and HTML saying the same things in the same order, the
pub's name first, times in the pub's zone as :mod:`.wording` writes them:

* to a tender who has not answered an open form, before its deadline: the week, the
  deadline, a button to their page (the form is there);
* to a tender before each of their shifts: the shift, who works it with them, their page,
  and how to stop these reminders (the switch on their page);
* to the operator, when autopilot has made a roster that waits for review: how full it is,
  what it still needs, the send window;
* to the operator, before a shift of a sent week that is short (fewer people than slots,
  or a cover nobody has taken): who is on, what is missing.

Every message ends in :func:`.compose.addressed`, so rehearsal redirects these as it does
every other email.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from email.message import EmailMessage

from . import html as h
from .compose import addressed, operator_note
from .settings import MailSettings
from .values import Outgoing, Recipient, ShiftLine
from .wording import day, moment, shift_text, zone, zone_words


def hours_words(hours: float) -> str:
    """``6 hours``, ``1 hour``, ``1.5 hours``: a lead as a person says it."""
    return f"{hours:g} hour{'' if hours == 1 else 's'}"


def when_words(starts_at: datetime, now: datetime, tz: str) -> str:
    """``today at 18:00``, ``tomorrow at 18:00`` or ``on Thu 10 Dec at 18:00``, by the
    pub's calendar (the day the reader is in when the email arrives)."""
    start, today = starts_at.astimezone(zone(tz)), now.astimezone(zone(tz)).date()
    clock = f"{start:%H:%M}"
    if start.date() == today:
        return f"today at {clock}"
    if (start.date() - today).days == 1:
        return f"tomorrow at {clock}"
    return f"on {start:%a} {start.day} {start:%b} at {clock}"


def _names(names: Sequence[str]) -> str:
    """``Ann``, ``Ann and Bo``, ``Ann, Bo and Cy``."""
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


Said = str | tuple[str, h.Html]
"""One part of a tender's message: a paragraph, or its plain text and its HTML when the
HTML is more than a paragraph (a shift drawn as a card)."""


def _plain(part: Said) -> str:
    return part if isinstance(part, str) else part[0]


def _tender_message(pub: str, title: str, parts: Sequence[Said], page_url: str,
                    button: str, after: Sequence[Said]) -> EmailMessage:
    """A tender's short message: the parts, their page as a button (and written out, for
    mail read as text), then the ``after`` lines in small print."""
    markup = [h.paragraph(p) if isinstance(p, str) else p[1] for p in parts]
    message = EmailMessage()
    message.set_content("\n\n".join([pub, *map(_plain, parts), f"{button}:\n  {page_url}",
                                      *map(_plain, after)]) + "\n", cte="quoted-printable")
    message.add_alternative(
        h.page(title, pub, [*markup, h.button(page_url, button)],
               footer=[*(p if isinstance(p, str) else p[1] for p in after),
                       h.join("Your page: ", h.link(page_url))]),
        subtype="html", cte="quoted-printable")
    return message


# -- to a tender -----------------------------------------------------------------------------


def compose_unanswered(tender: Recipient, week_of: date, *, deadline: datetime, tz: str,
                       page_url: str, settings: MailSettings, now: datetime,
                       usual: bool = False, was: datetime | None = None,
                       answered: bool = False) -> Outgoing:
    """"Which shifts can you work?" to ``tender``, who has not answered the form of
    ``week_of`` that closes at ``deadline`` (``usual``: they saved a usual answer, which
    the close uses for them if they do not answer). Its Message-ID names the deadline:
    after an extension the reminder before the new deadline is a new message.

    ``was``: the deadline an earlier reminder told them, which has moved since: the email
    then says the form now closes at ``deadline``, not ``was`` (``answered``: their answer
    is in, and they may change it until then)."""
    if was is not None:
        return _deadline_moved(tender, week_of, deadline=deadline, was=was, tz=tz,
                               page_url=page_url, settings=settings, now=now,
                               answered=answered)
    pub, week, by = settings.pub_name, day(week_of), moment(deadline, tz)
    parts: list[Said] = [
        f"Hi {tender.name},",
        f"The availability form for the week of {week} closes {by}, and your answer is "
        "not in yet. Which shifts can you work?",
        "Tick the shifts you can do and send the form. If you can work none of them, "
        "send it with nothing ticked, so the roster is made knowing that.",
    ]
    if usual:
        parts.append("If you do not answer by then, your usual answer is used for you; the "
                     "form starts from it.")
    message = _tender_message(pub, f"{pub}: which shifts can you work?", parts, page_url,
                              "Open your form", ["You get this reminder only while you have "
                                                 "not answered."])
    return addressed(message, tender, f"{pub}: which shifts can you work? The form closes "
                     f"{by}", settings=settings, now=now,
                     message_key=f"remind-form.{week_of.isoformat()}."
                                 f"{int(deadline.timestamp())}")


def _deadline_moved(tender: Recipient, week_of: date, *, deadline: datetime, was: datetime,
                    tz: str, page_url: str, settings: MailSettings, now: datetime,
                    answered: bool) -> Outgoing:
    """The form reminder to one who was told another deadline: the new one, once."""
    pub, week, by = settings.pub_name, day(week_of), moment(deadline, tz)
    parts: list[Said] = [
        f"Hi {tender.name},",
        f"The availability form for the week of {week} now closes {by}, not "
        f"{moment(was, tz)} as we wrote before.",
        "Your answer is in: you can still change it until then." if answered else
        "Your answer is not in yet. Which shifts can you work? Tick the shifts you can do "
        "and send the form (with nothing ticked if you can work none of them).",
    ]
    message = _tender_message(pub, f"{pub}: the form now closes {by}", parts, page_url,
                              "Open your form", ["You get this because the deadline we "
                                                 "told you has moved."])
    # short, so the header is never folded: the week, the new and the old deadline
    key = f"remind-moved.{week_of:%y%m%d}.{_b36(deadline)}.{_b36(was)}"
    return addressed(message, tender, f"{pub}: the form now closes {by}", settings=settings,
                     now=now, message_key=key)


def _b36(at: datetime) -> str:
    """An instant's Unix seconds in base 36 (six letters for our centuries)."""
    n, out = int(at.timestamp()), ""
    while True:
        n, digit = divmod(n, 36)
        out = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + out
        if not n:
            return out


def compose_shift_reminder(tender: Recipient, shift: ShiftLine, *, lead_hours: float,
                           page_url: str, settings: MailSettings, now: datetime,
                           cover_asked: bool = False) -> Outgoing:
    """The reminder to ``tender`` of their ``shift`` (``shift.assigned``: every name on it,
    theirs included), sent ``lead_hours`` before it starts. ``cover_asked``: they asked for
    cover and nobody has taken it, so they are still on it, and the message says so."""
    pub = settings.pub_name
    said = shift_text(shift.label, shift.starts_at, shift.ends_at, shift.tz)
    where = zone_words(shift.tz, [shift.starts_at])
    others = [n for n in shift.assigned if n != tender.name]
    company = f"With {_names(others)}." if others else "Nobody else is on this shift."
    starts = when_words(shift.starts_at, now, shift.tz)
    parts: list[Said] = [
        f"Hi {tender.name},",
        f"A reminder: your shift at {pub} starts {starts}.",
        (f"  {said}\n  {company}\n  Times are {where}.",
         h.stacked([(said, f"{company} Times are {where}.")])),
    ]
    if cover_asked:
        parts.append("You asked for cover and nobody has taken it yet, so you are still on "
                     "this shift.")
    parts.append("Can't make it after all? Ask for cover on your page, as soon as you can.")
    if settings.pub_address:
        parts.append(f"Where: {pub}, {settings.pub_address}.")
    every = f"You get this email {hours_words(lead_hours)} before each of your shifts."
    switch = f"{page_url}#reminders"  # the section of their page with the switch
    after: list[Said] = [(f"{every} Don't want it? Switch these reminders off on your page:"
                          f"\n  {switch}",
                          h.join(f"{every} Don't want it? ",
                                 h.link(switch, "Switch these reminders off"),
                                 " on your page."))]
    message = _tender_message(pub, f"{pub}: your shift {starts}", parts, page_url,
                              "Open your page", after)
    return addressed(message, tender, f"{pub}: your shift {starts}", settings=settings,
                     now=now, message_key=f"remind-shift.{shift.id}")


# -- to the operator -------------------------------------------------------------------------


@dataclass(frozen=True)
class RosterState:
    """How full a made roster is, as the review note says it."""

    filled: int
    slots: int
    missing: tuple[str, ...] = ()  # skills some shift still needs

    def words(self) -> str:
        said = (f"every slot is filled ({self.slots})" if self.filled >= self.slots
                else f"{self.filled} of {self.slots} slots filled, "
                     f"{self.slots - self.filled} empty")
        if self.missing:
            said += f"; it still needs {', '.join(self.missing)}"
        return said


def _operator(settings: MailSettings) -> Recipient:
    if settings.operator_email is None:
        raise ValueError("this note goes to the operator: set PUBSCHED_OPERATOR_EMAIL")
    return Recipient(settings.operator_email, "Operator")


def compose_review(week_of: date, roster: RosterState, *, generated_at: datetime,
                   send_by: datetime | None, tz: str, settings: MailSettings,
                   now: datetime, admin_url: str) -> Outgoing:
    """"The roster is made, over to you" to the operator: autopilot made the roster of
    ``week_of`` at ``generated_at`` and never approves or sends it."""
    operator = _operator(settings)
    pub, week = settings.pub_name, day(week_of)
    send = f" before {moment(send_by, tz)}" if send_by is not None else ""
    message = operator_note(pub, [
        f"Autopilot made the roster for the week of {week} at {moment(generated_at, tz)}: "
        f"{roster.words()}.",
        "It waits for you: check it (put a tender on or take one off by hand if needed), "
        f"then approve it and send it{send}. Autopilot never approves or sends.",
    ], admin_url, button="Review the roster")
    return addressed(message, operator, f"{pub}, week of {week}: a roster to review",
                     settings=settings, now=now,
                     message_key=f"remind-review.{week_of.isoformat()}")


def compose_short(shift: ShiftLine, week_of: date, *, open_covers: Sequence[str],
                  settings: MailSettings, now: datetime, admin_url: str) -> Outgoing:
    """"This shift is short" to the operator: ``shift`` (its ``assigned`` names and
    ``slots``) starts soon with fewer people than it needs, or with ``open_covers`` (the
    names of those who asked for cover that nobody has taken)."""
    operator = _operator(settings)
    pub = settings.pub_name
    said = shift_text(shift.label, shift.starts_at, shift.ends_at, shift.tz)
    slots = shift.slots or 0
    on = len(shift.assigned)
    who = f" ({_names(list(shift.assigned))})" if shift.assigned else ""
    paragraphs = [f"{said} starts {when_words(shift.starts_at, now, shift.tz)} and is "
                  f"short. Times are {zone_words(shift.tz, [shift.starts_at])}."]
    if on < slots:
        paragraphs.append(f"{on} of {slots} on the roster{who}: "
                          f"{slots - on} more needed.")
    for name in open_covers:
        paragraphs.append(f"{name} asked for cover and nobody has taken it yet.")
    paragraphs.append("Find someone to work it; the week's page shows who is on.")
    message = operator_note(pub, paragraphs, admin_url)
    start = shift.starts_at.astimezone(zone(shift.tz))
    return addressed(message, operator, f"{pub}: {start:%a} {start.day} {start:%b} "
                     f"{start:%H:%M} is short", settings=settings, now=now,
                     message_key=f"remind-short.{week_of.isoformat()}.{shift.id}")


__all__ = ["RosterState", "compose_review", "compose_shift_reminder", "compose_short",
           "compose_unanswered", "hours_words", "when_words"]
