"""When the database does not answer: every request's work passes one watch, and a request
that cannot be served without the database gets a page that says so (503), at once, in
the pub's words, instead of hanging or a 500.

Why: a PostgreSQL cluster's failover (docs/scale.md) leaves no primary for 10 to 20 s; a
stopped server or a cut link for longer. A request then waits for a connection (the pool's
30 s) or, on a connection the server stopped answering, for ever, and the work it was
doing ends in an error the crash page would call "Something went wrong". What the person
needs to hear is "the database is not answering; try again in a moment", quickly, and the
same process must serve again as soon as the database answers, without a restart.

How (:class:`Watch`, the door :meth:`pubsched.web.site.Site.run` goes through):

* **work that takes long asks whether the database answers.** Every call runs off the
  loop, as before; one that has not finished after :data:`PATIENCE` seconds makes the
  watch ask the probe (``SELECT 1`` within 1.5 s, :mod:`.within`, the one ``/healthz``
  asks). A database that answers lets the work go on (a long send, a slow page); one that
  does not makes the request a 503 now (:class:`DatabaseAway`), its work left to finish or
  fail in its thread: abandoned, never cancelled half-way (a unit of work commits whole or
  not at all);
* **while the database is known away**, a request first asks the probe, and is a 503
  before doing anything when it still does not answer (so nothing was changed), one read
  in flight for all of them (no thread piles up per request). The first answer ends it;
* **what the database raised** (no connection, the connection lost, the COMMIT's answer
  lost, the statement cancelled) is a 503 too (:func:`unanswered`), and marks the
  database away for the next request.

A 503 for a form that was being saved says that it may or may not have been saved and to
check the page before doing it again: the work may have landed, in part (an action of
several units) or whole, or be landing still. One that was refused before it began says
nothing was changed. Pages get the app's own page; the calendar feed and ``/metrics``
plain text. Each is logged as one warning line, with no traceback.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from rowstate import ConnectError, ConnectionLostError, StatementCancelled

from .logs import loggable_path
from .pages import Pages
from .within import Deadline

log = logging.getLogger("pubsched.web")

P = ParamSpec("P")
T = TypeVar("T")

#: seconds a request's work runs before the watch asks whether the database answers
PATIENCE = 2.0
#: seconds a client is told to wait before it asks again
RETRY_AFTER = 5
#: what the database raises when it does not answer (the exception handlers' classes)
UNANSWERED = (ConnectError, ConnectionLostError, StatementCancelled)


class DatabaseAway(Exception):
    """The request cannot be served: the database does not answer. ``begun``: its work
    had started (it may have landed); else nothing was attempted."""

    def __init__(self, *, begun: bool) -> None:
        super().__init__("the database does not answer")
        self.begun = begun


class Watch:
    """Whether the database answers, as this app's requests find it (module docstring)."""

    def __init__(self, probe: Deadline[bool], *, patience: float = PATIENCE) -> None:
        self.probe = probe
        self.patience = patience
        self.away = False  # read and written on the event loop only
        self._abandoned: set[asyncio.Future[Any]] = set()

    async def answers(self) -> bool:
        """Ask the probe (at most its deadline): True when the database answered."""
        try:
            await self.probe.answer()
        except Exception as exc:  # no answer in time, or the database's error
            self._lost(exc)
            return False
        if self.away:
            log.warning("the database answers again")
        self.away = False
        return True

    async def run(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``call`` in a worker thread, or :class:`DatabaseAway` (module docstring)."""
        return await self._watched(functools.partial(call, *args, **kwargs), changes=True)

    async def read(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """:meth:`run` for a call that changes nothing (the operator gate's check): given
        up, it is :class:`DatabaseAway` with nothing begun."""
        return await self._watched(functools.partial(call, *args, **kwargs), changes=False)

    async def _watched(self, call: Callable[[], T], *, changes: bool) -> T:
        if self.away and not await self.answers():
            raise DatabaseAway(begun=False)
        work = asyncio.ensure_future(run_in_threadpool(call))
        while not (await asyncio.wait({work}, timeout=self.patience))[0]:
            if not await self.answers():
                self._abandon(work)
                raise DatabaseAway(begun=changes)
        try:
            return work.result()
        except (ConnectError, ConnectionLostError) as exc:
            self._lost(exc)  # the next request asks first
            raise

    def _lost(self, why: Exception) -> None:
        if not self.away:
            log.warning("the database does not answer (%s): requests get 503 until it "
                        "does", f"{type(why).__name__}: {why}".splitlines()[0])
        self.away = True

    def _abandon(self, work: asyncio.Future[T]) -> None:
        """Leave ``work`` to end in its thread; its result or error is dropped then."""
        self._abandoned.add(work)

        def ended(done: asyncio.Future[T]) -> None:
            self._abandoned.discard(done)
            if not done.cancelled() and done.exception() is not None:
                log.info("a request given up while the database did not answer ended: %s",
                         done.exception())

        work.add_done_callback(ended)


def unanswered(pages: Pages) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The exception handler of :class:`DatabaseAway` and :data:`UNANSWERED`: a 503."""
    async def handler(request: Request, exc: Exception) -> Response:
        begun = not isinstance(exc, DatabaseAway) or exc.begun
        log.warning("the database did not answer %s %s: %s", request.method,
                    loggable_path(request.url.path, pages.config),
                    f"{type(exc).__name__}: {exc}".splitlines()[0])
        if request.method in ("GET", "HEAD"):
            text = ("The pub's database is switching over or not answering. Try again in a "
                    "moment: nothing is lost.")
        elif begun:
            text = ("The pub's database stopped answering while this was being saved, so it "
                    "may or may not have been saved. Check the page in a moment before you "
                    "do it again.")
        else:
            text = ("The pub's database is switching over or not answering, so nothing was "
                    "changed. Try again in a moment.")
        headers = {"retry-after": str(RETRY_AFTER), "cache-control": "no-store"}
        path = request.url.path
        if path.endswith((".ics", "/metrics")):  # read by programs, not people
            return PlainTextResponse(text, status_code=503, headers=headers)
        return pages.page(request, "problem.html", {
            "title": "The database is not answering", "text": text}, status=503,
            headers=headers)

    return handler


__all__ = ["PATIENCE", "UNANSWERED", "DatabaseAway", "Watch", "unanswered"]
