"""How a page is drawn: the Jinja2 templates (``templates/``), the ``local`` filter that
shows a stored UTC instant in the pub's zone, and the flash message that survives one
redirect (a signed cookie on the admin path).

Rendering only: no route, no domain call. The admin's pages carry ``cache-control:
no-store`` (they show live state and the buttons' fingerprints), and show a pending flash
once, then drop its cookie.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ..config import Config
from ..db.instants import instant
from ..machine import RUN
from ..mail.wording import day
from ..verdicts import Verdict
from ..words import STATE_LABELS

# a history row's move as people say it: the machine's own labels, and the week's birth
EDGE_LABELS = {"create": "created", **{e.name: e.label or e.name for e in RUN.edges}}

HERE = Path(__file__).parent
ADMIN_PATH = "/admin"
FLASH_COOKIE = "pubsched_flash"
FLASH_MAX_AGE = 120


def as_time(value: Any) -> datetime | None:
    """A stored instant (:func:`pubsched.db.instants.instant`), else None: a page shows
    what is not an instant as it is."""
    try:
        return instant(value)
    except ValueError:
        return None


def monday(week: str) -> str:
    """A week's Monday as a list shows it: ``Mon 14 Dec 2026`` (as its emails name it)."""
    return day(date.fromisoformat(week))


class Pages:
    """The templates and the flash cookie, for one pub's zone and secret."""

    def __init__(self, config: Config, *, secure_cookies: bool) -> None:
        self.config = config
        self.secure_cookies = secure_cookies
        self.flashes = URLSafeTimedSerializer(config.signing_keys,
                                              salt="pubsched.flash.v1")
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"),
                               autoescape=select_autoescape(["html"]))
        self.env.filters["local"] = self.local
        self.env.filters["state_label"] = lambda state: STATE_LABELS.get(state, state)
        self.env.filters["monday"] = monday
        self.env.filters["edge_label"] = lambda edge: EDGE_LABELS.get(edge, edge)

    def local(self, value: Any, style: str = "long") -> str:
        """A stored UTC instant in the pub's own time zone, as people read it."""
        moment = as_time(value)
        if moment is None:
            return "—" if value in (None, "") else str(value)
        here = moment.astimezone(self.config.tz)
        if style == "input":  # a datetime-local field's value, on the pub's wall clock
            return f"{here:%Y-%m-%dT%H:%M}"
        if style == "zone":  # the zone a field's wall time is read in
            return f"{self.config.tz.key}, {here.tzname()}"
        if style == "short":
            return f"{here:%a} {here.day} {here:%b %H:%M}"
        return f"{here:%a} {here.day} {here:%b %Y, %H:%M} {here.tzname()}"

    def page(self, request: Request, name: str, context: Mapping[str, Any], *,
             status: int = 200, headers: Mapping[str, str] | None = None) -> HTMLResponse:
        text = self.env.get_template(name).render(request=request, **context)
        return HTMLResponse(text, status_code=status, headers=dict(headers or {}))

    def admin_page(self, request: Request, name: str, context: Mapping[str, Any], *,
                   status: int = 200) -> HTMLResponse:
        flash = self.take_flash(request)
        who = request.scope.get("state", {}).get("operator")  # set by the operator gate
        response = self.page(request, name, {"flash": flash, "admin": True,
                                             "operator": who, **context},
                             status=status, headers={"cache-control": "no-store"})
        if flash is not None:
            response.delete_cookie(FLASH_COOKIE, path=ADMIN_PATH)
        return response

    def flash(self, response: Response, kind: str, text: str) -> Response:
        """``response`` carrying a message for the next admin page (``kind``: ok, refused,
        failed)."""
        if len(text) > 1500:  # a cookie holds about 4 kB; the page shows the rest anyway
            text = text[:1500] + "…"
        response.set_cookie(FLASH_COOKIE, self.flashes.dumps({"k": kind, "t": text}),
                            max_age=FLASH_MAX_AGE, path=ADMIN_PATH, httponly=True,
                            samesite="lax", secure=self.secure_cookies)
        return response

    def told(self, back: str, outcome: Verdict) -> Response:
        """A redirect to ``back`` flashing what became of an action: ok, failed (it ran
        and failed: SMTP) or refused, in the verdict's words (its reason when it has
        none). Every admin form that runs one action answers with it."""
        kind = "ok" if outcome.applied else "failed" if outcome.failed else "refused"
        return self.flash(RedirectResponse(back, status_code=303), kind,
                          outcome.message or (outcome.reason or ""))

    def take_flash(self, request: Request) -> dict[str, str] | None:
        raw = request.cookies.get(FLASH_COOKIE)
        if not raw:
            return None
        try:
            data = self.flashes.loads(raw, max_age=FLASH_MAX_AGE)
        except BadSignature:
            return None
        if not isinstance(data, dict):
            return None
        return {"kind": str(data.get("k", "ok")), "text": str(data.get("t", ""))}
