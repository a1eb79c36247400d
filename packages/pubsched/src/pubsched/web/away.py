"""Time off on the web: the tender marks and cancels their own on their page
(``POST /t/{token}/away``, ``/t/{token}/back``), the operator a tender's on their edit page
(``POST /admin/tenders/{id}/away``, ``.../back``). Both call :mod:`pubsched.people.away`, the
functions ``tender away|back`` call, so the rules and the refusals are the same.

The tender's page says an answer in their words: a span that covers a shift on the
schedule already sent is refused with what to do (ask for cover for that shift first,
from "Your next shifts"), a span that overlaps one they have names it; bad input (a date
missing, the last before the first) is a 400 with the page drawn again, nothing saved. A
saved span that covers a shift of a roster not yet sent is saved; the tender is told the
operator will see it (the week's page flags an away tender on a shift, and the operator's
own ``tender away`` says what to regenerate). The operator's page answers with a flash in
the verdict's words (:meth:`pubsched.web.pages.Pages.told`).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..people import away, links, tenders
from ..verdicts import BadInput, Verdict
from .away_words import dates, in_words, tender_refusal
from .pages import ADMIN_PATH
from .site import Site
from .tender import TenderPages


class AwayPages:
    """The four time-off forms; the tender's are drawn on :class:`TenderPages`' page."""

    def __init__(self, site: Site, tender_pages: TenderPages) -> None:
        self.site = site
        self.tender_pages = tender_pages

    # -- the tender's own page -------------------------------------------------------------

    async def tender_away(self, request: Request) -> Response:
        form = await request.form()
        first, last = dates(form)
        return await self._tender_act(request, "away", lambda pub, email: away.add(
            pub, email, first or None, last or None, now=self.site.now()))

    async def tender_back(self, request: Request) -> Response:
        form = await request.form()
        first, _ = dates(form)
        return await self._tender_act(request, "back",
                                      lambda pub, email: away.cancel(pub, email, first))

    async def _tender_act(self, request: Request, what: str, act: Any) -> Response:
        pub = self.site.pub
        token = request.path_params["token"]
        tender = await self.site.run(links.tender_for_link, pub, token, "form")
        if tender is None:
            return self.tender_pages.bad_link(request)
        again = self.tender_pages.again
        try:
            outcome: Verdict = await self.site.run(act, pub, tender.email)
        except BadInput as exc:
            return await again(request, tender, error=in_words(str(exc)), status=400)
        if not outcome.applied:
            return await again(request, tender, error=tender_refusal(outcome), status=409)
        said = "away-warned" if outcome.detail.get("warnings") else what
        return RedirectResponse(f"/t/{token}?saved={said}#time-off", status_code=303)

    # -- the operator's edit page of a tender ---------------------------------------------

    async def admin_away(self, request: Request) -> Response:
        form = await request.form()
        first, last = dates(form)
        return await self._admin_act(request, lambda pub, email: away.add(
            pub, email, first or None, last or None, now=self.site.now()))

    async def admin_back(self, request: Request) -> Response:
        form = await request.form()
        first, _ = dates(form)
        return await self._admin_act(request, lambda pub, email: away.cancel(pub, email, first))

    async def _admin_act(self, request: Request, act: Any) -> Response:
        tender_id = int(request.path_params["tender_id"])
        back = f"{ADMIN_PATH}/tenders/{tender_id}#time-off"
        tender = await self.site.run(tenders.by_id, self.site.pub, tender_id)
        if tender is None:
            return self.site.pages.told(f"{ADMIN_PATH}/tenders",
                                        Verdict(False, "NO_SUCH_TENDER", message="no such tender"))
        try:
            outcome: Verdict = await self.site.run(act, self.site.pub, tender.email)
        except BadInput as exc:
            outcome = Verdict(False, "BAD_INPUT", message=in_words(str(exc)))
        warnings = list(outcome.detail.get("warnings", ())) if outcome.applied else []
        if warnings:
            outcome = Verdict(True, message=f"{outcome.message}. Note: " + "; ".join(warnings))
        return self.site.pages.told(back, outcome)


__all__ = ["AwayPages"]
