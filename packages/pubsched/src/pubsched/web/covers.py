"""``/admin/covers``: every cover request (of one week, or all), in the operator's words and
the pub's local time (who asked, which shift, their note, where it is, who was offered it
and whether each email went), a "Cancel" button on each one still open, and the cover
machine's own diagram, folded as the week page's lifecycle is.

The cancel is :func:`pubsched.covers.cancel`, the call ``pubsched cover cancel`` makes, so
the page and the CLI refuse alike; its answer is the page again with a flash in the
verdict's words (:meth:`.pages.Pages.told`). Its emails go right after the answer (a
background task, :func:`.cover_mail.deliver_after`); the tick sends what that misses.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .. import covers
from ..covers import view as cover_view
from ..covers.machine import COVER
from ..mail.wording import zone_words
from ..verdicts import BadInput
from .cover_mail import deliver_after
from .forms import text, week_of
from .pages import ADMIN_PATH
from .site import Site

PAGE = ADMIN_PATH + "/covers"


def diagram() -> str:
    """The cover machine's Mermaid diagram (its edges carry the operator's words)."""
    return COVER.mermaid()


class CoverAdmin:
    """The covers page and its cancel button."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages

    async def page(self, request: Request) -> Response:
        raw = (request.query_params.get("week") or "").strip()
        try:
            week = week_of(raw) if raw else None
        except BadInput as exc:
            return self.pages.admin_page(request, "problem.html", {
                "title": "No such week", "text": str(exc)}, status=404)

        def context() -> dict[str, Any]:
            pub, now = self.site.pub, self.site.now()
            rows = cover_view.admin_rows(pub, week, now)
            starts = [r["cover"].starts_at for r in rows] or [now]
            shown = set(cover_view.weeks_with_covers(pub)) | ({week} if week else set())
            return {"rows": rows, "week": week, "weeks": sorted(shown),
                    "diagram": diagram(), "zone": zone_words(pub.config.tz, starts)}

        return self.pages.admin_page(request, "covers.html", await self.site.run(context))

    async def cancel(self, request: Request) -> Response:
        form = await request.form()
        shown = (text(form, "week") or "").strip()
        back = PAGE + (f"?week={quote(shown)}" if shown else "")
        cover_id = int(request.path_params["cover_id"])
        try:
            outcome = await self.site.run(
                lambda: covers.cancel(self.site.pub, cover_id, now=self.site.now()))
        except BadInput as exc:
            return self.pages.flash(RedirectResponse(back, status_code=303), "refused",
                                    str(exc))
        answer = self.pages.told(back, outcome)
        if outcome.applied:
            answer.background = deliver_after(self.site)
        return answer
