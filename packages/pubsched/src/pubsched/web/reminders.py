"""A tender's switch for the email before each of their shifts (:mod:`pubsched.tick.reminders`):
``POST /t/{token}/reminders`` with ``on`` = 1 or 0, from the section of their page that
``tender_reminders.html`` draws. A page and a route of its own, so the tender's page can
change around it without touching it.

The switch is the domain's (:func:`pubsched.people.tenders.edit` with ``shift_reminders``, the
same call the operator's edit page and ``tender edit --shift-reminders`` make). A link
that does not verify is sent back to the page, which says so (404) as for any use of a bad
link; a value other than 1 or 0 is a 400 page, nothing changed. Done, it answers with a
redirect to the page's section, which says what is now on.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..people import links, tenders
from .forms import text
from .site import Site

SECTION = "reminders"  # the section's id on the tender's page, and the redirect's mark


class ReminderSwitch:
    """The switch's one handler."""

    def __init__(self, site: Site) -> None:
        self.site = site

    async def switch(self, request: Request) -> Response:
        pub = self.site.pub
        token = request.path_params["token"]
        page = f"/t/{token}"
        tender = await self.site.run(links.tender_for_link, pub, token, "form")
        if tender is None:  # the page itself says the link does not work
            return RedirectResponse(page, status_code=303)
        wanted = text(await request.form(), "on")
        if wanted not in ("1", "0"):
            return self.site.pages.page(request, "problem.html", {
                "title": "Nothing changed",
                "text": "The reminder switch is on or off. Go back to your page and press "
                        "its button."}, status=400, headers={"cache-control": "no-store"})
        on = wanted == "1"
        await self.site.run(lambda: tenders.edit(pub, tender.email, shift_reminders=on))
        return RedirectResponse(f"{page}?{SECTION}={'on' if on else 'off'}#{SECTION}",
                                status_code=303)
