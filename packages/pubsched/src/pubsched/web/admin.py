"""The operator's pages under ``/admin`` (behind the gate of :mod:`.security`): the weeks,
one week with its buttons (the tenders' pages are :mod:`.tenders`, the cutover's
:mod:`.cutover`).

Each handler reads or acts through the domain in the thread pool (the domain is
synchronous) and answers with a page or a redirect carrying a flash: a refusal is a flash
of kind "refused" with the engine's reason, a bad input one with the message.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..covers import view as cover_view
from ..db.instants import maybe_instant
from ..people import tenders
from ..verdicts import BadInput
from ..week import view
from ..week.shifts import BEFORE_ROSTER
from ..week.status import week_status
from .buttons import Buttons, diagram, drawn, fingerprint
from .forms import text, week_of
from .pages import ADMIN_PATH
from .site import Site


class AdminPages:
    """The admin's handlers; what they share is the site and the buttons' locks."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages
        self.buttons = Buttons(site)

    # -- the weeks ------------------------------------------------------------------------

    async def weeks(self, request: Request) -> Response:
        rows = await self.site.run(view.weeks_list, self.site.pub)
        return self.pages.admin_page(request, "weeks.html", {"weeks": rows,
                                                             "zone": self.site.pub.config.tz.key})

    async def week(self, request: Request) -> Response:
        week = request.path_params["week"]
        try:
            context = await self.site.run(self._week_context, week)
        except BadInput as exc:
            return self.pages.admin_page(request, "problem.html", {
                "title": "No such week", "text": str(exc)}, status=404)
        return self.pages.admin_page(request, "week.html", context)

    def _week_context(self, week: str) -> dict[str, Any]:
        # one snapshot for the whole page (one BEGIN; on a standby with PUBSCHED_DB_READS,
        # one replay point): the buttons' fingerprint is the row the page shows, so a
        # click never acts on a state it did not see
        with self.site.pub.reading():
            return self._week_read(week)

    def _week_read(self, week: str) -> dict[str, Any]:
        pub = self.site.pub
        row = pub.runs.get(week_of(week)) or {}
        shown = view.week_show(pub, week)
        monday = date.fromisoformat(shown["week_of"])
        deadline = maybe_instant(shown["deadline_at"])
        ahead = deadline is not None and self.site.now() < deadline
        buttons = drawn(view.legal_edges(pub, shown["week_of"]),
                        early_close=self.pages.local(deadline) if ahead else None)
        people = sorted({email for s in shown["shifts"] for email in s["assigned"]})
        by_email = {t.email: t for t in tenders.all_tenders(pub)}
        return {
            "w": shown,
            "status": week_status(pub, shown),  # what the page says first
            "seen": fingerprint(row),
            "buttons": buttons,
            "diagram": diagram(shown["state"]),
            "people": people,
            "names": {e: by_email[e].name if e in by_email else e for e in people},
            "submitted": {s["email"] for s in shown["submissions"]},
            # each tender's ticks, looked up per grid cell (a scan per cell is 200 x 30 x
            # 200 steps for a big pub's week)
            "offered_by": {s["email"]: set(s["shift_ids"]) for s in shown["submissions"]},
            "shift_labels": {s["id"]: s["label"] for s in shown["shifts"]},
            # the week's own shifts change only before its roster (week_shifts.py)
            "edit_shifts": shown["state"] in BEFORE_ROSTER,
            "days": [(monday + timedelta(days=n)).isoformat() for n in range(7)],
            # the roster by hand (web/roster.py): who the "add" select offers
            "roster_people": [(t.email, t.name) for t in by_email.values() if t.active],
            # each tender's own maximum, which caps the one they gave for the week
            "most": {t.email: t.max_shifts for t in by_email.values()},
            # a sent week's requests for cover, on their shifts (pubsched.covers.view)
            "cover_notes": cover_view.on_shifts(pub, shown["week_of"], self.site.now()),
        }

    async def act(self, request: Request) -> Response:
        return await self._press(request.path_params["week"], request.path_params["name"],
                                 await request.form(), check_seen=True)

    async def open_week(self, request: Request) -> Response:
        """The weeks page's "open a week" form: the Monday to open, then its page (no
        fingerprint: a second click meets the engine's refusal, the week being open)."""
        return await self._on_monday(request, "open")

    async def create_week(self, request: Request) -> Response:
        """The weeks page's "Create as draft" form: the week and its shifts, the form not
        open (autopilot's first step then has a week to take); a second click meets the
        engine's refusal, the week existing."""
        return await self._on_monday(request, "create")

    async def _on_monday(self, request: Request, name: str) -> Response:
        form = await request.form()
        try:
            week = await self.site.run(week_of, text(form, "week") or "")
        except BadInput as exc:
            return self.pages.flash(RedirectResponse(ADMIN_PATH + "/", status_code=303),
                                    "refused", str(exc))
        return await self._press(week, name, form, check_seen=False)

    async def _press(self, week: str, name: str, form: FormData, *,
                     check_seen: bool) -> Response:
        back = f"{ADMIN_PATH}/weeks/{quote(week)}"
        try:
            outcome = await self.site.run(self.buttons.press, week, name, form, check_seen)
        except BadInput as exc:
            return self.pages.flash(RedirectResponse(back, status_code=303), "refused",
                                    str(exc))
        return self.pages.told(back, outcome)

