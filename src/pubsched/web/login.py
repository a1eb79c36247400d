"""The operator's login and logout: the password check (throttled per client), the session
cookie on the admin path, and where a login may go on to (only an admin path of ours)."""

from __future__ import annotations

import logging

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .auth import SESSION_COOKIE
from .forms import text
from .pages import ADMIN_PATH
from .site import Site

log = logging.getLogger("pubsched.web")


def safe_next(value: str | None) -> str:
    """Where a login goes on to: only an admin path of ours, never another site."""
    if value and value.startswith(ADMIN_PATH + "/") and not value.startswith("//") \
            and "\\" not in value:
        return value
    return ADMIN_PATH + "/"


class Login:
    """``GET``/``POST /admin/login`` and ``POST /admin/logout``."""

    def __init__(self, site: Site) -> None:
        self.site = site

    async def form(self, request: Request) -> Response:
        return self.site.pages.page(request, "login.html", {
            "configured": self.site.settings.password.configured,
            "next": safe_next(request.query_params.get("next")), "error": None})

    async def login(self, request: Request) -> Response:
        settings, pages = self.site.settings, self.site.pages
        form = await request.form()
        target = safe_next(text(form, "next"))
        client = request.client.host if request.client else "unknown"
        wait = settings.throttle.admit(client)  # counted as a failure until it succeeds
        if wait > 0:
            return pages.page(request, "login.html", {
                "configured": True, "next": target,
                "error": f"Too many failed logins: try again in {int(wait) + 1} s."},
                status=429, headers={"retry-after": str(int(wait) + 1)})
        attempt = text(form, "password") or ""
        ok = await run_in_threadpool(settings.password.check, attempt)
        if not ok:
            log.warning("failed admin login from %s", client)
            return pages.page(request, "login.html", {
                "configured": settings.password.configured, "next": target,
                "error": "Wrong password." if settings.password.configured
                else "The admin is closed: no PUBSCHED_ADMIN_PASSWORD is set."}, status=401)
        settings.throttle.succeeded(client)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(SESSION_COOKIE, self.site.sessions.issue(),
                            max_age=settings.session_max_age, path=ADMIN_PATH,
                            httponly=True, samesite="lax", secure=pages.secure_cookies)
        return response

    async def logout(self, request: Request) -> Response:
        sid = request.scope.get("state", {}).get("operator_sid")
        if sid:
            self.site.sessions.end(sid)
        response = RedirectResponse(ADMIN_PATH + "/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=ADMIN_PATH, httponly=True,
                               samesite="lax", secure=self.site.pages.secure_cookies)
        return response
