"""The two gates every request meets before a handler: the cross-origin check with the
security headers (on the whole app), and the operator's session (on ``/admin``).

Both are pure ASGI middleware, so no route can forget them: every unsafe request, the
login and the tender form included, passes :func:`pubsched.web.auth.cross_origin_refusal`
first; everything under ``/admin`` but the login page needs a valid session. The session
cookie's path is ``/admin``, so a tender's pages never even receive it, and nothing a
tender's link carries is ever read by the gate: a tender link on an admin URL meets the
login page. The rules themselves (password, throttle, sessions, the header check) are in
:mod:`pubsched.web.auth`, which knows nothing of ASGI.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Config
from ..context import acting_as
from .auth import SESSION_COOKIE, Session, Sessions, cross_origin_refusal
from .logs import loggable_path
from .pages import ADMIN_PATH

log = logging.getLogger("pubsched.web")


class SecurityHeaders:
    """The cross-origin check on every unsafe request, and the headers every answer
    carries (no framing, no referrer: a tender's link is a secret in the URL; nothing but
    our own scripts). Built by ``add_middleware``: the app first, keywords after."""

    HEADERS = [
        (b"content-security-policy",
         b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
         b"img-src 'self' data:; font-src 'self' data:; object-src 'none'; "
         b"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    ]

    def __init__(self, app: ASGIApp, trusted: tuple[str, ...] = (),
                 config: Config | None = None) -> None:
        self.app = app
        self.trusted = trusted
        self.config = config or Config()  # whose links a refused path may carry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope["headers"]}
        refusal = cross_origin_refusal(scope["method"], headers, trusted=self.trusted)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *self.HEADERS]
            await send(message)

        if refusal is not None:
            log.warning("refused %s %s: %s", scope["method"],
                        loggable_path(scope["path"], self.config), refusal)
            response = HTMLResponse(f"<h1>Refused</h1><p>{html.escape(refusal)}.</p>",
                                    status_code=403)
            await response(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


class OperatorGate:
    """Everything under /admin needs a valid operator session, except the login page; the
    session's id is left in ``scope["state"]["operator_sid"]`` (the logout ends it), who
    it is in ``scope["state"]["operator"]``, and every move the request makes records
    ``operator:WHO`` (:func:`pubsched.context.acting_as`). ``alive``: whether the session's
    account still exists (asked at every request, through the site's door: it reads the
    database), so a removed operator is out at their next click."""

    def __init__(self, app: ASGIApp, sessions: Sessions,
                 alive: Callable[[Session], Awaitable[bool]] | None = None) -> None:
        self.app = app
        self.sessions = sessions
        self.alive = alive

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if path != ADMIN_PATH + "/login":
                request = Request(scope)
                session = self.sessions.session(request.cookies.get(SESSION_COOKIE))
                if session is not None and self.alive is not None \
                        and not await self.alive(session):
                    session = None
                if session is None:
                    target = path if scope["method"] == "GET" else ADMIN_PATH + "/"
                    response = RedirectResponse(
                        f"{ADMIN_PATH}/login?next={quote(target)}", status_code=303)
                    await response(scope, receive, send)
                    return
                scope["state"] = {**scope.get("state", {}), "operator_sid": session.sid,
                                  "operator": session.who}
                with acting_as(f"operator:{session.who}"):
                    await self.app(scope, receive, send)
                return
        await self.app(scope, receive, send)
