"""What every handler shares: the pub, the web settings, the clock, the operator's
sessions and the pages, and the one door to the domain (:meth:`Site.run`), which the watch
on the database guards (:mod:`.outage`). Built once per
app (:func:`pubsched.web.app.create_app`), handed to each group of pages;
``app.state.web`` is this object."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import ParamSpec, TypeVar

from ..people import logouts, operators
from ..pub import Pub, utc
from .auth import Session, Sessions
from .outage import Watch
from .pages import Pages
from .settings import WebSettings
from .within import Deadline, database_answers

P = ParamSpec("P")
T = TypeVar("T")


class Site:
    """The pub and the web's own state, composed (nothing here handles a request)."""

    def __init__(self, pub: Pub, settings: WebSettings, *,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.pub = pub
        self.settings = settings
        self.clock = clock or (lambda: datetime.now(UTC))
        self.sessions = Sessions(pub.config.signing_keys, settings.password,
                                 max_age=settings.session_max_age)
        self.pages = Pages(pub.config, secure_cookies=not settings.insecure_cookies)
        # does the database answer: /healthz asks, and every request when it did not
        self.database = Watch(Deadline(lambda: database_answers(pub), name="pubsched-database"))

    async def run(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """The one door from a handler to the domain: the domain blocks (on the database,
        on the mail server), so the call runs off the event loop, in a worker thread that
        carries the request's context (who acts, :func:`pubsched.context.acting_as`),
        watched: :class:`~.outage.DatabaseAway` when the database does not answer. The
        week's buttons come through it from the table of actions (``buttons.py``), and the
        operator gate's session check (:meth:`session_alive`); only the metrics scrape
        runs its own reads off the loop, within their own deadline."""
        return await self.database.run(call, *args, **kwargs)

    async def session_alive(self, session: Session) -> bool:
        """:meth:`still_valid` off the loop, watched as :meth:`run` is (a read: given up,
        nothing was begun). The operator gate asks it at each request."""
        return await self.database.read(self.still_valid, session)

    def now(self) -> datetime:
        """The instant a request acts at (the injected clock in tests), in UTC."""
        return utc(self.clock())

    def still_valid(self, session: Session) -> bool:
        """Whether a signed session still opens the admin: not logged out (on any
        instance, before any restart: :mod:`pubsched.people.logouts`), and its account
        still there: ``admin`` while the admin password is set, an operator while their
        account exists with the password the session was issued under (a removed one's
        session, or one from before a new password, stops at its next request)."""
        if logouts.ended(self.pub, session.sid):
            return False
        if session.operator_id is None:
            return self.settings.password.configured
        return operators.alive(self.pub, session.operator_id, session.who, session.stamp)

    def log_out(self, sid: str) -> None:
        """End the session ``sid`` for every instance, until its cookie expires anyway."""
        now = self.now()
        logouts.record(self.pub, sid, until=now + timedelta(seconds=self.sessions.max_age),
                       now=now)

    def login_open(self) -> bool:
        """Whether anyone can log in at all: the admin password, or an operator account."""
        return self.settings.password.configured or bool(operators.all_operators(self.pub))
