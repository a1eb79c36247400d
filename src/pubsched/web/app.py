"""The ASGI app: routes, the admin gate, the cross-site check, the pages.

Routes (``/admin`` needs the operator's session; everything else is public)::

    GET  /                               -> /admin/
    GET  /healthz                        {"ok": true} when the database answers (no login)
    GET  /static/...                     the stylesheet, the script, the vendored mermaid.js
    GET  /admin/login   POST /admin/login   POST /admin/logout
    GET  /admin/                         the weeks, and a form to open a new one
    GET  /admin/weeks/{week}             one week: diagram, buttons, grid, deliveries...
    POST /admin/weeks/{week}/do/{name}   one button: pubsched.actions.perform(name)
    GET  /admin/tenders                  each tender's personal links; revoke
    POST /admin/tenders/{id}/revoke
    GET  /admin/cutover   POST /admin/cutover/flag
    GET  /t/{token}      POST /t/{token}  a tender's form (signed link)
    GET  /cal/{token}.ics                a tender's calendar feed (signed link)

Why the shape:

* The admin is a mount of its own behind one gate (:class:`_OperatorGate`), so no admin
  route can forget the check; the session cookie's path is ``/admin``, so a tender's pages
  never even receive the operator's cookie, and nothing a tender's link carries is ever
  read by the gate: a tender link on an admin URL meets the login page.
* Every unsafe request, the login and the tender form included, passes the cross-origin
  check first (:func:`pubsched.web.auth.cross_origin_refusal`), before any handler.
* A button posts the fingerprint of the run row the page was drawn from; the server acts
  only while the row is still that one, under a per-week lock of this process, so a
  double click (or a second tab) has one effect even before the engine's own refusal
  (wrong state, lease held) is reached. The button also disables itself on submit.
* Every refusal is a page with the engine's reason (HTTP 409), every bad input one with
  the message (400); an unexpected error is logged and shown as a short page with no
  trace (500).
* The domain is synchronous; handlers run it in the thread pool (the SQLite store keeps a
  connection per thread, the PostgreSQL store a pool).
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from itsdangerous import BadSignature, URLSafeTimedSerializer
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import links, tenders, view
from ..machine import RUN
from ..pub import BadInput, Pub, Verdict, utc
from ..send import resend
from .auth import (
    SESSION_COOKIE,
    SESSION_MAX_AGE,
    AdminPassword,
    LoginThrottle,
    Sessions,
    cross_origin_refusal,
)

log = logging.getLogger("pubsched.web")

HERE = Path(__file__).parent
FLASH_COOKIE = "pubsched_flash"
ADMIN_PATH = "/admin"

# the button each edge of the machine is drawn as: (the action it performs, its label)
BUTTONS: dict[str, tuple[str, str]] = {
    "open": ("open", "Open the form"),
    "extend": ("extend", "Extend the deadline"),
    "close": ("close", "Close the form"),
    "reopen": ("reopen", "Reopen the form"),
    "generate": ("generate", "Generate the roster"),
    "regenerate": ("generate", "Regenerate"),
    "reopen_after_generate": ("reopen", "Reopen (keep the roster)"),
    "approve": ("approve", "Approve"),
    "unapprove": ("unapprove", "Un-approve"),
    "send": ("send", "Send the schedule email"),
}
CONFIRM = {"send": "Send the schedule email to every assigned tender now?"}


@dataclass(frozen=True)
class WebSettings:
    """What only the web front end reads: the operator's password (hashed here, at start),
    whether cookies may travel over plain http (local use), and the session's max age."""

    password: AdminPassword
    insecure_cookies: bool = False
    session_max_age: int = SESSION_MAX_AGE
    throttle: LoginThrottle = field(default_factory=LoginThrottle)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> WebSettings:
        return cls(AdminPassword(environ.get("PUBSCHED_ADMIN_PASSWORD") or None),
                   insecure_cookies=environ.get("PUBSCHED_INSECURE_COOKIES", "") == "1")


