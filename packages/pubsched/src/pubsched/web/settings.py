"""What only the web front end reads from the environment (the pub's own settings are
:class:`pubsched.config.Config`, shared with the CLI)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..people.operators import check_password
from ..verdicts import BadInput
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
        """Checked at start-up: ``PUBSCHED_ADMIN_PASSWORD`` follows the operators' rule
        (:func:`pubsched.people.operators.check_password`: 12 characters or more), since
        it opens the same admin; a shorter one is refused, naming the variable."""
        return cls(AdminPassword(admin_password(environ)),
                   insecure_cookies=environ.get("PUBSCHED_INSECURE_COOKIES", "") == "1",
                   trusted_proxies=parse_proxies(environ.get("PUBSCHED_TRUSTED_PROXIES", "")))


def admin_password(environ: Mapping[str, str]) -> str | None:
    """``PUBSCHED_ADMIN_PASSWORD`` (None: unset or empty, the admin account closed), or
    ``SystemExit`` saying why it cannot open the admin."""
    raw = environ.get("PUBSCHED_ADMIN_PASSWORD") or None
    if raw is None:
        return None
    try:
        return check_password(raw)
    except BadInput as exc:
        raise SystemExit(f"PUBSCHED_ADMIN_PASSWORD: {exc}, as every operator's "
                         "(pubsched operator add)") from None
