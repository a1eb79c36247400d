"""A tender's covers on the web, by signed link and no login: asking for cover and
cancelling it from their page (``/t/{token}/covers/...``), taking someone else's shift from
their page or from the offer email's link (``/c/{token}``).

Every move is the call the CLI makes (:func:`pubsched.covers.ask`, ``take``, ``cancel``),
so the page refuses what the command refuses, in the same words. Each answer is a small
page of its own (``cover_answer.html``) saying what happened and what it means for the
tender ("It's yours — it's in your calendar", "Someone else took it first"...), with the
way back to their page; the emails the move owes go right after it
(:func:`.cover_mail.deliver_after`).

The offer link's GET only shows the shift and an "I'll take it" button, which POSTs: a
link preview or a mail scanner fetching the link must never take the shift. A link that
does not verify (tampered, another purpose, a tender deactivated or whose links were
revoked, a request that does not exist) is one 404 that tells a guesser nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from .. import covers
from ..covers import Cover
from ..covers import view as cover_view
from ..covers.machine import CANCELLED, TAKEN
from ..people import links
from ..people.tenders import Tender, by_id
from ..pub import Pub
from ..verdicts import BadInput, Verdict
from ..week import view
from .cover_mail import deliver_after
from .forms import text, week_of
from .ids import row_id
from .site import Site

NO_STORE = {"cache-control": "no-store"}


def tender_page(pub: Pub, tender: Tender, now: datetime) -> dict[str, Any]:
    """What the tender's page shows (:func:`pubsched.week.view.tender_form`) and, as
    ``covers``, their requests and the ones they could take
    (:func:`pubsched.covers.view.for_tender`): read here, not in ``view``, which the
    domain's words read back, so that ``view`` does not import the covers domain."""
    with pub.reading():  # one snapshot for the page and its covers
        return {**view.tender_form(pub, tender, now),
                "covers": cover_view.for_tender(pub, tender, now)}


