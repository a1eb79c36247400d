"""What the cover request's emails say: the offer to a tender who could take the shift,
the word to the asker, the taker and the operator when it is taken, called off or ends
with nobody found. No I/O: each builder turns small values into a :class:`CoverNote`
(subject, paragraphs, the asker's note, a button), and :func:`note_text` /
:func:`note_html` write it as the two alternatives; :func:`.compose.compose_cover`
addresses it and attaches the calendar change.

Every one names the pub first, the shift once in the pub's local time (the zone said
beside it), and the people by name; none speaks of states or requests' machinery beyond
its number, which the operator types (``cover take 3``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from . import html as h
from .values import ShiftLine, TenderLinks
from .wording import shift_in_zone, zone


@dataclass(frozen=True)
class CoverFacts:
    """The request an email is about: its number, its week, the shift (its instants in
    UTC, shown in ``shift.tz``), who asked, who took it (None: nobody yet), their note."""

    cover_id: int
    week_of: date
    shift: ShiftLine
    asker: str
    taker: str | None = None
    note: str | None = None

    @property
    def when(self) -> str:
        """``Thu 10 Dec, 18:00 - 02:00, New York time (EST)``."""
        s = self.shift
        return shift_in_zone(s.label, s.starts_at, s.ends_at, s.tz)

    @property
    def day(self) -> str:
        """``Thu 10 Dec``: the shift's day, for a subject line."""
        local = self.shift.starts_at.astimezone(zone(self.shift.tz))
        return f"{local:%a} {local.day} {local:%b}"


@dataclass(frozen=True)
class CoverNote:
    """One email's content: ``greeting`` (None for the operator's), ``paragraphs``, the
    asker's ``note`` quoted after them (headed by ``note_from``'s name), one ``button``
    (address, label) and the ``links`` written out under it (label, address), then
    ``closing`` paragraphs."""

    subject: str
    greeting: str | None
    paragraphs: tuple[str, ...]
    note: str | None = None
    button: tuple[str, str] | None = None
    links: tuple[tuple[str, str], ...] = ()
    closing: tuple[str, ...] = ()
    note_from: str | None = None

    @property
    def note_heading(self) -> str:
        return "Their note" if self.note_from is None else f"{self.note_from}'s note"


def offer(facts: CoverFacts, pub: str, name: str, take_url: str) -> CoverNote:
    """To a tender who could take the shift: the "I'll take it" link."""
    return CoverNote(
        f"{pub}: can you cover {facts.day}?",
        f"Hi {name},",
        (f"{facts.asker} can't work {facts.when} and is looking for someone to take it.",
         "If you can work it, tap the button and confirm on the page it opens: the shift "
         "is yours if nobody took it first, and you get an email saying so, with the "
         "shift for your calendar."),
        facts.note,
        (take_url, "I'll take it"),
        (("Or open this link", take_url),),
        ("If you can't, there is nothing to do: ignore this email.",),
        facts.asker,
    )


def asked(facts: CoverFacts, pub: str, offered: tuple[str, ...],
          admin_url: str | None) -> CoverNote:
    """To the operator: someone asked, and whom it was offered to (in offer order)."""
    if offered:
        reach = (f"It is offered to {len(offered)} tender{'' if len(offered) == 1 else 's'}, "
                 f"least recently covering first: {', '.join(offered)}. The first to take "
                 "it gets the shift; you are told.")
    else:
        reach = ("Nobody can take it at the moment: everyone else is away, already working "
                 "that night, at their most shifts that week, or without a skill the shift "
                 "needs. It stays open until the shift starts; you can put someone on it "
                 f"with `pubsched cover take {facts.cover_id} EMAIL`.")
    return CoverNote(
        f"{pub}: {facts.asker} asked for cover, {facts.day}",
        None,
        (f"{facts.asker} can't work {facts.when} and asked for cover "
         f"(request {facts.cover_id}).", reach),
        facts.note,
        *_admin(admin_url),
        (),
        facts.asker,
    )


def taken_asker(facts: CoverFacts, pub: str, name: str) -> CoverNote:
    """To the asker: someone took it, they are off the shift."""
    return CoverNote(
        f"{pub}: your shift on {facts.day} is covered",
        f"Hi {name},",
        (f"{facts.taker} is taking your shift, {facts.when}: you no longer work it.",
         "The attached calendar file takes it off your calendar; your shifts calendar "
         "drops it too."),
    )


