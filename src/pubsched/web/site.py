"""What every handler shares: the pub, the web settings, the clock, the operator's
sessions and the pages. Built once per app (:func:`pubsched.web.app.create_app`), handed to
each group of pages; ``app.state.web`` is this object."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from ..pub import Pub, utc
from .auth import Sessions
from .pages import Pages
from .settings import WebSettings


class Site:
    """The pub and the web's own state, composed (nothing here handles a request)."""

    def __init__(self, pub: Pub, settings: WebSettings, *,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.pub = pub
        self.settings = settings
        self.clock = clock or (lambda: datetime.now(UTC))
        self.sessions = Sessions(pub.config.secret, settings.password,
                                 max_age=settings.session_max_age)
        self.pages = Pages(pub.config, secure_cookies=not settings.insecure_cookies)

    def now(self) -> datetime:
        """The instant a request acts at (the injected clock in tests), in UTC."""
        return utc(self.clock())