class TenderCovers:
    """The tender's cover forms and the offer link's page."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages

    # -- the page an answer is ------------------------------------------------------------

    def _answer(self, request: Request, tender: Tender | None, title: str, text: str, *,
                tone: str = "ok", status: int = 200, cover: Cover | None = None,
                form: dict[str, Any] | None = None) -> HTMLResponse:
        """``cover_answer.html``: ``tone`` ok (it happened), note (nothing changes for the
        tender: taken by someone else, called off, started) or refused (what they asked
        for was not done, and why); ``form``: the offer's "I'll take it" button."""
        config = self.site.pub.config
        home = calendar = None
        if tender is not None:
            home = "/t/" + links.tender_token(config, tender.id, tender.link_version)
            calendar = links.webcal_url(config, tender.id, tender.link_version)
        return self.pages.page(request, "cover_answer.html", {
            "title": title, "text": text, "tone": tone, "home": home, "calendar": calendar,
            "when": None if cover is None else cover.when(config.tz),  # its zone named
            "cover": cover, "form": form, "pub_name": config.mail.pub_name,
        }, status=status, headers=NO_STORE)

    def _bad_link(self, request: Request) -> HTMLResponse:
        return self._answer(request, None, "This link does not work", (
            "It may have been mistyped, or be an old link: the request may be gone, or "
            "your links replaced by newer ones. Your own page, from the pub's latest "
            "email, shows the shifts you could take."), tone="refused", status=404)

    def _told(self, request: Request, tender: Tender, cover: Cover | None,
              outcome: Verdict, title: str, text: str, *, refused: str) -> Response:
        """The answer to a move: ``title``/``text`` when it applied (and its emails sent
        after the answer), else ``refused`` over the refusal in words."""
        if outcome.applied:
            answer = self._answer(request, tender, title, text, cover=cover)
            answer.background = deliver_after(self.site)
            return answer
        return self._answer(request, tender, refused, outcome.message or (
            "That could not be done right now."), tone="refused", status=409, cover=cover)

    def _get(self, cover_id: int) -> Cover | None:
        """The request numbered ``cover_id``, or None (a number no request can have too)."""
        try:
            return covers.get(self.site.pub, cover_id)
        except BadInput:
            return None

    # -- asking and cancelling, from the tender's page ------------------------------------

    async def _tender(self, request: Request) -> Tender | None:
        return await self.site.run(links.tender_for_link, self.site.pub,
                                       request.path_params["token"], "form")

    async def ask(self, request: Request) -> Response:
        tender = await self._tender(request)
        if tender is None:
            return self._bad_link(request)
        form = await request.form()
        note = (text(form, "note") or "").strip() or None
        pub, now = self.site.pub, self.site.now()
        try:
            week = week_of(text(form, "week") or "")
            shift_id = row_id(text(form, "shift_id"), "shift")
            outcome = await self.site.run(
                lambda: covers.ask(pub, week, shift_id, tender.email, note=note, now=now))
        except BadInput as exc:
            return self._answer(request, tender, "Not asked", str(exc), tone="refused",
                                status=400)
        cover_id = outcome.detail.get("cover_id")
        cover = None if cover_id is None else await self.site.run(self._get,
                                                                      int(cover_id))
        return self._told(request, tender, cover, outcome, "You asked for cover", (
            f"{_reach(len(outcome.detail.get('offered') or ()))} You are still on this "
            "shift until someone takes it; you will get an email when they do."),
            refused="Not asked")

    async def cancel(self, request: Request) -> Response:
        tender = await self._tender(request)
        if tender is None:
            return self._bad_link(request)
        pub = self.site.pub
        cover = await self.site.run(self._get, int(request.path_params["cover_id"]))
        if cover is None or cover.asked_by != tender.id:
            return self._answer(request, tender, "Not cancelled",
                                "That request is not one of yours.", tone="refused",
                                status=404)
        outcome = await self.site.run(
            lambda: covers.cancel(pub, cover.id, now=self.site.now()))
        return self._told(request, tender, cover, outcome, "Your request is cancelled",
                          "You are still on this shift: it stays in your calendar.",
                          refused="Not cancelled")

    async def take_here(self, request: Request) -> Response:
        """"I'll take it" on the tender's own page."""
        tender = await self._tender(request)
        if tender is None:
            return self._bad_link(request)
        cover = await self.site.run(self._get, int(request.path_params["cover_id"]))
        if cover is None:
            return self._answer(request, tender, "Not taken", "There is no such request.",
                                tone="refused", status=404)
        return await self._take(request, tender, cover)

    # -- the offer link -------------------------------------------------------------------

    def _offer(self, token: str) -> tuple[Tender, Cover] | None:
        """The active tender and the request an offer link names, else None."""
        pub = self.site.pub
        named = covers.verify_offer(pub.config, token)
        if named is None:
            return None
        cover_id, tender_id, version = named
        tender = by_id(pub, tender_id)
        if tender is None or not tender.active or tender.link_version != version:
            return None
        cover = self._get(cover_id)
        return None if cover is None else (tender, cover)

    async def offer(self, request: Request) -> Response:
        found = await self.site.run(self._offer, request.path_params["token"])
        if found is None:
            return self._bad_link(request)
        tender, cover = found
        over = self._over(request, tender, cover)
        if over is not None:
            return over
        allowed = await self.site.run(covers.eligible, self.site.pub, cover.id)
        if all(t.id != tender.id for t in allowed):  # no button that can only be refused
            return self._answer(request, tender, "You can't take this one now", (
                "It was offered to you, but something changed since: you may now work "
                "that night, be away that day, or have as many shifts that week as you "
                "can work. Nothing changes for you."), tone="note", cover=cover)
        return self._answer(request, tender, "Can you cover this shift?", (
            f"{cover.asker_name} can't make it."), cover=cover,
            form={"action": f"/c/{request.path_params['token']}"})

    async def offer_take(self, request: Request) -> Response:
        found = await self.site.run(self._offer, request.path_params["token"])
        if found is None:
            return self._bad_link(request)
        return await self._take(request, *found)

    # -- taking, from either -------------------------------------------------------------

    def _over(self, request: Request, tender: Tender, cover: Cover) -> Response | None:
        """The answer when the request can no longer be taken (by anyone), else None."""
        now = self.site.now()
        if cover.state == TAKEN and cover.taken_by == tender.id:
            return self._answer(request, tender, "It's yours",
                                "It's in your calendar. Thank you for covering.",
                                cover=cover)
        if cover.state == TAKEN:
            return self._answer(request, tender, "Someone else took it first",
                                "Thank you all the same: nothing changes for you.",
                                tone="note", status=409, cover=cover)
        if cover.state == CANCELLED:
            return self._answer(request, tender, "This request was cancelled", (
                f"{cover.asker_name} can work it after all: nothing changes for you."),
                tone="note", status=409, cover=cover)
        if not cover_view.is_open(cover, now):  # expired, or OPEN past its start
            return self._answer(request, tender, "The shift has started",
                                "It can no longer be taken.", tone="note",
                                status=409, cover=cover)
        return None

    async def _take(self, request: Request, tender: Tender, cover: Cover) -> Response:
        pub = self.site.pub
        outcome = await self.site.run(
            lambda: covers.take(pub, cover.id, tender.email, now=self.site.now()))
        if outcome.applied:
            taken = await self.site.run(self._get, cover.id)
            return self._told(request, tender, taken or cover, outcome, "It's yours", (
                f"It's in your calendar. {cover.asker_name} is told, and so is the "
                "operator. Thank you for covering."), refused="Not taken")
        now_is = await self.site.run(self._get, cover.id)
        over = None if now_is is None else self._over(request, tender, now_is)
        if over is not None:  # lost to another take, a cancel, the start
            return over
        return self._answer(request, tender, "You can't take this one",
                            outcome.message or "It could not be given to you.",
                            tone="refused", status=409, cover=cover)


def _reach(offered: int) -> str:
    """Who a new request went to, in a sentence."""
    if not offered:
        return ("Nobody else can work it right now (the operator is told); it stays open "
                "for anyone who becomes free until the shift starts.")
    many = "tenders who could work it are" if offered != 1 else "tender who could work it is"
    return f"The {offered} {many} being emailed now, and the operator is told."

