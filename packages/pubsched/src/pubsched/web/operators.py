"""``/admin/operators``: the operator accounts, added and removed on the web (the same
rules as ``pubsched operator``: :mod:`pubsched.people.operators`).

A new account's password is typed twice (two fields that differ save nothing) and hashed
with the app's hasher. Removing the last account is refused unless
``PUBSCHED_ADMIN_PASSWORD`` opens the admin anyway: the web cannot recover from locking
everyone out (the CLI can, and allows it). A removed operator's sessions stop at their
next request (the gate asks :meth:`pubsched.web.site.Site.still_valid`), the operator's
own included. An operator changes their own password here (the current one first, the
new one twice); their other sessions end (:mod:`pubsched.people.operators`), this one goes on
with a fresh cookie. ``admin``'s password is ``PUBSCHED_ADMIN_PASSWORD``, not changed here.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..people import operators
from ..verdicts import BadInput, Verdict
from .auth import ADMIN
from .forms import text
from .login import signed_in
from .pages import ADMIN_PATH
from .site import Site

BACK = ADMIN_PATH + "/operators"


class OperatorPages:
    """The operators page's handlers."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages

    async def page(self, request: Request) -> Response:
        def context() -> dict[str, Any]:
            return {"accounts": operators.all_operators(self.site.pub),
                    "admin_open": self.site.settings.password.configured}

        return self.pages.admin_page(request, "operators.html",
                                     await self.site.run(context))

    async def add(self, request: Request) -> Response:
        form = await request.form()
        email = text(form, "email") or ""
        password, again = text(form, "password") or "", text(form, "password_again") or ""

        def go() -> Verdict:
            if password != again:
                raise BadInput("the two passwords differ: nothing was saved")
            return operators.add(self.site.pub, email, password,
                                 hasher=self.site.settings.password.hasher,
                                 now=self.site.now())

        return await self._answer(go)

    async def remove(self, request: Request) -> Response:
        operator_id = int(request.path_params["operator_id"])  # the route's {..:id}

        def go() -> Verdict:
            found = operators.by_id(self.site.pub, operator_id)
            if found is None:
                raise BadInput("no such operator account")
            return operators.remove(self.site.pub, found.email,
                                    keep_one=not self.site.settings.password.configured)

        return await self._answer(go)

    async def password(self, request: Request) -> Response:
        form = await request.form()
        current = text(form, "current") or ""
        password, again = text(form, "password") or "", text(form, "password_again") or ""
        who = request.scope.get("state", {}).get("operator") or ADMIN
        back = RedirectResponse(BACK, status_code=303)
        if who == ADMIN:
            return self.pages.flash(back, "refused", "the admin account's password is "
                                    "PUBSCHED_ADMIN_PASSWORD: change it where the server is "
                                    "set up")

        def go() -> Verdict:
            if password != again:
                raise BadInput("the two new passwords differ: nothing was changed")
            return operators.set_password(self.site.pub, who, password, current=current,
                                          hasher=self.site.settings.password.hasher)

        try:
            outcome: Verdict = await self.site.run(go)
        except BadInput as exc:
            return self.pages.flash(back, "refused", str(exc))
        if not outcome.applied:
            return self.pages.told(BACK, outcome)
        found = await self.site.run(operators.find, self.site.pub, who)
        if found is None:  # removed meanwhile: the gate logs them out at the next click
            return self.pages.told(BACK, outcome)
        done = self.pages.flash(back, "ok", "Your password is changed; you are still logged "
                                "in here, and logged out everywhere else.")
        return signed_in(self.site, done, found.email, found.id,
                         str(outcome.detail["stamp"]))

    async def _answer(self, go: Any) -> Response:
        back = RedirectResponse(BACK, status_code=303)
        try:
            outcome: Verdict = await self.site.run(go)
        except BadInput as exc:
            return self.pages.flash(back, "refused", str(exc))
        return self.pages.told(BACK, outcome)  # an account's verdict never ran and failed
