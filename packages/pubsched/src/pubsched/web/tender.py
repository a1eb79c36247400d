"""A tender's own pages, reached by signed link and no login: the availability form
(``/t/{token}``) and the calendar feed (``/cal/{token}.ics``).

A link that does not verify (mistyped, replaced by a newer one, revoked) is a 404 that says
what to do; a submission refused because the form closed is a 409, never a silent loss: a
short page saying so with a way back to the form as it is now (half of a deadline rush's
answers come after the close, and drawing the whole page for each was most of the rush's
cost); one that ticks a shift not offered to the tender (started, or
needing a skill they lack: :mod:`pubsched.week.offer`) is a 400 saying which, nothing saved.
The page shows the tender's shifts still to come above the form, with their requests for
cover and the ones they could take (:mod:`.tender_covers`: those forms and their answers).
The page also lists the tender's time off with its forms (:mod:`.away` handles them) and
offers "save this as my usual". These pages are never cached (they show the tender's own
choices).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ..people import links, tenders
from ..verdicts import BadInput, Verdict
from ..week import view
from .away_words import notice as away_notice
from .forms import text
from .site import Site
from .tender_covers import tender_page


class TenderPages:
    """The tender's form, its submission, and the calendar feed."""

    def __init__(self, site: Site) -> None:
        self.site = site

    async def form(self, request: Request) -> Response:
        pub = self.site.pub
        tender = await self.site.run(links.tender_for_link, pub,
                                         request.path_params["token"], "form")
        if tender is None:
            return self._bad_link(request)
        form = await self.site.run(tender_page, pub, tender, self.site.now())
        saved = request.query_params.get("saved")
        return self._page(request, tender, form,
                          notice="Saved." if saved == "1" else away_notice(saved))

    async def again(self, request: Request, tender: tenders.Tender, *, error: str,
                    status: int) -> HTMLResponse:
        """The tender's page as it is now, drawn with ``error``: the answer to a refused
        form of theirs drawn elsewhere on the page (their time off, :mod:`.away`)."""
        form = await self.site.run(tender_page, self.site.pub, tender,
                                       self.site.now())
        return self._page(request, tender, form, error=error, status=status)

    def bad_link(self, request: Request) -> HTMLResponse:
        return self._bad_link(request)

    def _page(self, request: Request, tender: tenders.Tender, form: dict[str, Any], *,
              notice: str | None = None, error: str | None = None,
              status: int = 200) -> HTMLResponse:
        token = request.path_params["token"]
        config = self.site.pub.config
        return self.site.pages.page(request, "tender.html", {
            "f": form, "notice": notice, "error": error, "action": f"/t/{token}",
            "calendar": "/cal/" + links.tender_token(config, tender.id,
                                                     tender.link_version, "calendar") + ".ics",
            "webcal": links.webcal_url(config, tender.id, tender.link_version),
            "pub_name": config.mail.pub_name,
            # the time-off part (_time_off.html): its forms post to /t/{token}/away|back
            "time_off": form.get("time_off", []), "away_to": f"/t/{token}", "away_who": "you",
            "shift_reminder_hours": config.remind_shift_hours,  # tender_reminders.html
        }, status=status, headers={"cache-control": "no-store"})

    def _bad_link(self, request: Request) -> HTMLResponse:
        return self.site.pages.page(request, "problem.html", {
            "title": "This link does not work",
            "text": "It may have been mistyped, replaced by a newer link, or switched off. "
                    "Ask the pub's operator for your current link."},
            status=404, headers={"cache-control": "no-store"})

    async def submit(self, request: Request) -> Response:
        from ..week.submissions import submit_by_link

        pub = self.site.pub
        token = request.path_params["token"]
        form = await request.form()
        week = text(form, "week") or ""
        raw_max = (text(form, "max") or "").strip()
        save_usual = text(form, "save_usual") == "1"
        try:
            picked = [int(v) for v in form.getlist("shift") if isinstance(v, str)]
            limit = int(raw_max) if raw_max else None
        except ValueError:
            picked, limit = [], -1

        Answer = tuple[tenders.Tender | None, Verdict | BadInput | None,
                       dict[str, Any] | None]

        def answer() -> Answer:
            """The link, the submission and (when it is not saved) the page to show
            again, in one trip to the thread pool: under a rush each trip is a wait."""
            if limit == -1:
                tender = links.tender_for_link(pub, token, "form")
                bad = BadInput("the maximum is a whole number (or empty for no maximum)")
                got: tuple[tenders.Tender, Verdict | BadInput] | None = (
                    None if tender is None else (tender, bad))
            else:
                got = submit_by_link(pub, token, week, picked, max_shifts=limit,
                                     now=self.site.now(), save_usual=save_usual)
            if got is None:
                return None, None, None
            tender, outcome = got
            # saved, or refused because the form closed (half of a deadline rush's
            # answers): no page to draw again, so the week is not read for it
            done = isinstance(outcome, Verdict) and (outcome.applied
                                                     or outcome.reason == "FORM_CLOSED")
            return tender, outcome, None if done else tender_page(pub, tender,
                                                                   self.site.now())

        tender, outcome, shown = await self.site.run(answer)
        if tender is None or outcome is None:
            return self._bad_link(request)
        if isinstance(outcome, BadInput):
            assert shown is not None
            return self._page(request, tender, shown, error=str(outcome), status=400)
        if outcome.reason == "FORM_CLOSED":
            return self.site.pages.page(request, "problem.html", {
                "title": "The form is closed",
                "text": "The form for this week closed before your answer came: your "
                        "change was not saved.",
                "back": f"/t/{token}", "back_text": "See your shifts and what you sent"},
                status=409, headers={"cache-control": "no-store"})
        if not outcome.applied:
            assert shown is not None
            return self._page(request, tender, shown, status=409, error=outcome.message)
        return RedirectResponse(f"/t/{token}?saved=1", status_code=303)

    async def calendar(self, request: Request) -> Response:
        pub = self.site.pub
        token = request.path_params["token"]
        tender = await self.site.run(links.tender_for_link, pub, token, "calendar")
        if tender is None:
            return Response("unknown or revoked calendar link\n", status_code=404,
                            media_type="text/plain")
        body = await self.site.run(view.tender_calendar, pub, tender)
        return Response(body, media_type="text/calendar; charset=utf-8",
                        headers={"cache-control": "no-cache",
                                 "content-disposition": 'inline; filename="pub-shifts.ics"'})
