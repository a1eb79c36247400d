"""The emails a cover's move owes, sent right after the page that made it has answered.

A move (ask, take, cancel) writes its emails into the outbox in its own unit of work
(:mod:`pubsched.notices`), so nothing here decides anything: this only hands the outbox to
:func:`pubsched.covers.deliver` as a background task of the answer (Starlette runs it
once the response is sent), so the person who clicked sees the answer at once and the
others get their mail a moment later, as ``pubsched cover ...`` delivers after its commit.
Whatever this misses (the process stopped, SMTP down) the tick sends; two deliveries at
once send each email once (the outbox's claim).
"""

from __future__ import annotations

import logging

from starlette.background import BackgroundTask

from .. import covers
from .site import Site

log = logging.getLogger("pubsched.web")


def _deliver(site: Site) -> None:
    try:
        covers.deliver(site.pub, site.now())
    except Exception:  # the answer is already sent; the tick tries again
        log.exception("sending a cover's emails failed; the tick will try again")


def deliver_after(site: Site) -> BackgroundTask:
    """The background task that sends the covers' emails owed now."""
    return BackgroundTask(_deliver, site)
