"""The ASGI app: the routes, the gates, the lifespan; every handler lives in the module of
its pages.

Routes (``/admin`` needs the operator's session; everything else is public)::

    GET  /                               -> /admin/
    GET  /healthz                        {"ok": true} when the database answers (no login);
                                         503 within 2 s when it does not (within.py), and
                                         every page too, at once (outage.py)
    GET  /static/...                     the stylesheet, the script, the vendored mermaid.js
    GET  /admin/login   POST /admin/login   POST /admin/logout        login.py
    GET  /admin/                         the weeks, and a form to open a new one  admin.py
    POST /admin/open   POST /admin/create   open a Monday's week; create it as a draft
    GET  /admin/weeks/{week}             one week: diagram, buttons, grid, deliveries...
    POST /admin/weeks/{week}/do/{name}   one button: engines.actions.perform(name)  buttons.py
    GET  /admin/tenders   POST /admin/tenders/add    the tenders, their links; add one  tenders.py
    GET  /admin/tenders/{id}   POST /admin/tenders/{id}   one tender's details; save them
    POST /admin/tenders/{id}/deactivate|activate|revoke|invite   POST /admin/tenders/invite
    GET  /admin/cutover   POST /admin/cutover/flag                    cutover.py
    POST /admin/cutover/rehearsal   .../rehearsal/next   .../rehearsal/stop   the wizard
    GET  /admin/template                 the pub's week; POST .../add, .../{id}/edit|remove
    POST /admin/weeks/{week}/shifts/add  a one-off shift; .../shifts/{id}/remove  template.py
    GET  /admin/hours   GET /admin/hours.csv   the hours report; its CSV      hours.py
    GET  /admin/metrics                  Prometheus' text format               metrics.py
    GET  /admin/operators                the operator accounts; add, remove;  operators.py
                                         change your own password
    POST /admin/operators/add   POST /admin/operators/{id}/remove
    POST /admin/weeks/{week}/roster/assign|unassign   the roster by hand        roster.py
    POST /admin/tenders/{id}/away|back   a tender's time off, by the operator  away.py
    GET  /admin/covers   POST /admin/covers/{id}/cancel   the cover requests   covers.py
    GET  /admin/mail   POST /admin/mail/{id}/resend   mail of unknown fate   mail.py
    GET  /t/{token}      POST /t/{token}  a tender's form (signed link)       tender.py
    POST /t/{token}/away   POST /t/{token}/back   their time off, by the tender  away.py
    POST /t/{token}/reminders            their switch of the shift reminders  reminders.py
    POST /t/{token}/covers/ask  .../covers/{id}/cancel|take  their covers  tender_covers.py
    GET  /c/{token}      POST /c/{token}  a cover's offer link: the shift; "I'll take it"
    GET  /cal/{token}.ics                a tender's calendar feed (signed link)

Why the shape (Datasette's: an app that wires views kept one module per kind of page):

* The admin is a mount of its own behind one gate (:class:`.security.OperatorGate`), so
  no admin route can forget the check; every unsafe request passes the cross-origin check
  first (:class:`.security.SecurityHeaders`), before any handler; outside both, the real
  client behind a trusted proxy is found (:class:`.proxy.ForwardedClient`), and inside, a
  body too big is refused unread (:class:`.limits.BodyLimit`, 413).
* Every refusal is a page with the engine's reason (HTTP 409), every bad input one with
  the message (400); a database that does not answer a page in its words (503, with
  Retry-After: :mod:`.outage`); an unexpected error is logged and shown as a short page
  with no trace (500).
* The domain is synchronous; handlers run it in the thread pool (the SQLite store keeps a
  connection per thread, the PostgreSQL store a pool).

Imports run one way: this module imports the page modules (admin, tenders, tender, login), which
import the site (site, pages, settings, auth) and the forms; none of them imports this one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles

from rowstate import ConnectError, ConnectionLostError, StatementCancelled

from ..db.store import standby_reads
from ..pub import Pub
from . import ids  # noqa: F401 (imported for its effect: the routes' {name:id} convertor)
from .admin import AdminPages
from .away import AwayPages
from .covers import CoverAdmin
from .cutover import CutoverPages
from .hours import HoursPages
from .limits import BodyLimit
from .login import Login
from .logs import loggable_path
from .mail import MailPages
from .metrics import Metrics, RequestMetrics, route_templates
from .operators import OperatorPages
from .outage import DatabaseAway, unanswered
from .own_writes import OwnWrites
from .pages import ADMIN_PATH, HERE, Pages
from .proxy import ForwardedClient
from .reminders import ReminderSwitch
from .roster import RosterPages
from .security import OperatorGate, SecurityHeaders
from .settings import WebSettings
from .site import Site
from .template import TemplatePages
from .tender import TenderPages
from .tender_covers import TenderCovers
from .tenders import TenderAdmin

log = logging.getLogger("pubsched.web")


def create_app(pub: Pub, settings: WebSettings, *,
               clock: Callable[[], datetime] | None = None,
               around: Callable[[], contextlib.AbstractContextManager[None]] | None = None
               ) -> Starlette:
    """The whole web front end over ``pub`` (the caller owns the pub and closes it).

    ``around``: what runs for as long as the app is served (``serve`` passes the ticker):
    entered at the ASGI lifespan's start and left at its end, which uvicorn reaches on
    SIGTERM or Ctrl-C before it re-raises the signal."""
    site = Site(pub, settings, clock=clock)
    login, admin, tender = Login(site), AdminPages(site), TenderPages(site)
    people = TenderAdmin(site)
    cutover = CutoverPages(site)
    week_plan = TemplatePages(site)
    accounts = OperatorPages(site)
    worked = HoursPages(site)
    by_hand = RosterPages(site)
    metrics = Metrics(pub)
    time_off = AwayPages(site, tender)
    reminders = ReminderSwitch(site)
    cover_desk, own_covers = CoverAdmin(site), TenderCovers(site)
    mail_desk = MailPages(site)
    admin_routes = [
        Route("/login", login.form, methods=["GET"]),
        Route("/login", login.login, methods=["POST"]),
        Route("/logout", login.logout, methods=["POST"]),
        Route("/", admin.weeks, methods=["GET"]),
        Route("/open", admin.open_week, methods=["POST"]),
        Route("/create", admin.create_week, methods=["POST"]),
        Route("/weeks/{week}", admin.week, methods=["GET"]),
        Route("/weeks/{week}/do/{name}", admin.act, methods=["POST"]),
        Route("/tenders", people.page, methods=["GET"]),
        Route("/tenders/add", people.add, methods=["POST"]),
        Route("/tenders/invite", people.invite_all, methods=["POST"]),
        Route("/tenders/{tender_id:id}", people.edit_page, methods=["GET"]),
        Route("/tenders/{tender_id:id}", people.save, methods=["POST"]),
        Route("/tenders/{tender_id:id}/deactivate", people.deactivate, methods=["POST"]),
        Route("/tenders/{tender_id:id}/activate", people.activate, methods=["POST"]),
        Route("/tenders/{tender_id:id}/revoke", people.revoke, methods=["POST"]),
        Route("/tenders/{tender_id:id}/invite", people.invite_one, methods=["POST"]),
        Route("/cutover", cutover.page, methods=["GET"]),
        Route("/cutover/flag", cutover.flag, methods=["POST"]),
        Route("/cutover/rehearsal", cutover.start, methods=["POST"]),
        Route("/cutover/rehearsal/next", cutover.next_step, methods=["POST"]),
        Route("/cutover/rehearsal/stop", cutover.stop, methods=["POST"]),
        Route("/template", week_plan.page, methods=["GET"]),
        Route("/template/add", week_plan.add, methods=["POST"]),
        Route("/template/{shift_id:id}/edit", week_plan.edit, methods=["POST"]),
        Route("/template/{shift_id:id}/remove", week_plan.remove, methods=["POST"]),
        Route("/weeks/{week}/shifts/add", week_plan.week_add, methods=["POST"]),
        Route("/weeks/{week}/shifts/{shift_id:id}/remove", week_plan.week_remove,
              methods=["POST"]),
        Route("/hours", worked.page, methods=["GET"]),
        Route("/hours.csv", worked.download, methods=["GET"]),
        Route("/metrics", metrics.page, methods=["GET"]),
        Route("/operators", accounts.page, methods=["GET"]),
        Route("/operators/add", accounts.add, methods=["POST"]),
        Route("/operators/password", accounts.password, methods=["POST"]),
        Route("/operators/{operator_id:id}/remove", accounts.remove, methods=["POST"]),
        Route("/weeks/{week}/roster/assign", by_hand.assign, methods=["POST"]),
        Route("/weeks/{week}/roster/unassign", by_hand.unassign, methods=["POST"]),
        Route("/tenders/{tender_id:id}/away", time_off.admin_away, methods=["POST"]),
        Route("/tenders/{tender_id:id}/back", time_off.admin_back, methods=["POST"]),
        Route("/covers", cover_desk.page, methods=["GET"]),
        Route("/covers/{cover_id:id}/cancel", cover_desk.cancel, methods=["POST"]),
        Route("/mail", mail_desk.page, methods=["GET"]),
        Route("/mail/{mail_id:id}/resend", mail_desk.resend, methods=["POST"]),
    ]

    async def root(request: Request) -> Response:
        return RedirectResponse(ADMIN_PATH + "/", status_code=303)

    async def healthz(request: Request) -> Response:
        """503 within 2 s when the database does not answer (:mod:`.within`); the watch
        logs when it stops answering and when it answers again (:mod:`.outage`)."""
        if not await site.database.answers():
            return JSONResponse({"ok": False, "database": "unreachable"}, status_code=503)
        return JSONResponse({"ok": True, "database": "ok"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        with around() if around is not None else contextlib.nullcontext():
            yield

    routes = [
        Route("/", root, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        Mount(ADMIN_PATH, app=OperatorGate(Router(routes=admin_routes), site.sessions,
                                           alive=site.session_alive)),
        Route("/t/{token}", tender.form, methods=["GET"]),
        Route("/t/{token}", tender.submit, methods=["POST"]),
        Route("/t/{token}/away", time_off.tender_away, methods=["POST"]),
        Route("/t/{token}/back", time_off.tender_back, methods=["POST"]),
        Route("/t/{token}/reminders", reminders.switch, methods=["POST"]),
        Route("/cal/{token}.ics", tender.calendar, methods=["GET"]),
        Route("/t/{token}/covers/ask", own_covers.ask, methods=["POST"]),
        Route("/t/{token}/covers/{cover_id:id}/cancel", own_covers.cancel, methods=["POST"]),
        Route("/t/{token}/covers/{cover_id:id}/take", own_covers.take_here, methods=["POST"]),
        Route("/c/{token}", own_covers.offer, methods=["GET"]),
        Route("/c/{token}", own_covers.offer_take, methods=["POST"]),
    ]
    away = unanswered(site.pages)
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={404: _not_found(site.pages),
                                        DatabaseAway: away, ConnectError: away,
                                        ConnectionLostError: away, StatementCancelled: away,
                                        Exception: _crash(site.pages)})
    app.state.web = site
    app.state.metrics = metrics
    metrics.routes = route_templates(routes)
    # innermost: it reads the route Starlette's router leaves in the scope it was handed
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.add_middleware(OwnWrites, reads=standby_reads(pub.store),
                       secure=site.pages.secure_cookies)
    app.add_middleware(BodyLimit)  # innermost of the rest: its 413 gets the headers too
    app.add_middleware(SecurityHeaders, trusted=(pub.config.base_url,), config=pub.config)
    app.add_middleware(ForwardedClient, proxies=settings.trusted_proxies)  # outermost
    return app


def _not_found(pages: Pages) -> Callable[[Request, Exception], Awaitable[Response]]:
    """A path no route matches (a mistyped address, a number no row can have) is a page
    in words, not Starlette's bare "Not Found"."""
    async def handler(request: Request, exc: Exception) -> Response:
        return pages.page(request, "problem.html", {
            "title": "No such page",
            "text": "Nothing is at this address: it may be mistyped, or name something "
                    "that does not exist."}, status=404)

    return handler


def _crash(pages: Pages) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def handler(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method,
                      loggable_path(request.url.path, pages.config),
                      exc_info=exc)
        return pages.page(request, "problem.html", {
            "title": "Something went wrong",
            "text": "The error was logged. Nothing you did was lost: reload the page to see "
                    "where things stand."}, status=500)

    return handler
