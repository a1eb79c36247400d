"""Who may use the admin, and which requests may change anything.

Three small pieces, each kept apart from the pages so it can be read and tested alone:

* :class:`AdminPassword`: the operator's password (``PUBSCHED_ADMIN_PASSWORD``), hashed with
  argon2 when the app starts, so the plain text is dropped at once and a memory dump or a
  log of the settings shows only the hash. No password configured means no admin at all:
  the login page says so and nobody gets in.
* :class:`Sessions`: the operator's session, a cookie signed with itsdangerous. It holds
  a random session id and the account it was issued to (``admin``, or an operator
  account's email and id: :mod:`pubsched.people.operators`, whose removal the gate checks at
  every request); its age is checked against an absolute maximum counted from
  the login (never refreshed by use: an unattended browser loses the admin after
  ``max_age``). The signing salt folds in a digest of the password, so changing the
  password logs every session out, on every instance. Logout deletes the cookie, and the
  site records the id as ended in the database (:mod:`pubsched.people.logouts`), which
  the operator gate reads: a logged-out cookie opens nothing on any instance, before or
  after a restart. This module keeps no memory of its own, which would be one process's.
* :class:`LoginThrottle`: after a few failed logins from one client address, the next
  attempt is refused unchecked until a delay has passed, doubling with every further
  failure (capped); a success forgets the address. An attempt is counted as a failure
  *before* its hash check, under the throttle's lock (:meth:`LoginThrottle.admit`), and
  refused attempts never reach the check, so a guesser gains nothing by sending faster or
  in parallel: forty guesses at once are as many checks as forty in a row.
* :func:`cross_origin_refusal`: the CSRF check Datasette moved to and Go 1.25's
  ``CrossOriginProtection`` does, read from the request's own headers instead of a token
  in every form: a browser tells where a request came from (``Sec-Fetch-Site``, else
  ``Origin``), and an unsafe request from another site is refused before any handler runs.
  A request with neither header is not from a browser a forger could drive, and passes.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

SESSION_COOKIE = "pubsched_admin"
SESSION_MAX_AGE = 2 * 3600  # seconds from login; an operator's sitting, not a day
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class AdminPassword:
    """The operator's password as an argon2 hash (``None``: the admin is closed)."""

    def __init__(self, password: str | None, hasher: PasswordHasher | None = None) -> None:
        self._hasher = hasher or PasswordHasher()
        self.hash = self._hasher.hash(password) if password else None
        # what the session signer folds in: changes with the password, reveals nothing
        self.fingerprint = (hashlib.sha256(b"pubsched-admin:" + password.encode()).hexdigest()
                            [:16] if password else "")

    @property
    def configured(self) -> bool:
        return self.hash is not None

    @property
    def hasher(self) -> PasswordHasher:
        """The hasher new operator accounts' passwords are hashed with (cheap in tests)."""
        return self._hasher

    def check(self, attempt: str) -> bool:
        """Whether ``attempt`` is the password (constant work either way: argon2)."""
        if self.hash is None:
            return False
        try:
            return bool(self._hasher.verify(self.hash, attempt))
        except (VerificationError, InvalidHashError):
            return False


ADMIN = "admin"  # the account PUBSCHED_ADMIN_PASSWORD opens


@dataclass(frozen=True)
class Session:
    """A valid session: its id, who it was issued to (``admin`` or an operator's email)
    and, for an operator account, the account's id (None for ``admin``)."""

    sid: str
    who: str = ADMIN
    operator_id: int | None = None
    stamp: str | None = None  # the account's password stamp when it was issued


