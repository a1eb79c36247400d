"""The roster by hand on the week's page: "take off" on an assigned cell, "add" on a shift.

Two POST handlers over :mod:`pubsched.week.roster` (the same functions ``week assign`` and
``week unassign`` call, so the page and the CLI cannot disagree about what is allowed).
They pass the same gates as every other admin form (the session, the cross-origin check
of :mod:`.security`); no "seen" fingerprint is needed, since the edit's own hold judges the
week's state when it commits. The answer is the week's page with a flash: applied (with
the warning when the tender had not offered the shift), refused with the reason, or the
bad input's message.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..verdicts import BadInput, Verdict
from ..week import roster
from .forms import text, week_of
from .ids import row_id
from .pages import ADMIN_PATH
from .site import Site

Edit = Callable[..., Verdict]


class RosterPages:
    """``POST /admin/weeks/{week}/roster/assign`` and ``.../unassign`` (form: shift, email)."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages

    async def assign(self, request: Request) -> Response:
        return await self._edit(request, roster.assign)

    async def unassign(self, request: Request) -> Response:
        return await self._edit(request, roster.unassign)

    async def _edit(self, request: Request, edit: Edit) -> Response:
        raw_week = request.path_params["week"]
        back = RedirectResponse(f"{ADMIN_PATH}/weeks/{quote(raw_week)}", status_code=303)
        form = await request.form()
        try:
            week = week_of(raw_week)
            shift = row_id(text(form, "shift"), "shift")
            email = (text(form, "email") or "").strip()
            if not email:
                raise BadInput("choose a tender first")
            outcome = await self.site.run(
                lambda: edit(self.site.pub, week, shift, email, now=self.site.now()))
        except BadInput as exc:
            return self.pages.flash(back, "refused", str(exc))
        if not outcome.applied:
            return self.pages.flash(back, "refused",
                                    f"{outcome.message} ({outcome.reason})")
        warning = outcome.detail.get("warning")
        message = f"{outcome.message}. Note: {warning}" if warning else outcome.message
        return self.pages.flash(back, "ok", message)