def taken_taker(facts: CoverFacts, pub: str, name: str,
                links: TenderLinks | None) -> CoverNote:
    """To the taker: the shift is theirs now."""
    page = (("Your page (your shifts)", links.page), ("Your calendar", links.webcal)
            ) if links else ()
    return CoverNote(
        f"{pub}: you are working {facts.day}",
        f"Hi {name},",
        (f"Thanks for covering for {facts.asker}: {facts.when} is yours now.",
         "It is in the attached calendar file, and in your shifts calendar."),
        None,
        (links.page, "Open your page") if links else None,
        page,
    )


def taken_operator(facts: CoverFacts, pub: str, admin_url: str | None) -> CoverNote:
    """To the operator: who covers whom; the roster is changed."""
    return CoverNote(
        f"{pub}: {facts.taker} covers {facts.asker}, {facts.day}",
        None,
        (f"{facts.taker} took request {facts.cover_id}: they work {facts.when} in "
         f"place of {facts.asker}. The roster is changed; both have their calendars "
         "updated.",),
        None,
        *_admin(admin_url),
    )


def cancelled(facts: CoverFacts, pub: str, name: str | None,
              admin_url: str | None = None) -> CoverNote:
    """To the asker (``name``) or the operator (None): the request is called off."""
    if name is not None:
        return CoverNote(f"{pub}: your cover request for {facts.day} is called off",
                         f"Hi {name},",
                         (f"Your request for cover for {facts.when} is called off: you "
                          "still work it.",))
    return CoverNote(f"{pub}: {facts.asker}'s cover request for {facts.day} is called off",
                     None,
                     (f"Request {facts.cover_id} is called off: {facts.asker} still works "
                      f"{facts.when}.",), None, *_admin(admin_url))


def expired(facts: CoverFacts, pub: str, name: str | None,
            admin_url: str | None = None) -> CoverNote:
    """To the asker (``name``) or the operator (None): the shift started, nobody took it."""
    if name is not None:
        return CoverNote(f"{pub}: nobody covered your shift on {facts.day}",
                         f"Hi {name},",
                         (f"Nobody took your shift, {facts.when}, before it started, so "
                          "your request has ended: you are still on the roster for it.",
                          "If you can't be there, tell the operator."))
    return CoverNote(f"{pub}: nobody covered {facts.asker}, {facts.day}",
                     None,
                     (f"Nobody took request {facts.cover_id} before the shift started: "
                      f"{facts.asker} said they can't work {facts.when}, and is still on "
                      "the roster for it. The shift may be short.",), None,
                     *_admin(admin_url))


def _admin(url: str | None) -> tuple[tuple[str, str] | None, tuple[tuple[str, str], ...]]:
    """The operator's button and written-out link to the cover requests' page."""
    if url is None:
        return None, ()
    return (url, "Open the cover requests"), (("The cover requests", url),)


def note_text(pub: str, note: CoverNote, address: str | None = None) -> str:
    lines = [pub, ""]
    if note.greeting:
        lines += [note.greeting, ""]
    for paragraph in note.paragraphs:
        lines += [paragraph, ""]
    if note.note:
        lines += [f"{note.note_heading}: \u201c{note.note}\u201d", ""]
    if note.button is not None:
        lines += [f"{note.button[1]}:", note.button[0], ""]
    for label, url in note.links:
        if note.button is None or url != note.button[0]:
            lines += [f"{label}:", url, ""]
    for paragraph in note.closing:
        lines += [paragraph, ""]
    lines += ["-- ", pub + (f", {address}" if address else "")]
    return "\n".join(lines) + "\n"


def note_html(pub: str, note: CoverNote, address: str | None = None) -> str:
    body = []
    if note.greeting:
        body.append(h.paragraph(note.greeting))
    body += [h.paragraph(p) for p in note.paragraphs]
    if note.note:
        body.append(h.stacked([(note.note_heading, note.note)]))
    if note.button is not None:
        body.append(h.button(*note.button))
    body += [h.paragraph(p) for p in note.closing]
    footer: list[h.Piece] = [h.join(f"{label}: ", h.link(url)) for label, url in note.links]
    footer.append(pub + (f", {address}" if address else ""))
    return h.page(note.subject, pub, body, footer)


__all__ = ["CoverFacts", "CoverNote", "asked", "cancelled", "expired", "note_html", "note_text",
           "offer", "taken_asker", "taken_operator", "taken_taker"]
