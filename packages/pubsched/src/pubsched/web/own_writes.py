"""A person sees what they just did, when the pages read a standby
(``PUBSCHED_DB_READS``, docs/scale.md "Reads on a standby").

The pages read in read-only units, which go to the standby: a little behind the primary
(milliseconds, seconds under load). Inside one request, rowstate sends the reads after a
write to the primary. But a form's answer is a redirect, and the page it leads to is
another request, which would read the standby and could show the week without the pin
just made. So every answer to a post carries the primary's log position after it, in a
cookie (not one answered 4xx or 5xx: it saved nothing, and with the primary away taking
a position would wait for the pool); a request that brings it back reads the standby only
once the standby has replayed that far, else the primary (``reading_after``). Posts are
few (an operator's clicks, a tender's answers): one more statement each; the pages cost
nothing more until a post was made, and then one statement per read unit for five
minutes.
"""

from __future__ import annotations

import logging
import re
from http.cookies import CookieError, SimpleCookie

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import rowstate

from ..db.store import StandbyReads

log = logging.getLogger("pubsched.web")

COOKIE = "pubsched_seen"
KEPT_SECONDS = 300  # longer than a standby is ever behind while it is of any use
_POSITION = re.compile(r"[0-9A-F]{1,8}/[0-9A-F]{1,8}")  # a log position, pg_lsn's text
_SAFE = {"GET", "HEAD", "OPTIONS"}


def position_in(scope: Scope) -> str | None:
    """The log position the request's cookie carries, if it is one (anything else is
    ignored: it could only send reads to the primary, but a malformed one would fail the
    check's statement)."""
    for name, value in scope["headers"]:
        if name == b"cookie":
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(value.decode("latin-1"))
            except CookieError:  # a cookie header we cannot read: no position
                return None
            morsel = cookie.get(COOKIE)
            if morsel is not None and _POSITION.fullmatch(morsel.value.upper()):
                return morsel.value.upper()
    return None


class OwnWrites:
    """Pure ASGI (see the module docstring); nothing at all without a standby's reads."""

    def __init__(self, app: ASGIApp, *, reads: StandbyReads | None, secure: bool) -> None:
        self.app, self.reads, self.secure = app, reads, secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reads = self.reads
        if scope["type"] != "http" or reads is None:
            await self.app(scope, receive, send)
            return
        if scope["method"] in _SAFE:
            with reads.reading_after(position_in(scope)):
                await self.app(scope, receive, send)
            return

        async def with_position(message: Message) -> None:
            # a post answered 4xx/5xx saved nothing to see (or the database is away: no
            # position to wait for); the others started after the handler's units committed
            if message["type"] == "http.response.start" and message["status"] < 400:
                try:
                    position = await run_in_threadpool(reads.position)
                except rowstate.RowstateError as exc:  # the answer goes out regardless
                    log.warning("no log position for the answer: %s", exc)
                else:
                    flags = "; Secure" if self.secure else ""
                    MutableHeaders(scope=message).append(
                        "set-cookie", f"{COOKIE}={position}; Max-Age={KEPT_SECONDS}; "
                        f"Path=/; HttpOnly; SameSite=Lax{flags}")
            await send(message)

        await self.app(scope, receive, with_position)
