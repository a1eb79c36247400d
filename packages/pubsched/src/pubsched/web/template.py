"""The pub's week on the web (``/admin/template``: list, add, edit, remove) and a week's
own shifts (the week page's "add a one-off shift" and "remove" forms).

The same domain calls as the CLI (:mod:`pubsched.week.template`, :mod:`pubsched.week.shifts`),
so the two front ends check and refuse alike; every post answers with a redirect carrying
a flash (a bad value says what is wrong, a refusal why and what to do next).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..verdicts import BadInput, Verdict
from ..week import shifts as week_shifts
from ..week import template
from .forms import text, week_of
from .pages import ADMIN_PATH
from .site import Site

PAGE = ADMIN_PATH + "/template"


def _slots(form: FormData) -> int:
    raw = (text(form, "slots") or "").strip()
    try:
        return int(raw) if raw else 2
    except ValueError:
        raise BadInput(f"a shift has 1 to 20 slots, got {raw!r}") from None


def _needs(form: FormData) -> list[str]:
    """The skills field: words separated by commas or spaces (the web's one field for what
    the CLI takes as repeated --needs)."""
    raw = text(form, "needs") or ""
    return [w for w in raw.replace(",", " ").split() if w]


def _id(request: Request, name: str) -> int:
    return int(request.path_params[name])  # the route's {name:id}: digits that fit a row


class TemplatePages:
    """The template page and the week page's shift forms."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages

    async def page(self, request: Request) -> Response:
        shifts = await self.site.run(template.listing, self.site.pub)
        return self.pages.admin_page(request, "template.html", {
            "shifts": shifts, "days": list(zip(template.DAYS, template.DAY_TITLES,
                                               strict=True)),
            "titles": template.DAY_TITLES})

    async def _answer(self, back: str, act: Callable[[], Verdict]) -> Response:
        try:
            outcome = await self.site.run(act)
        except BadInput as exc:
            return self.pages.flash(RedirectResponse(back, status_code=303), "refused",
                                    str(exc))
        return self.pages.told(back, outcome)

    async def add(self, request: Request) -> Response:
        form = await request.form()
        pub = self.site.pub
        return await self._answer(PAGE, lambda: template.add(
            pub, text(form, "label") or "", text(form, "day") or "",
            text(form, "start") or "", text(form, "end") or "", slots=_slots(form),
            needs=_needs(form)))

    async def edit(self, request: Request) -> Response:
        form = await request.form()
        pub = self.site.pub
        return await self._answer(PAGE, lambda: template.edit(
            pub, _id(request, "shift_id"), label=text(form, "label") or "",
            day=text(form, "day") or "", start=text(form, "start") or "",
            end=text(form, "end") or "", slots=_slots(form), needs=_needs(form)))

    async def remove(self, request: Request) -> Response:
        pub = self.site.pub
        return await self._answer(PAGE, lambda: template.remove(pub, _id(request,
                                                                          "shift_id")))

    # -- a week's own shifts ------------------------------------------------------------------

    async def week_add(self, request: Request) -> Response:
        form = await request.form()
        pub, raw = self.site.pub, request.path_params["week"]
        back = f"{ADMIN_PATH}/weeks/{quote(raw)}"
        return await self._answer(back, lambda: week_shifts.add_shift(
            pub, week_of(raw), text(form, "label") or "", text(form, "date") or "",
            text(form, "start") or "", text(form, "end") or "", slots=_slots(form),
            needs=_needs(form), now=self.site.now()))

    async def week_remove(self, request: Request) -> Response:
        pub, raw = self.site.pub, request.path_params["week"]
        back = f"{ADMIN_PATH}/weeks/{quote(raw)}"
        return await self._answer(back, lambda: week_shifts.remove_shift(
            pub, week_of(raw), _id(request, "shift_id"), now=self.site.now()))
