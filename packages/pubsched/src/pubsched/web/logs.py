"""What a log line may show of a request's path: a tender's link names the tender, never
carries the token.

A tender's link (``/t/<token>``, ``/cal/<token>.ics``, a cover's offer ``/c/<token>``) is a
secret in a URL: whoever has it opens the tender's form, reads their shifts or takes a
shift offered to them, with no password. Logs are read by more people, and kept longer,
than the links are meant to be, so every line that names a path (uvicorn's access line
through :class:`AccessLinks`, our own refusals and crashes through :func:`loggable_path`)
shows ``/t/<tender 7>`` for a link that verifies and ``/t/<bad link>`` for one that does
not (``/c/<cover 3 for tender 7>`` for an offer; a page's own sub-paths are kept:
``/t/<tender 7>/covers/ask``): enough to follow a tender's visits, nothing to replay. The
tender id comes from the signature alone (no database): a revoked link still names its
tender.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .. import covers
from ..config import Config
from ..people import links

Namer = Callable[[Config, str], str | None]


def _tender(purpose: links.Purpose) -> Namer:
    def named(config: Config, token: str) -> str | None:
        got = links.verify(config, token, purpose)
        return None if got is None else f"<tender {got[0]}>"

    return named


def _offer(config: Config, token: str) -> str | None:
    got = covers.verify_offer(config, token)
    return None if got is None else f"<cover {got[0]} for tender {got[1]}>"


# (prefix, suffix, what a verified token is called); a tender's page's own sub-paths
# (``/t/<token>/covers/...``) carry the token as their first segment
_LINKS: tuple[tuple[str, str, Namer], ...] = (
    ("/t/", "", _tender("form")), ("/cal/", ".ics", _tender("calendar")), ("/c/", "", _offer))


def loggable_path(path: str, config: Config) -> str:
    """``path`` (with its query, if any) as a log may show it; what follows the token in
    the path (``/t/<token>/reminders``: an action of the tender's page) is kept."""
    route, sep, query = path.partition("?")
    for prefix, suffix, namer in _LINKS:
        segment, slash, rest = route[len(prefix):].partition("/")
        if route.startswith(prefix) and segment.endswith(suffix) and len(segment) > len(suffix):
            token = segment[:len(segment) - len(suffix)]
            who = namer(config, token) or "<bad link>"
            return f"{prefix}{who}{suffix}{slash}{rest}{sep}{query}"
    return path


class AccessLinks(logging.Filter):
    """On uvicorn's access logger: the path of each line through :func:`loggable_path`.

    uvicorn logs ``'%s - "%s %s HTTP/%s" %d'`` with the path as the third argument; a
    record of any other shape is left alone (and a path found nowhere but in the message
    cannot be a link uvicorn logged)."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (*args[:2], loggable_path(args[2], self.config), *args[3:])
        return True
