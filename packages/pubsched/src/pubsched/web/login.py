"""The operator's login and logout: an email and a password (throttled per client), the
session cookie on the admin path naming the account, and where a login may go on to (only
an admin path of ours).

Two kinds of account log in here. An operator account (:mod:`pubsched.people.operators`) logs in
by its email. ``admin`` (or an empty email: a script written for the single-password form
of old) is the quick start's account, opened by ``PUBSCHED_ADMIN_PASSWORD``. The throttle
sees every attempt alike, counted per client before any check (:mod:`.auth`); a wrong
operator email costs the same work as a wrong password and gets the same answer, so the
page never says which emails have accounts.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..people import operators
from .auth import ADMIN, SESSION_COOKIE
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


def signed_in(site: Site, response: Response, who: str, operator_id: int | None,
              stamp: str | None) -> Response:
    """``response`` carrying a fresh session cookie for the account: a login's, or the
    changer's own after a new password ended the account's old sessions."""
    response.set_cookie(SESSION_COOKIE, site.sessions.issue(who, operator_id, stamp),
                        max_age=site.settings.session_max_age, path=ADMIN_PATH,
                        httponly=True, samesite="lax", secure=site.pages.secure_cookies)
    return response


class Login:
    """``GET``/``POST /admin/login`` and ``POST /admin/logout``."""

    def __init__(self, site: Site) -> None:
        self.site = site

    async def form(self, request: Request) -> Response:
        return self.site.pages.page(request, "login.html", {
            "configured": await self.site.run(self.site.login_open),
            "email": "", "next": safe_next(request.query_params.get("next")), "error": None})

    async def login(self, request: Request) -> Response:
        settings, pages = self.site.settings, self.site.pages
        form = await request.form()
        target = safe_next(text(form, "next"))
        email = (text(form, "email") or "").strip()[:320]
        client = request.client.host if request.client else "unknown"
        wait = settings.throttle.admit(client)  # counted as a failure until it succeeds
        if wait > 0:
            return pages.page(request, "login.html", {
                "configured": True, "next": target, "email": email,
                "error": f"Too many failed logins: try again in {int(wait) + 1} s."},
                status=429, headers={"retry-after": str(int(wait) + 1)})
        attempt = text(form, "password") or ""
        as_admin = email == "" or email.lower() == ADMIN
        if as_admin:
            ok = await self.site.run(settings.password.check, attempt)
            who, operator_id, stamp = ADMIN, None, None
        else:
            found = await self.site.run(
                lambda: operators.verify(self.site.pub, email, attempt, now=self.site.now()))
            ok = found is not None
            who, operator_id, stamp = ((found.email, found.id, found.stamp) if found
                                       else (email, None, None))
        if not ok:
            log.warning("failed admin login from %s", client)
            return pages.page(request, "login.html", {
                "configured": await self.site.run(self.site.login_open), "next": target,
                "email": email, "error": self._refusal(as_admin)}, status=401)
        settings.throttle.succeeded(client)
        return signed_in(self.site, RedirectResponse(target, status_code=303), who,
                         operator_id, stamp)

    def _refusal(self, as_admin: bool) -> str:
        if not as_admin:
            return "Wrong email or password."
        if self.site.settings.password.configured:
            return "Wrong password."
        # a visitor's page: no setting's name (how to open it is the administrator's, in
        # docs/web.md)
        return "There is no admin account here: log in with your operator account's email."

    async def logout(self, request: Request) -> Response:
        sid = request.scope.get("state", {}).get("operator_sid")
        if sid:
            await self.site.run(self.site.log_out, sid)
        response = RedirectResponse(ADMIN_PATH + "/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=ADMIN_PATH, httponly=True,
                               samesite="lax", secure=self.site.pages.secure_cookies)
        return response
