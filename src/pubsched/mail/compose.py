"""The messages pubsched sends, built with the stdlib ``email`` package; no I/O here.

Three kinds: the schedule email to one tender (their own shifts first, then the whole
roster, as plain text and HTML alternatives, with their shifts as an ``.ics`` attachment),
the invitation that hands a tender their personal links, and the tick's nudge to the
operator. The input is small frozen values, not database rows, so the
send action and the tick decide *what* to say and this module only decides *how*.

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

import enum
import hashlib
import html
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..shiftcal import shifts_calendar
from .addresses import address_problem, name_problem
from .settings import MailSettings

SENDER_NAME = "Pub scheduler"


@dataclass(frozen=True)
class Recipient:
    """Someone a message is for: a tender, or the operator. Built only from an address and a
    name the one rule of :mod:`.addresses` accepts (a ValueError otherwise), so that every
    message composed for it can be written."""

    email: str
    name: str

    def __post_init__(self) -> None:
        problem = address_problem(self.email) or name_problem(self.name)
        if problem is not None:
            raise ValueError(f"recipient {self.name!r}: {problem}")


@dataclass(frozen=True)
class ShiftLine:
    """One shift as the email shows it.

    ``starts_at``/``ends_at`` are the stored UTC instants; ``tz`` is the IANA zone they are
    shown in (the pub's local time); ``assigned`` are the names of who works it, in roster
    order (empty: nobody).
    """

    id: int | str
    label: str
    starts_at: datetime
    ends_at: datetime
    tz: str
    assigned: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("starts_at", "ends_at"):
            moment: datetime = getattr(self, name)
            if moment.tzinfo is None or moment.utcoffset() != timedelta(0):
                raise ValueError(f"shift {self.id!r}: {name} must be an aware UTC datetime")
        if self.ends_at <= self.starts_at:
            raise ValueError(f"shift {self.id!r}: ends_at must be after starts_at")
        try:
            ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"shift {self.id!r}: unknown time zone {self.tz!r}") from None


@dataclass(frozen=True)
class Roster:
    """A week's whole schedule: every shift, with who works it."""

    week_of: date
    shifts: tuple[ShiftLine, ...]

    def __post_init__(self) -> None:
        ids = [shift.id for shift in self.shifts]
        if len(set(ids)) != len(ids):
            raise ValueError(f"roster of {self.week_of}: shift ids repeat: {ids}")


@dataclass(frozen=True, eq=False)
class Outgoing:
    """A message ready for the mailer: who it is for, where it goes, and the message.

    ``intended`` is the key of the delivery record; ``envelope_to`` is the one SMTP
    recipient (``intended.email``, or the operator in rehearsal).
    """

    intended: Recipient
    envelope_to: str
    message: EmailMessage
    rehearsal: bool = False


class Nudge(enum.Enum):
    """The operator's heads-up emails of the tick; each fires at most once per run."""

    READY_TO_CLOSE = "ready to close and generate?"
    APPROVED_NOT_SENT = "approved but not sent"


# -- the schedule email --------------------------------------------------------------------


def compose_schedule(
    roster: Roster,
    tender: Recipient,
    own_shift_ids: Collection[int | str],
    *,
    settings: MailSettings,
    now: datetime,
) -> Outgoing:
    """The schedule email of ``roster`` for ``tender``, who works ``own_shift_ids``.

    A tender with no shift gets no schedule email, so an empty or unknown ``own_shift_ids``
    is a ValueError: it is a bug in the caller, not a message to send.
    """
    known = {shift.id for shift in roster.shifts}
    unknown = [shift_id for shift_id in own_shift_ids if shift_id not in known]
    if unknown:
        raise ValueError(
            f"{tender.email}: shifts {unknown} are not in the roster of {roster.week_of}"
        )
    own = [shift for shift in _in_order(roster.shifts) if shift.id in own_shift_ids]
    if not own:
        raise ValueError(f"{tender.email} has no shift in the roster of {roster.week_of}")

    message = EmailMessage()
    message.set_content(_schedule_text(roster, tender, own), cte="quoted-printable")
    message.add_alternative(
        _schedule_html(roster, tender, own), subtype="html", cte="quoted-printable"
    )
    ics = shifts_calendar(
        roster.week_of,
        tender.email,
        ((shift.id, f"Pub shift: {shift.label}", shift.starts_at, shift.ends_at) for shift in own),
        stamp=now,
    )
    message.add_attachment(
        ics,
        maintype="text",
        subtype="calendar",
        filename=f"pub-shifts-{roster.week_of.isoformat()}.ics",
        params={"method": "PUBLISH", "charset": "utf-8"},
    )
    subject = f"Your pub shifts, week of {_day(roster.week_of)}"
    return _addressed(
        message,
        tender,
        subject,
        settings=settings,
        now=now,
        message_key=f"schedule.{roster.week_of.isoformat()}",
    )


def _schedule_text(roster: Roster, tender: Recipient, own: list[ShiftLine]) -> str:
    lines = [f"Hi {tender.name},", "", f"Your shifts, week of {_day(roster.week_of)}:"]
    lines += [f"  * {shift.label}: {_when(shift)}" for shift in own]
    lines += ["", "The whole roster:"]
    for shift in _in_order(roster.shifts):
        mark = "*" if shift in own else " "
        lines.append(f"{mark} {shift.label}: {_when(shift)}: {_who(shift)}")
    lines += [
        "",
        "Your shifts are in the attached calendar file; importing it again updates them "
        "instead of adding copies.",
    ]
    return "\n".join(lines) + "\n"


def _schedule_html(roster: Roster, tender: Recipient, own: list[ShiftLine]) -> str:
    e = html.escape
    own_items = "".join(f"<li><strong>{e(s.label)}</strong>: {e(_when(s))}</li>" for s in own)
    rows = "".join(
        (
            "<tr{mine}><td>{label}</td><td>{when}</td><td>{who}</td></tr>".format(
                mine=' style="font-weight:bold"' if shift in own else "",
                label=e(shift.label),
                when=e(_when(shift)),
                who=e(_who(shift)),
            )
        )
        for shift in _in_order(roster.shifts)
    )
    week = e(_day(roster.week_of))
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n'
        f"<p>Hi {e(tender.name)},</p>\n"
        f"<h2>Your shifts, week of {week}</h2>\n<ul>{own_items}</ul>\n"
        "<h2>The whole roster</h2>\n"
        f"<table><tr><th>Shift</th><th>When</th><th>Who</th></tr>{rows}</table>\n"
        "<p>Your shifts are in the attached calendar file; importing it again updates them "
        "instead of adding copies.</p>\n</body></html>\n"
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
    text = (
        f"Hi {tender.name},\n\n"
        "This is your personal link to the pub's availability form. Each week, open it to "
        "say which shifts you can work:\n\n"
        f"  {form_url}\n\n"
        "Your shifts, once the schedule is sent, are also in a calendar your phone can "
        "subscribe to:\n\n"
        f"  {calendar_url}\n\n"
        "The links are yours alone: anyone who has them can answer for you. If one goes "
        "astray, ask for new ones.\n"
    )
    e = html.escape
    page = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n'
        f"<p>Hi {e(tender.name)},</p>\n"
        "<p>This is your personal link to the pub's availability form. Each week, open it "
        "to say which shifts you can work:</p>\n"
        f'<p><a href="{e(form_url)}">Your availability form</a><br>{e(form_url)}</p>\n'
        "<p>Your shifts, once the schedule is sent, are also in a calendar your phone can "
        "subscribe to:</p>\n"
        f'<p><a href="{e(calendar_url)}">Your shifts calendar</a><br>{e(calendar_url)}</p>\n'
        "<p>The links are yours alone: anyone who has them can answer for you. If one goes "
        "astray, ask for new ones.</p>\n</body></html>\n"
    )
    message = EmailMessage()
    message.set_content(text, cte="quoted-printable")
    message.add_alternative(page, subtype="html", cte="quoted-printable")
    links_id = hashlib.sha256(f"{form_url} {calendar_url}".encode()).hexdigest()[:12]
    return _addressed(
        message,
        tender,
        "Your link to the pub's shift form",
        settings=settings,
        now=now,
        message_key=f"invite.{links_id}",
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
    due = _local(due_at, tz)
    week = _day(week_of)
    if nudge is Nudge.READY_TO_CLOSE:
        subject = f"Week of {week}: ready to close and generate?"
        body = (
            f"The availability form for the week of {week} is still open; its deadline "
            f"passed at {due}.\n\nReady to close the form and generate the roster?"
        )
    else:
        subject = f"Week of {week}: approved but not sent"
        body = (
            f"The roster for the week of {week} is approved but the schedule email has not "
            f"been sent; the send window opened at {due}.\n\nSend it when you are ready."
        )
    if admin_url:
        body += f"\n\n{admin_url}"
    message = EmailMessage()
    message.set_content(
        body + "\n\nThis is the only reminder for this run.\n", cte="quoted-printable"
    )
    return _addressed(
        message,
        operator,
        subject,
        settings=settings,
        now=now,
        message_key=f"nudge.{nudge.name.lower()}.{week_of.isoformat()}",
    )


# -- addressing: the one place rehearsal redirects -----------------------------------------


def _addressed(
    message: EmailMessage,
    intended: Recipient,
    subject: str,
    *,
    settings: MailSettings,
    now: datetime,
    message_key: str,
) -> Outgoing:
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
    message["From"] = Address(settings.mail_from_name or SENDER_NAME,
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


# -- how times and people read --------------------------------------------------------------


def _in_order(shifts: tuple[ShiftLine, ...]) -> list[ShiftLine]:
    return sorted(shifts, key=lambda shift: (shift.starts_at, str(shift.id)))


def _day(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b %Y}"


def _local(moment: datetime, tz: str) -> str:
    local = moment.astimezone(ZoneInfo(tz))
    return f"{local:%a} {local.day} {local:%b %H:%M %Z}"


def _when(shift: ShiftLine) -> str:
    """``Thu 10 Dec 18:00 - Fri 02:00 EST``: the end's day is named when it is another day
    (a shift may cross midnight)."""
    zone = ZoneInfo(shift.tz)
    start = shift.starts_at.astimezone(zone)
    end = shift.ends_at.astimezone(zone)
    end_text = f"{end:%H:%M}" if end.date() == start.date() else f"{end:%a %H:%M}"
    return f"{start:%a} {start.day} {start:%b %H:%M} - {end_text} {end:%Z}"


def _who(shift: ShiftLine) -> str:
    return ", ".join(shift.assigned) if shift.assigned else "(nobody)"
