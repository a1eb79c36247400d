"""The messages pubsched sends, built with the stdlib ``email`` package; no I/O here.

The schedule email to one tender (their own shifts first, then the whole roster, their
links, as plain text and HTML alternatives, with their shifts as an ``.ics`` attachment;
the bodies are :mod:`.schedule`'s), the invitation that hands a tender their personal
links, the tick's notes to the operator (the nudges, the late open), and the cover
request's emails (the bodies are :mod:`.cover`'s; a taken cover's carry the calendar
change: the asker's event cancelled, the taker's added). The input is small frozen
values (:mod:`.values`), not database rows, so the send action and the tick decide
*what* to say and this module only decides *how*. The
pub's name (``PUBSCHED_PUB_NAME``) leads every subject and is the sender's name when
``PUBSCHED_MAIL_FROM`` gives none.

Every message comes out as an :class:`Outgoing`: the recipient it is *for* (``intended``,
whom the delivery record is about) and the one address SMTP delivers it *to*
(``envelope_to``). The two differ only in rehearsal (``PUBSCHED_REHEARSAL=1``), and this is
the one place that decides it: the message goes to the operator, the intended recipient is
named in the subject, and the mailer sends to ``envelope_to`` without knowing why. A
tender's message is addressed to that tender alone; the operator is never a Cc or Bcc.

The clock is passed in (``now``: the Date header and the calendar's DTSTAMP), never read
here, so the same input gives the same message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from datetime import date, datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime

from ..people.calendar import Organizer, cancelled_calendar, shifts_calendar
from . import html as h
from .cover import CoverFacts, CoverNote, note_html, note_text
from .schedule import ScheduleView, in_order, schedule_html, schedule_text
from .settings import MailSettings
from .values import Nudge, Outgoing, Recipient, Roster, ShiftLine, TenderLinks
from .wording import calendar_summary, day, moment, zone

__all__ = ["CoverFacts", "CoverNote", "Nudge", "Outgoing", "Recipient", "Roster", "ShiftLine",
           "TenderLinks", "addressed", "compose_cover", "compose_late_open", "compose_nudge",
           "compose_schedule", "operator_note"]


# -- the schedule email --------------------------------------------------------------------


def compose_schedule(
    roster: Roster,
    tender: Recipient,
    own_shift_ids: Collection[int | str],
    *,
    settings: MailSettings,
    now: datetime,
    links: TenderLinks | None = None,
    sequences: Mapping[int, int] | None = None,
) -> Outgoing:
    """The schedule email of ``roster`` for ``tender``, who works ``own_shift_ids``, with
    the tender's own ``links`` (their page, their calendar) when given, and each event's
    SEQUENCE now (``sequences`` by shift id, :mod:`pubsched.people.sequences`; absent: 0).

    A tender with no shift gets no schedule email, so an empty or unknown ``own_shift_ids``
    is a ValueError: it is a bug in the caller, not a message to send.
    """
    known = {shift.id for shift in roster.shifts}
    unknown = [shift_id for shift_id in own_shift_ids if shift_id not in known]
    if unknown:
        raise ValueError(
            f"{tender.email}: shifts {unknown} are not in the roster of {roster.week_of}"
        )
    own = tuple(shift for shift in in_order(roster.shifts) if shift.id in own_shift_ids)
    if not own:
        raise ValueError(f"{tender.email} has no shift in the roster of {roster.week_of}")

    view = ScheduleView(roster, tender, own, settings, links)
    message = EmailMessage()
    message.set_content(schedule_text(view), cte="quoted-printable")
    message.add_alternative(schedule_html(view), subtype="html", cte="quoted-printable")
    ics = shifts_calendar(
        roster.week_of,
        tender.email,
        ((shift.id, calendar_summary(settings.pub_name, shift.label, shift.starts_at,
                                     shift.ends_at, shift.tz),
          shift.starts_at, shift.ends_at) for shift in own),
        stamp=now,
        organizer=organizer(settings),
        location=settings.pub_address,
        sequences=sequences,
    )
    message.add_attachment(
        ics,
        maintype="text",
        subtype="calendar",
        filename=f"pub-shifts-{roster.week_of.isoformat()}.ics",
        params={"method": "PUBLISH", "charset": "utf-8"},
    )
    subject = f"{settings.pub_name}: your shifts, week of {day(roster.week_of)}"
    return addressed(
        message,
        tender,
        subject,
        settings=settings,
        now=now,
        message_key=f"schedule.{roster.week_of.isoformat()}",
    )


# -- the operator's nudges -----------------------------------------------------------------


def compose_nudge(
    nudge: Nudge,
    week_of: date,
    *,
    due_at: datetime,
    tz: str,
    settings: MailSettings,
    now: datetime,
    admin_url: str | None = None,
) -> Outgoing:
    """The tick's heads-up to the operator about the run of ``week_of``.

    ``due_at`` is the moment that passed (the form's deadline, or the send window), shown in
    ``tz``. Needs ``PUBSCHED_OPERATOR_EMAIL``: a nudge with nowhere to go is a ValueError.
    """
    if settings.operator_email is None:
        raise ValueError("a nudge goes to the operator: set PUBSCHED_OPERATOR_EMAIL")
    operator = Recipient(settings.operator_email, "Operator")
    due = moment(due_at, tz)
    week = day(week_of)
    pub = settings.pub_name
    if nudge is Nudge.READY_TO_CLOSE:
        subject = f"{pub}, week of {week}: ready to close and generate?"
        body = (
            f"The availability form for the week of {week} is still open; its deadline "
            f"passed at {due}.\n\nReady to close the form and generate the roster?"
        )
    else:
        subject = f"{pub}, week of {week}: approved but not sent"
        body = (
            f"The roster for the week of {week} is approved but the schedule email has not "
            f"been sent; the send window opened at {due}.\n\nSend it when you are ready."
        )
    paragraphs = [*body.split("\n\n"), "This is the only reminder for this run."]
    message = operator_note(pub, paragraphs, admin_url)
    return addressed(
        message,
        operator,
        subject,
        settings=settings,
        now=now,
        message_key=f"nudge.{nudge.name.lower()}.{week_of.isoformat()}",
    )


def compose_late_open(
    week_of: date,
    *,
    opened_at: datetime,
    old_deadline: datetime | None,
    new_deadline: datetime,
    tz: str,
    settings: MailSettings,
    now: datetime,
    admin_url: str | None = None,
) -> Outgoing:
    """The tick's word to the operator that autopilot opened the form of ``week_of`` late
    (at ``opened_at``) and moved its deadline from ``old_deadline`` to ``new_deadline`` so
    that the tenders keep their time. Needs ``PUBSCHED_OPERATOR_EMAIL`` (a ValueError
    otherwise). Its Message-ID names the open, so a second late open of the same week
    (after a reopen) is a new message, not a copy of the first."""
    if settings.operator_email is None:
        raise ValueError("the late-open note goes to the operator: set PUBSCHED_OPERATOR_EMAIL")
    operator = Recipient(settings.operator_email, "Operator")
    week = day(week_of)
    was = f" (it was {moment(old_deadline, tz)})" if old_deadline is not None else ""
    message = operator_note(settings.pub_name, [
        f"Autopilot opened the availability form for the week of {week} late, at "
        f"{moment(opened_at, tz)}: the tick had not run since its opening time.",
        f"So that tenders have time to answer, the deadline moved to "
        f"{moment(new_deadline, tz)}{was}; the roster is generated after it.",
    ], admin_url)
    return addressed(
        message,
        operator,
        f"{settings.pub_name}, week of {week}: form opened late, deadline moved",
        settings=settings,
        now=now,
        message_key=f"late-open.{week_of.isoformat()}.{int(opened_at.timestamp())}",
    )


# -- the invitation ------------------------------------------------------------------------


def compose_invite(
    tender: Recipient,
    form_url: str,
    calendar_url: str,
    *,
    settings: MailSettings,
    now: datetime,
) -> Outgoing:
    """The tender's personal links, in a message of their own (``pubsched tender invite``).

    The Message-ID follows the links: the same links sent again carry the same id (a
    mailbox may show one message), a revoke's new links a new one, never mistaken for
    the old.
    """
    pub = settings.pub_name
    intro = (f"This is your personal link to {pub}'s availability form. Each week, open it "
             "to say which shifts you can work.")
    later = ("Once the schedule is sent, your shifts are also in a calendar your phone can "
             "subscribe to.")
    secret = ("The links are yours alone: anyone who has them can answer for you. If one "
              "goes astray, ask for new ones.")
    text = (f"{pub}\n\nHi {tender.name},\n\n{intro}\n\n  {form_url}\n\n{later}\n\n"
            f"  {calendar_url}\n\n{secret}\n")
    body = [h.paragraph(f"Hi {tender.name},"), h.paragraph(intro),
            h.button(form_url, "Open your availability form"),
            h.paragraph(later), h.button(calendar_url, "Your shifts calendar", primary=False),
            h.paragraph(secret)]
    message = EmailMessage()
    message.set_content(text, cte="quoted-printable")
    message.add_alternative(
        h.page(f"{pub}: your link to the shift form", pub, body,
               footer=[h.link(form_url), h.link(calendar_url)]),
        subtype="html", cte="quoted-printable")
    links_id = hashlib.sha256(f"{form_url} {calendar_url}".encode()).hexdigest()[:12]
    return addressed(
        message,
        tender,
        f"{pub}: your link to the shift form",
        settings=settings,
        now=now,
        message_key=f"invite.{links_id}",
    )


# -- the cover request's emails ---------------------------------------------------------------


CALENDAR_CHANGES = ("add", "cancel")


def organizer(settings: MailSettings) -> Organizer:
    """The pub as its calendars' ORGANIZER: its name, the address its mail comes from."""
    return Organizer(settings.pub_name, settings.mail_from)


def compose_cover(
    note: CoverNote,
    recipient: Recipient | None,
    facts: CoverFacts,
    *,
    kind: str,
    settings: MailSettings,
    now: datetime,
    calendar: str | None = None,
    sequence: int = 1,
) -> Outgoing:
    """One of the cover request's emails (:mod:`.cover` wrote ``note``) to ``recipient``
    (None: the operator, ``PUBSCHED_OPERATOR_EMAIL``, a ValueError when unset).

    ``calendar`` attaches the shift's change for the recipient's calendar: ``"add"`` (the
    taker: the event, ``METHOD:PUBLISH``) or ``"cancel"`` (the asker: the same UID their
    schedule email gave it, ``METHOD:CANCEL``), with the change's ``sequence``
    (:mod:`pubsched.people.sequences`). The Message-ID names the request and the
    ``kind`` of email, so a retried send of the same notice is recognisably the same."""
    if recipient is None:
        if settings.operator_email is None:
            raise ValueError("a cover note goes to the operator: set PUBSCHED_OPERATOR_EMAIL")
        recipient = Recipient(settings.operator_email, "Operator")
    pub = settings.pub_name
    message = EmailMessage()
    message.set_content(note_text(pub, note, settings.pub_address), cte="quoted-printable")
    message.add_alternative(note_html(pub, note, settings.pub_address), subtype="html",
                            cte="quoted-printable")
    if calendar is not None:
        if calendar not in CALENDAR_CHANGES:
            raise ValueError(f"calendar is one of {CALENDAR_CHANGES}, got {calendar!r}")
        shift = facts.shift
        summary = calendar_summary(pub, shift.label, shift.starts_at, shift.ends_at, shift.tz)
        if calendar == "add":
            ics = shifts_calendar(facts.week_of, recipient.email,
                                  [(shift.id, summary, shift.starts_at, shift.ends_at)],
                                  stamp=now, organizer=organizer(settings),
                                  location=settings.pub_address,
                                  sequences={int(shift.id): sequence})
        else:
            ics = cancelled_calendar(facts.week_of, shift.id, recipient.email, summary,
                                     shift.starts_at, shift.ends_at, stamp=now,
                                     organizer=organizer(settings), sequence=sequence,
                                     location=settings.pub_address)
        method = "PUBLISH" if calendar == "add" else "CANCEL"
        local_day = shift.starts_at.astimezone(zone(shift.tz))
        message.add_attachment(
            ics, maintype="text", subtype="calendar",
            filename=f"pub-shift-{local_day:%Y-%m-%d}-{calendar}.ics",
            params={"method": method, "charset": "utf-8"})
    return addressed(message, recipient, note.subject, settings=settings, now=now,
                     message_key=f"cover.{facts.cover_id}.{kind}")


def operator_note(pub: str, paragraphs: list[str], admin_url: str | None, *,
                  button: str = "Open the week") -> EmailMessage:
    """A short note to the operator: the paragraphs as text and as HTML, the week's admin
    page as a link (text) and a button (HTML) labelled ``button``. Every note to the
    operator is made here (the nudges, the late open, :mod:`.reminder`'s), so they read
    alike."""
    text = "\n\n".join(paragraphs) + (f"\n\n{admin_url}" if admin_url else "")
    body = [h.paragraph(p) for p in paragraphs]
    if admin_url:
        body += [h.button(admin_url, button), h.paragraph(h.link(admin_url),
                                                                  muted=True)]
    message = EmailMessage()
    message.set_content(f"{pub}\n\n{text}\n", cte="quoted-printable")
    message.add_alternative(h.page(pub, pub, body), subtype="html", cte="quoted-printable")
    return message


# -- addressing: the one place rehearsal redirects -----------------------------------------


def addressed(
    message: EmailMessage,
    intended: Recipient,
    subject: str,
    *,
    settings: MailSettings,
    now: datetime,
    message_key: str,
) -> Outgoing:
    """``message`` as it leaves for ``intended``: To, From, Subject, Date, a stable
    Message-ID (from ``message_key``), and in rehearsal the redirect to the operator. Every
    composer of every module ends here, so rehearsal is decided in one place."""
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    envelope_to = intended.email
    if settings.rehearsal:
        assert settings.operator_email is not None  # MailSettings refuses rehearsal without it
        envelope_to = settings.operator_email
        subject = f"[rehearsal, for {intended.name} <{intended.email}>] {subject}"
        message["To"] = Address("Operator", addr_spec=envelope_to)
    else:
        message["To"] = Address(intended.name, addr_spec=envelope_to)
    message["From"] = Address(settings.mail_from_name or settings.pub_name,
                              addr_spec=settings.mail_from)
    message["Subject"] = subject
    message["Date"] = format_datetime(now)
    message["Message-ID"] = _message_id(message_key, intended, settings, now)
    message["X-Pubsched-Intended-For"] = intended.email
    message["Auto-Submitted"] = "auto-generated"  # RFC 3834: autoresponders stay quiet
    return Outgoing(intended, envelope_to, message, rehearsal=settings.rehearsal)


def _message_id(key: str, intended: Recipient, settings: MailSettings, now: datetime) -> str:
    """One Message-ID per (message, recipient), the same every time it is composed.

    An operator's explicit resend to a recipient left uncertain then carries the first
    copy's id, so a mailbox that holds the first copy can tell the second is the same
    message. Rehearsals add the moment, so that repeated rehearsals do not look like one.
    """
    who = hashlib.sha256(intended.email.lower().encode()).hexdigest()[:16]
    if settings.rehearsal:
        key = f"{key}.rehearsal.{int(now.timestamp())}"
    domain = settings.mail_from.rpartition("@")[2]
    return f"<{key}.{who}@{domain}>"
