"""How big a request body may be, refused before it is read: 413.

Without a limit anyone could post a 150 MB body to the login page and have it read and
parsed in memory. The login and a tender's form are public and small (a password; a week,
a maximum and a few shift ids): 8 kB. The operator's posts are a little richer but never
big: 64 kB. An announced ``Content-Length`` over the limit is refused before a byte is read;
a body without one (chunked) is counted as it streams in and refused at the first chunk
over the limit, so no more than the limit is ever held. The answer is a short page saying
that nothing was saved.
"""

from __future__ import annotations

import html

from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .pages import ADMIN_PATH

PUBLIC_LIMIT = 8 * 1024  # the login and a tender's form
LIMIT = 64 * 1024  # everything else (the operator's posts)


def limit_for(path: str) -> int:
    """The most bytes a body posted to ``path`` may have."""
    if path == ADMIN_PATH + "/login" or path.startswith("/t/"):
        return PUBLIC_LIMIT
    return LIMIT


class _TooLarge(Exception):
    """Raised from ``receive`` the moment a streamed body passes its limit."""


class BodyLimit:
    """Pure ASGI: refuse bodies over :func:`limit_for` with 413, reading no more than that."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(scope["path"])
        announced = dict(scope["headers"]).get(b"content-length")
        if announced is not None:
            try:
                too_big = int(announced) > limit
            except ValueError:  # uvicorn refuses these first; say so all the same
                too_big = True
            if too_big:
                await _refuse(scope, receive, send, limit)
                return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if started:  # the app answered before reading it all: nothing left to say
                raise
            await _refuse(scope, receive, send, limit)


async def _refuse(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    text = (f"What was sent is too large (more than {limit // 1024} kB for this page): "
            "nothing was saved.")
    response = HTMLResponse(f"<h1>Too large</h1><p>{html.escape(text)}</p>",
                            status_code=413, headers={"connection": "close"})
    await response(scope, receive, send)
