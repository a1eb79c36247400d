"""What only the web front end reads from the environment (the pub's own settings are
:class:`pubsched.config.Config`, shared with the CLI)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .auth import SESSION_MAX_AGE, AdminPassword, LoginThrottle
from .proxy import Network, parse_proxies


@dataclass(frozen=True)
class WebSettings:
    """What only the web front end reads: the operator's password (hashed here, at start),
    whether cookies may travel over plain http (local use), the session's max age, and
    the proxies whose forwarded headers are believed (:mod:`pubsched.web.proxy`)."""

    password: AdminPassword
    insecure_cookies: bool = False
    session_max_age: int = SESSION_MAX_AGE
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    trusted_proxies: tuple[Network, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> WebSettings:
        return cls(AdminPassword(environ.get("PUBSCHED_ADMIN_PASSWORD") or None),
                   insecure_cookies=environ.get("PUBSCHED_INSECURE_COOKIES", "") == "1",
                   trusted_proxies=parse_proxies(environ.get("PUBSCHED_TRUSTED_PROXIES", "")))