class Sessions:
    """Signed operator sessions (see the module docstring)."""

    def __init__(self, secret: str | list[str], password: AdminPassword, *,
                 max_age: int = SESSION_MAX_AGE) -> None:
        self.max_age = max_age
        self._signer = URLSafeTimedSerializer(
            secret, salt=f"pubsched.admin-session.v1.{password.fingerprint}")

    def issue(self, who: str = ADMIN, operator_id: int | None = None,
              stamp: str | None = None) -> str:
        """A fresh session's cookie value for ``who``: a new id at every login, whatever
        came before; an operator's names their password's ``stamp``
        (:func:`pubsched.people.operators.stamp`), so a new password ends it."""
        return str(self._signer.dumps({"sid": secrets.token_urlsafe(18), "who": who,
                                       "op": operator_id, "pw": stamp}))

    def valid(self, cookie: str | None) -> str | None:
        """The session id of a good, unexpired cookie; else None."""
        found = self.session(cookie)
        return None if found is None else found.sid

    def session(self, cookie: str | None) -> Session | None:
        """The session of a good, unexpired cookie; else None. Whether it was logged out
        and whether its account still exists are the caller's questions (they need the
        database: :meth:`pubsched.web.site.Site.still_valid`)."""
        if not cookie:
            return None
        try:
            data = self._signer.loads(cookie, max_age=self.max_age)
        except (SignatureExpired, BadSignature):
            return None
        if not isinstance(data, dict):
            return None
        sid, who, op = data.get("sid"), data.get("who", ADMIN), data.get("op")
        stamp = data.get("pw")
        if not isinstance(sid, str) or not isinstance(who, str) \
                or not (op is None or (isinstance(op, int) and not isinstance(op, bool))) \
                or not (stamp is None or isinstance(stamp, str)):
            return None
        if (op is None) != (who == ADMIN) or (op is None) != (stamp is None):
            return None
        return Session(sid, who, op, stamp)


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0


@dataclass
class LoginThrottle:
    """Failed logins per client address, and how long the next attempt must wait."""

    free: int = 3  # failures before any waiting
    base: float = 1.0  # the first wait, doubled by each further failure
    cap: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _seen: dict[str, _Failures] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, client: str) -> float:
        """Seconds until ``client`` may try again (0: now)."""
        with self._lock:
            return self._wait(client)

    def admit(self, client: str) -> float:
        """Let one attempt of ``client`` be checked, counting it as a failure already (0.0),
        or the seconds it must wait first (nothing counted). Reading the wait and counting
        the attempt are one step under the lock: of attempts sent at once, only as many as
        the throttle allows get a 0.0. A success then forgets the client
        (:meth:`succeeded`); a failure has nothing more to record."""
        with self._lock:
            wait = self._wait(client)
            if wait == 0.0:
                self._count(client)
            return wait

    def failed(self, client: str) -> None:
        """Count a failure that was not admitted through :meth:`admit`."""
        with self._lock:
            self._count(client)

    def _wait(self, client: str) -> float:
        seen = self._seen.get(client)
        if seen is None or seen.count < self.free:
            return 0.0
        delay = min(self.cap, self.base * float(2 ** (seen.count - self.free)))
        return max(0.0, seen.last + delay - self.clock())

    def _count(self, client: str) -> None:
        seen = self._seen.setdefault(client, _Failures())
        seen.count += 1
        seen.last = self.clock()
        if len(self._seen) > 10_000:  # bounded: forget the oldest addresses
            for key in sorted(self._seen, key=lambda k: self._seen[k].last)[:5_000]:
                del self._seen[key]

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._seen.pop(client, None)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def cross_origin_refusal(method: str, headers: Mapping[str, str], *,
                         trusted: tuple[str, ...] = ()) -> str | None:
    """Why an unsafe request must be refused as cross-site, or None to let it through.

    ``headers`` are the request's (lower-case names); ``trusted`` are origins taken as our
    own besides the request's Host (the configured base URL, when a proxy rewrites Host).
    """
    if method.upper() in SAFE_METHODS:
        return None
    site = headers.get("sec-fetch-site")
    if site is not None:
        if site in ("same-origin", "none"):
            return None
        return f"cross-origin request refused (Sec-Fetch-Site: {site})"
    origin = headers.get("origin")
    if origin is None:
        return None  # no browser sent this: nobody's cookies are being borrowed
    scheme, netloc = _origin(origin)
    host = headers.get("host", "").lower()
    if netloc and netloc == host and scheme in ("http", "https"):
        return None
    if any(_origin(t) == (scheme, netloc) for t in trusted):
        return None
    return f"cross-origin request refused (Origin: {origin})"
