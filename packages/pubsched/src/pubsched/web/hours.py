"""``/admin/hours``: the hours report on the web (the same lines as ``pubsched report
hours``, :mod:`pubsched.people.hours`), for a range of days the operator picks (this month so
far by default), the shifts still to come at the request's instant beside those on the
roster, each tender's count in the trailing weeks the picker weighs, and the CSV download a
spreadsheet opens (the CLI's own text, neutralised against formulas in one place)."""

from __future__ import annotations

from datetime import date
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..people import hours
from ..verdicts import BadInput
from .site import Site


def _range(request: Request, today: date) -> tuple[date, date]:
    """The days asked for (``?from=&to=``), this month so far when not given."""
    try:
        start = date.fromisoformat(request.query_params.get("from") or
                                   today.replace(day=1).isoformat())
        end = date.fromisoformat(request.query_params.get("to") or today.isoformat())
    except ValueError:
        raise BadInput("a day is YYYY-MM-DD") from None
    hours.check_range(start, end)
    return start, end


class HoursPages:
    """The report page and its download."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages

    def _today(self) -> date:
        return self.site.now().astimezone(self.site.pub.config.tz).date()

    async def page(self, request: Request) -> Response:
        today = self._today()
        try:
            start, end = _range(request, today)
        except BadInput as exc:
            return self.pages.admin_page(request, "hours.html", {
                "problem": str(exc), "lines": [], "start": request.query_params.get("from"),
                "end": request.query_params.get("to"), "rolling": {},
                "weeks": hours.HISTORY_WEEKS}, status=400)

        def context() -> dict[str, Any]:
            pub = self.site.pub
            return {"lines": hours.hours_worked(pub, start, end, now=self.site.now()),
                    "start": start.isoformat(),
                    "end": end.isoformat(), "rolling": hours.rolling_counts(pub, today),
                    "weeks": hours.HISTORY_WEEKS, "text": hours.hours_text}

        return self.pages.admin_page(request, "hours.html", await self.site.run(context))

    async def download(self, request: Request) -> Response:
        try:
            start, end = _range(request, self._today())
        except BadInput as exc:
            return Response(f"{exc}\n", status_code=400, media_type="text/plain")
        lines = await self.site.run(hours.hours_worked, self.site.pub, start, end,
                                    now=self.site.now())
        name = f"hours-{start.isoformat()}-to-{end.isoformat()}.csv"
        return Response(hours.as_csv(lines), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})
