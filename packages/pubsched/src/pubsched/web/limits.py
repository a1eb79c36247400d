"""How big a request body may be, refused before it is read: 413.

Without a limit anyone could post a 150 MB body to the login page and have it read and
parsed in memory. The login and a tender's form are public and small (a password; a week,
a maximum and a few shift ids): 8 kB. The operator's posts are a little richer but never
big: 64 kB. An announced ``Content-Length`` over the limit is refused before a byte is read;
a body without one (chunked) is counted as it streams in and refused at the first chunk
over the limit, so no more than the limit is ever held. The answer is a short page saying
that nothing was saved.

A refused body of up to :data:`DRAIN_AT_MOST` bytes is read and dropped before the answer:
answered first, the connection closed on a body still arriving, and a proxy still writing
it saw its write fail and answered 502 for our 413 (Caddy 2.6, a 20 kB login, one run in
three of ``tests/pubsched/test_proxy.py``). A bigger one is answered at once and the
connection closed: reading it would be the work the limit is there to spare.
"""

from __future__ import annotations

import html

from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .pages import ADMIN_PATH

PUBLIC_LIMIT = 8 * 1024  # the login and a tender's form
LIMIT = 64 * 1024  # everything else (the operator's posts)
DRAIN_AT_MOST = 1024 * 1024  # the most of a refused body read and dropped (see above)


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
                if announced.isdigit() and int(announced) <= DRAIN_AT_MOST:
                    await _drain(receive, 0)
                await _refuse(scope, receive, send, limit)
                return
        received = 0
        ended = False
        started = False

        async def counted() -> Message:
            nonlocal received, ended
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                ended = not message.get("more_body", False)
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
            if not ended:
                await _drain(receive, received)
            await _refuse(scope, receive, send, limit)


async def _drain(receive: Receive, read: int) -> None:
    """Read and drop the rest of a refused body, ``read`` bytes of it already in, up to
    :data:`DRAIN_AT_MOST` in all (see the module docstring)."""
    while read <= DRAIN_AT_MOST:
        message = await receive()
        if message["type"] != "http.request":
            return  # the client went away
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _refuse(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    text = (f"What was sent is too large (more than {limit // 1024} kB for this page): "
            "nothing was saved.")
    response = HTMLResponse(f"<h1>Too large</h1><p>{html.escape(text)}</p>",
                            status_code=413, headers={"connection": "close"})
    await response(scope, receive, send)