def fingerprint(row: Mapping[str, Any]) -> str:
    """What a page saw of a run row: any change to the row (a move, a lease, a stamp, an
    error) makes a button drawn before it stale."""
    text = json.dumps({k: str(v) for k, v in row.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _as_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


class _Security:
    """Pure ASGI middleware: the cross-origin check on every unsafe request, and the
    headers every answer carries (no framing, no referrer: a tender's link is a secret in
    the URL; nothing but our own scripts)."""

    HEADERS = [
        (b"content-security-policy",
         b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
         b"img-src 'self' data:; font-src 'self' data:; object-src 'none'; "
         b"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    ]

    def __init__(self, app: ASGIApp, trusted: tuple[str, ...]) -> None:
        self.app = app
        self.trusted = trusted

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
            log.warning("refused %s %s: %s", scope["method"], scope["path"], refusal)
            response = HTMLResponse(f"<h1>Refused</h1><p>{html.escape(refusal)}.</p>",
                                    status_code=403)
            await response(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


class _OperatorGate:
    """Everything under /admin needs a valid operator session, except the login page."""

    def __init__(self, app: ASGIApp, web: Web) -> None:
        self.app = app
        self.web = web

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if path != ADMIN_PATH + "/login":
                request = Request(scope)
                sid = self.web.sessions.valid(request.cookies.get(SESSION_COOKIE))
                if sid is None:
                    target = path if scope["method"] == "GET" else ADMIN_PATH + "/"
                    response = RedirectResponse(
                        f"{ADMIN_PATH}/login?next={quote(target)}", status_code=303)
                    await response(scope, receive, send)
                    return
                scope["state"] = {**scope.get("state", {}), "operator_sid": sid}
        await self.app(scope, receive, send)


class Web:
    """The app's handlers and what they share (the pub, the sessions, the templates)."""

    def __init__(self, pub: Pub, settings: WebSettings, *,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.pub = pub
        self.settings = settings
        self.clock = clock or (lambda: datetime.now(UTC))
        self.sessions = Sessions(pub.config.secret, settings.password,
                                 max_age=settings.session_max_age)
        self.flashes = URLSafeTimedSerializer(pub.config.secret, salt="pubsched.flash.v1")
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"),
                               autoescape=select_autoescape(["html"]))
        self.env.filters["local"] = self._local
        self._week_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    # -- rendering ------------------------------------------------------------------------

    def _local(self, value: Any, style: str = "long") -> str:
        """A stored UTC instant in the pub's own time zone, as people read it."""
        moment = _as_time(value)
        if moment is None:
            return "—" if value in (None, "") else str(value)
        here = moment.astimezone(self.pub.config.tz)
        if style == "short":
            return f"{here:%a %d %b %H:%M}"
        return f"{here:%a %d %b %Y, %H:%M} {here.tzname()}"

    def page(self, request: Request, name: str, context: Mapping[str, Any], *,
             status: int = 200, headers: Mapping[str, str] | None = None) -> HTMLResponse:
        text = self.env.get_template(name).render(request=request, **context)
        return HTMLResponse(text, status_code=status, headers=dict(headers or {}))

    def _cookie_secure(self) -> bool:
        return not self.settings.insecure_cookies

    def flash(self, response: Response, kind: str, text: str) -> Response:
        if len(text) > 1500:  # a cookie holds about 4 kB; the page shows the rest anyway
            text = text[:1500] + "…"
        response.set_cookie(FLASH_COOKIE, self.flashes.dumps({"k": kind, "t": text}),
                            max_age=120, path=ADMIN_PATH, httponly=True, samesite="lax",
                            secure=self._cookie_secure())
        return response

    def take_flash(self, request: Request) -> dict[str, str] | None:
        raw = request.cookies.get(FLASH_COOKIE)
        if not raw:
            return None
        try:
            data = self.flashes.loads(raw, max_age=120)
        except BadSignature:
            return None
        if not isinstance(data, dict):
            return None
        return {"kind": str(data.get("k", "ok")), "text": str(data.get("t", ""))}

    def admin_page(self, request: Request, name: str, context: Mapping[str, Any], *,
                   status: int = 200) -> HTMLResponse:
        flash = self.take_flash(request)
        response = self.page(request, name, {"flash": flash, "admin": True, **context},
                             status=status, headers={"cache-control": "no-store"})
        if flash is not None:
            response.delete_cookie(FLASH_COOKIE, path=ADMIN_PATH)
        return response

    def _week_lock(self, week: str) -> threading.Lock:
        with self._locks_guard:
            return self._week_locks.setdefault(week, threading.Lock())

    # -- public ---------------------------------------------------------------------------

    async def root(self, request: Request) -> Response:
        return RedirectResponse(ADMIN_PATH + "/", status_code=303)

    async def healthz(self, request: Request) -> Response:
        try:
            await run_in_threadpool(self.pub.query, "SELECT 1 AS ok")
        except Exception as exc:  # the database is down: say so, without a trace
            log.warning("healthz: database: %s", exc)
            return JSONResponse({"ok": False, "database": "unreachable"}, status_code=503)
        return JSONResponse({"ok": True, "database": "ok"})

    # -- login ----------------------------------------------------------------------------

    def _next(self, value: str | None) -> str:
        """Where a login goes on to: only an admin path of ours, never another site."""
        if value and value.startswith(ADMIN_PATH + "/") and not value.startswith("//") \
                and "\\" not in value:
            return value
        return ADMIN_PATH + "/"

    async def login_form(self, request: Request) -> Response:
        return self.page(request, "login.html", {
            "configured": self.settings.password.configured,
            "next": self._next(request.query_params.get("next")), "error": None})

    async def login(self, request: Request) -> Response:
        form = await request.form()
        target = self._next(_text(form, "next"))
        client = request.client.host if request.client else "unknown"
        wait = self.settings.throttle.wait(client)
        if wait > 0:
            return self.page(request, "login.html", {
                "configured": True, "next": target,
                "error": f"Too many failed logins: try again in {int(wait) + 1} s."},
                status=429, headers={"retry-after": str(int(wait) + 1)})
        attempt = _text(form, "password") or ""
        ok = await run_in_threadpool(self.settings.password.check, attempt)
        if not ok:
            self.settings.throttle.failed(client)
            log.warning("failed admin login from %s", client)
            return self.page(request, "login.html", {
                "configured": self.settings.password.configured, "next": target,
                "error": "Wrong password." if self.settings.password.configured
                else "The admin is closed: no PUBSCHED_ADMIN_PASSWORD is set."}, status=401)
        self.settings.throttle.succeeded(client)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(SESSION_COOKIE, self.sessions.issue(),
                            max_age=self.settings.session_max_age, path=ADMIN_PATH,
                            httponly=True, samesite="lax", secure=self._cookie_secure())
        return response

    async def logout(self, request: Request) -> Response:
        sid = request.scope.get("state", {}).get("operator_sid")
        if sid:
            self.sessions.end(sid)
        response = RedirectResponse(ADMIN_PATH + "/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=ADMIN_PATH, httponly=True,
                               samesite="lax", secure=self._cookie_secure())
        return response

    # -- admin pages ----------------------------------------------------------------------

    async def weeks(self, request: Request) -> Response:
        rows = await run_in_threadpool(view.weeks_list, self.pub)
        return self.admin_page(request, "weeks.html", {"weeks": rows})

    async def week(self, request: Request) -> Response:
        week = request.path_params["week"]
        try:
            context = await run_in_threadpool(self._week_context, week)
        except BadInput as exc:
            return self.admin_page(request, "problem.html", {"title": "No such week",
                                                             "text": str(exc)}, status=404)
        return self.admin_page(request, "week.html", context)

    def _week_context(self, week: str) -> dict[str, Any]:
        # the row the buttons' fingerprint is taken from is read FIRST: whatever the page
        # then shows is that row or newer, so a click never acts on a state it did not see
        row = self.pub.runs.get(_week_key(week)) or {}
        shown = view.week_show(self.pub, week)
        key = shown["week_of"]
        buttons = []
        for edge in view.legal_edges(self.pub, key):
            if edge in BUTTONS:
                action, label = BUTTONS[edge]
                buttons.append({"edge": edge, "action": action, "label": label,
                                "confirm": CONFIRM.get(action)})
        people = sorted({email for s in shown["shifts"] for email in s["assigned"]})
        by_email = {t.email: t for t in tenders.all_tenders(self.pub)}
        return {
            "w": shown,
            "seen": fingerprint(row),
            "buttons": buttons,
            "diagram": diagram(shown["state"]),
            "people": people,
            "names": {e: by_email[e].name if e in by_email else e for e in people},
            "submitted": {s["email"] for s in shown["submissions"]},
            "shift_labels": {s["id"]: s["label"] for s in shown["shifts"]},
        }

    async def act(self, request: Request) -> Response:
        return await self._button(request.path_params["week"], request.path_params["name"],
                                  await request.form(), check_seen=True)

    async def _button(self, week: str, name: str, form: FormData, *,
                      check_seen: bool) -> Response:
        back = f"{ADMIN_PATH}/weeks/{quote(week)}"
        try:
            outcome = await run_in_threadpool(self._act, week, name, form, check_seen)
        except BadInput as exc:
            return self.flash(RedirectResponse(back, status_code=303), "refused", str(exc))
        kind = "ok" if outcome.applied else "failed" if outcome.failed else "refused"
        return self.flash(RedirectResponse(back, status_code=303), kind,
                          outcome.message or (outcome.reason or ""))

    def _act(self, week: str, name: str, form: FormData, check_seen: bool) -> Verdict:
        from ..engines import actions
        from ..weeks import week_key

        week = week_key(week)
        with self._week_lock(week):
            if check_seen:
                row = self.pub.runs.get(week)
                if row is None:
                    raise BadInput(f"no week {week}")
                if _text(form, "seen") != fingerprint(row):
                    return Verdict(False, "STALE", message=(
                        "Refused: the week changed since this page was drawn (a second "
                        "click, another tab or the tick). Here it is as it is now."))
            at = utc(self.clock())
            if name == "resend":  # after the send, one recipient, either engine
                return resend(self.pub, week, _text(form, "email") or "", now=at)
            options: dict[str, Any] = {}
            if name == "extend":
                options["deadline"] = _local_input(_text(form, "deadline"), self.pub)
            if name == "autopilot":
                options["on"] = _text(form, "on") == "1"
            return actions.perform(self.pub, name, week, now=at, **options)

    async def open_week(self, request: Request) -> Response:
        """The weeks page's "open a week" form: the Monday to open, then its page (no
        fingerprint: a second click meets the engine's refusal, the week being open)."""
        form = await request.form()
        try:
            week = await run_in_threadpool(_week_key, _text(form, "week") or "")
        except BadInput as exc:
            return self.flash(RedirectResponse(ADMIN_PATH + "/", status_code=303), "refused",
                              str(exc))
        return await self._button(week, "open", form, check_seen=False)

    async def tender_list(self, request: Request) -> Response:
        def rows() -> list[dict[str, Any]]:
            out = []
            for t in tenders.all_tenders(self.pub):
                version = t.link_version
                out.append({"t": t, "form": links.tender_url(self.pub.config, t.id, version),
                            "calendar": links.calendar_url(self.pub.config, t.id, version)})
            return out

        return self.admin_page(request, "tenders.html",
                               {"rows": await run_in_threadpool(rows)})

    async def revoke(self, request: Request) -> Response:
        back = RedirectResponse(ADMIN_PATH + "/tenders", status_code=303)
        try:
            tender_id = int(request.path_params["tender_id"])
        except ValueError:
            return self.flash(back, "refused", "no such tender")

        def go() -> Verdict:
            found = tenders.by_id(self.pub, tender_id)
            if found is None:
                raise BadInput("no such tender")
            return tenders.revoke_links(self.pub, found.email)

        try:
            outcome = await run_in_threadpool(go)
        except BadInput as exc:
            return self.flash(back, "refused", str(exc))
        return self.flash(back, "ok", f"{outcome.message}: the new link is on this page")

    async def cutover_page(self, request: Request) -> Response:
        from ..engines import cutover
        from ..engines.flags import v2_enabled

        def context() -> dict[str, Any]:
            return {"check": cutover.cutover_check(self.pub, now=utc(self.clock())),
                    "v2": v2_enabled(self.pub), "mail": self.pub.config.mail}

        return self.admin_page(request, "cutover.html", await run_in_threadpool(context))

    async def flag(self, request: Request) -> Response:
        from ..engines import cutover

        form = await request.form()
        on = _text(form, "on") == "1"
        force = _text(form, "force") == "1"
        back = RedirectResponse(ADMIN_PATH + "/cutover", status_code=303)
        outcome = await run_in_threadpool(
            lambda: cutover.flip(self.pub, on, force=force, now=utc(self.clock())))
        kind = "ok" if outcome.applied else "refused"
        return self.flash(back, kind, outcome.message or (outcome.reason or ""))

    # -- a tender's pages -----------------------------------------------------------------

    async def tender_page(self, request: Request) -> Response:
        tender = await run_in_threadpool(links.tender_for_link, self.pub,
                                         request.path_params["token"], "form")
        if tender is None:
            return self._bad_link(request)
        form = await run_in_threadpool(view.tender_form, self.pub, tender)
        saved = request.query_params.get("saved") == "1"
        return self._tender(request, tender, form, notice="Saved." if saved else None)

    def _tender(self, request: Request, tender: tenders.Tender, form: dict[str, Any], *,
                notice: str | None = None, error: str | None = None,
                status: int = 200) -> HTMLResponse:
        token = request.path_params["token"]
        return self.page(request, "tender.html", {
            "f": form, "notice": notice, "error": error, "action": f"/t/{token}",
            "calendar": "/cal/" + links.tender_token(self.pub.config, tender.id,
                                                     tender.link_version, "calendar") + ".ics",
        }, status=status, headers={"cache-control": "no-store"})

    def _bad_link(self, request: Request) -> HTMLResponse:
        return self.page(request, "problem.html", {
            "title": "This link does not work",
            "text": "It may have been mistyped, replaced by a newer link, or switched off. "
                    "Ask the pub's operator for your current link."},
            status=404, headers={"cache-control": "no-store"})

    async def tender_submit(self, request: Request) -> Response:
        from ..submissions import submit

        token = request.path_params["token"]
        tender = await run_in_threadpool(links.tender_for_link, self.pub, token, "form")
        if tender is None:
            return self._bad_link(request)
        form = await request.form()
        week = _text(form, "week") or ""
        raw_max = (_text(form, "max") or "").strip()
        try:
            picked = [int(v) for v in form.getlist("shift") if isinstance(v, str)]
            limit = int(raw_max) if raw_max else None
        except ValueError:
            picked, limit = [], -1
        try:
            if limit == -1:
                raise BadInput("the maximum is a whole number (or empty for no maximum)")
            outcome = await run_in_threadpool(
                lambda: submit(self.pub, week, tender.email, picked, max_shifts=limit,
                               now=utc(self.clock())))
        except BadInput as exc:
            shown = await run_in_threadpool(view.tender_form, self.pub, tender)
            return self._tender(request, tender, shown, error=str(exc), status=400)
        if not outcome.applied:
            shown = await run_in_threadpool(view.tender_form, self.pub, tender)
            return self._tender(request, tender, shown, status=409, error=(
                "The form for this week is closed: your change was not saved."
                if outcome.reason == "FORM_CLOSED" else outcome.message))
        return RedirectResponse(f"/t/{token}?saved=1", status_code=303)

    async def calendar(self, request: Request) -> Response:
        token = request.path_params["token"]
        tender = await run_in_threadpool(links.tender_for_link, self.pub, token, "calendar")
        if tender is None:
            return Response("unknown or revoked calendar link\n", status_code=404,
                            media_type="text/plain")
        body = await run_in_threadpool(view.tender_calendar, self.pub, tender)
        return Response(body, media_type="text/calendar; charset=utf-8",
                        headers={"cache-control": "no-cache",
                                 "content-disposition": 'inline; filename="pub-shifts.ics"'})


def diagram(state: str) -> str:
    """The machine's own Mermaid diagram, the week's state highlighted (the spacing that
    keeps the labels of opposite edges apart is set where it is drawn: static/app.js)."""
    return (RUN.mermaid() + "    classDef current fill:#ffd166,stroke:#b5651d,"
            "stroke-width:3px,color:#000,font-weight:bold\n"
            f"    class {state} current\n")


def _text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


def _week_key(raw: str) -> str:
    from ..weeks import week_key

    return week_key(raw.strip())


def _local_input(raw: str | None, pub: Pub) -> datetime:
    """A ``datetime-local`` field (the pub's wall clock) as an aware instant."""
    if not raw:
        raise BadInput("a new deadline is needed")
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise BadInput(f"not a date and time: {raw!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=pub.config.tz)
    return moment.astimezone(UTC)


def create_app(pub: Pub, settings: WebSettings, *,
               clock: Callable[[], datetime] | None = None,
               around: Callable[[], contextlib.AbstractContextManager[None]] | None = None
               ) -> Starlette:
    """The whole web front end over ``pub`` (the caller owns the pub and closes it).

    ``around``: what runs for as long as the app is served (``serve`` passes the ticker):
    entered at the ASGI lifespan's start and left at its end, which uvicorn reaches on
    SIGTERM or Ctrl-C before it re-raises the signal."""
    web = Web(pub, settings, clock=clock)
    admin = [
        Route("/login", web.login_form, methods=["GET"]),
        Route("/login", web.login, methods=["POST"]),
        Route("/logout", web.logout, methods=["POST"]),
        Route("/", web.weeks, methods=["GET"]),
        Route("/open", web.open_week, methods=["POST"]),
        Route("/weeks/{week}", web.week, methods=["GET"]),
        Route("/weeks/{week}/do/{name}", web.act, methods=["POST"]),
        Route("/tenders", web.tender_list, methods=["GET"]),
        Route("/tenders/{tender_id}/revoke", web.revoke, methods=["POST"]),
        Route("/cutover", web.cutover_page, methods=["GET"]),
        Route("/cutover/flag", web.flag, methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        with around() if around is not None else contextlib.nullcontext():
            yield

    routes = [
        Route("/", web.root, methods=["GET"]),
        Route("/healthz", web.healthz, methods=["GET", "HEAD"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        Mount(ADMIN_PATH, app=_OperatorGate(Router(routes=admin), web)),
        Route("/t/{token}", web.tender_page, methods=["GET"]),
        Route("/t/{token}", web.tender_submit, methods=["POST"]),
        Route("/cal/{token}.ics", web.calendar, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={Exception: _crash(web)})
    app.state.web = web
    trusted = (pub.config.base_url,)
    app.add_middleware(_Middleware, trusted=trusted)
    return app


class _Middleware(_Security):
    """``add_middleware`` builds its middleware with the app first and keywords after."""

    def __init__(self, app: ASGIApp, trusted: tuple[str, ...] = ()) -> None:
        super().__init__(app, trusted)


def _crash(web: Web) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def handler(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path,
                      exc_info=exc)
        return web.page(request, "problem.html", {
            "title": "Something went wrong",
            "text": "The error was logged. Nothing you did was lost: reload the page to see "
                    "where things stand."}, status=500)

    return handler
