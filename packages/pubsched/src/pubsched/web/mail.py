"""``/admin/mail``: the mail of unknown fate, of every kind (the schedule, cover mail,
reminders, nudges, invitations), each with a "Resend" button.

An email is listed when its handover to the mail server began and no answer came: it may
have arrived, so nothing sends it again on its own (:mod:`pubsched.deliveries.resend`).
"Resend" is :func:`pubsched.deliveries.resend.resend`, the call ``pubsched mail resend``
makes, so the page and the CLI refuse alike (delivered already, being sent right now);
its answer is the page again with a flash in the verdict's words. The resend runs in the
request (one email, one SMTP handover) so the flash can say what became of it.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..deliveries.resend import resend, unknown
from ..mail.wording import zone_words
from ..tick.run import EVERY_COMPOSER
from ..verdicts import BadInput
from .pages import ADMIN_PATH
from .site import Site

PAGE = ADMIN_PATH + "/mail"


class MailPages:
    """The mail page and its resend button."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = site.pages

    async def page(self, request: Request) -> Response:
        def context() -> dict[str, Any]:
            pub, now = self.site.pub, self.site.now()
            found = unknown(pub)
            return {"mails": found,
                    "zone": zone_words(pub.config.tz, [m.owed_at for m in found] or [now])}

        return self.pages.admin_page(request, "mail.html", await self.site.run(context))

    async def resend(self, request: Request) -> Response:
        number = request.path_params["mail_id"]
        try:
            outcome = await self.site.run(
                lambda: resend(self.site.pub, number, EVERY_COMPOSER, self.site.now()))
        except BadInput as exc:
            return self.pages.flash(RedirectResponse(PAGE, status_code=303), "refused",
                                    str(exc))
        return self.pages.told(PAGE, outcome)
