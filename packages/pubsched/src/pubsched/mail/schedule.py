"""The schedule email's two bodies, plain text and HTML, saying the same things in the same
order: the pub's name, the tender's own shifts, the whole roster, (in the operator's copy,
i.e. a rehearsal) the slots nobody fills, then the tender's links and where the pub is.

The text part is not an afterthought: some people read mail as text only, so it carries
every link written out, and lines a phone does not wrap badly. Each shift is written once
(:func:`.wording.shift_text`) and the zone is named once, in the heading.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import html as h
from .settings import MailSettings
from .values import Recipient, Roster, ShiftLine, TenderLinks
from .wording import day, shift_text, zone_words

CALENDAR_FILE_NOTE = ("Your shifts are also in the attached calendar file; importing it "
                      "again updates them instead of adding copies.")


@dataclass(frozen=True)
class ScheduleView:
    """What both bodies show, worked out once."""

    roster: Roster
    tender: Recipient
    own: tuple[ShiftLine, ...]
    settings: MailSettings
    links: TenderLinks | None

    @property
    def ordered(self) -> list[ShiftLine]:
        return in_order(self.roster.shifts)

    @property
    def week(self) -> str:
        return day(self.roster.week_of)

    @property
    def zone(self) -> str:
        shifts = self.roster.shifts
        tz = shifts[0].tz if shifts else "UTC"
        return zone_words(tz, [s.starts_at for s in shifts])

    @property
    def open_shifts(self) -> list[ShiftLine]:
        """The operator's copy lists the slots nobody fills: a tender's does not."""
        if not self.settings.rehearsal:
            return []
        return [s for s in self.ordered if s.open_slots]


def in_order(shifts: tuple[ShiftLine, ...]) -> list[ShiftLine]:
    return sorted(shifts, key=lambda shift: (shift.starts_at, str(shift.id)))


def line(shift: ShiftLine) -> str:
    return shift_text(shift.label, shift.starts_at, shift.ends_at, shift.tz)


def who(shift: ShiftLine) -> str:
    return ", ".join(shift.assigned) if shift.assigned else "(nobody)"


def open_text(shift: ShiftLine) -> str:
    slots = shift.slots or 0
    return f"{shift.open_slots} of {slots} slot{'s' if slots != 1 else ''} open"


def schedule_text(view: ScheduleView) -> str:
    pub = view.settings.pub_name
    lines = [pub, "", f"Hi {view.tender.name},", "",
             f"Your shifts at {pub}, week of {view.week}:",
             f"Times are {view.zone}.", ""]
    lines += [f"  * {line(s)}" for s in view.own]
    lines += ["", "The whole roster (* = you):", ""]
    for shift in view.ordered:
        mark = "*" if shift in view.own else "-"
        lines += [f"{mark} {line(shift)}", f"    {who(shift)}"]
    if view.open_shifts:
        lines += ["", "Still unfilled (this list is only in the operator's copy):", ""]
        lines += [f"  ! {line(s)}: {open_text(s)}" for s in view.open_shifts]
    if view.links is not None:
        lines += ["", "Your page (your shifts, and next week's form):", view.links.page, "",
                  "Your calendar: subscribe once and every new week appears:",
                  view.links.webcal, "or, if your calendar asks for a web address:",
                  view.links.calendar]
    lines += ["", CALENDAR_FILE_NOTE]
    lines += ["", "-- ", pub + (f", {view.settings.pub_address}"
                                if view.settings.pub_address else "")]
    return "\n".join(lines) + "\n"


def schedule_html(view: ScheduleView) -> str:
    pub = view.settings.pub_name
    body = [
        h.paragraph(f"Hi {view.tender.name},"),
        h.paragraph("Here are your shifts for the week of ", h.strong(view.week),
                    f". Times are {view.zone}."),
        h.heading("Your shifts"),
        h.stacked((line(s), _with(s, view.tender.name)) for s in view.own),
    ]
    if view.links is not None:
        body += [h.button(view.links.page, "Open your page"),
                 h.button(view.links.webcal, "Add your shifts to your calendar",
                          primary=False)]
    body += [h.heading("The whole roster"),
             h.rows((line(s), who(s), s in view.own) for s in view.ordered)]
    if view.open_shifts:
        body += [h.heading("Still unfilled"),
                 h.paragraph("Only in the operator's copy: nobody was found for these.",
                             muted=True),
                 h.stacked((line(s), open_text(s)) for s in view.open_shifts)]
    footer: list[h.Piece] = []
    if view.links is not None:
        footer.append(h.join("Your page: ", h.link(view.links.page)))
        footer.append(h.join("Your calendar (subscribe once; every new week appears): ",
                             h.link(view.links.webcal), " or ", h.link(view.links.calendar)))
    footer.append(CALENDAR_FILE_NOTE)
    footer.append(pub + (f", {view.settings.pub_address}" if view.settings.pub_address
                         else ""))
    return h.page(f"Your shifts at {pub}, week of {view.week}", pub, body, footer)


def _with(shift: ShiftLine, name: str) -> str:
    others = [n for n in shift.assigned if n != name]
    return f"with {', '.join(others)}" if others else ""
