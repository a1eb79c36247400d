"""One pub: its database (a rowstate store), its two lifecycles (the week's run and the
cover request), its settings, its mailer.

Every domain function takes a :class:`Pub` and the instant it acts at (``now``): the clock
is passed in, never read deep inside, so a rehearsal, a script or a test can run a week on
any dates. Application SQL goes through units of work (``pub.atomic()``), one placeholder
style on both databases (``%s``), rows back as dicts, times as aware UTC datetimes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import rowstate

from .db.level import SchemaLevel, read_level
from .db.urls import DEFAULT_URL, configured_url
from .machine import COVERS, RUNS
from .mail.mailer import Mailer, mailer_for
from .mail.settings import MailSettings, load_mail_settings
from .weektime import DEFAULT_SETTINGS, RunSettings, zone_from_env


class PubError(Exception):
    """Root of the errors pubsched raises."""


class BadInput(PubError, ValueError):
    """Input the pub refuses (not a Monday, an unknown tender or shift): nothing written."""


@dataclass(frozen=True)
class Verdict:
    """What an action did: ``applied``; or refused (``reason``: a lost race, a wrong
    state, a held lease, an invariant); or ran and ``failed`` (SMTP down, a recipient
    refused: the run stays where it was, ``last_error`` set)."""

    applied: bool
    reason: str | None = None
    failed: str | None = None
    message: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.applied


@dataclass(frozen=True)
class Config:
    """The pub's settings, read once (``from_env``) and then passed around. The pub's
    weekly shifts are not a setting: they are data, the ``pub_shift_template`` table
    (:mod:`pubsched.template`), so every instance reads the same week."""

    db_url: str = DEFAULT_URL
    tz: ZoneInfo = field(default_factory=lambda: ZoneInfo("America/New_York"))
    times: RunSettings = DEFAULT_SETTINGS
    mail: MailSettings = field(default_factory=lambda: load_mail_settings({}))
    secret: str = "pubsched-dev-secret"
    # PUBSCHED_SECRET_PREVIOUS: older keys still accepted (links, sessions), never signed with
    previous_secrets: tuple[str, ...] = ()
    base_url: str = "http://127.0.0.1:8000"
    min_collect_hours: float = 24.0  # PUBSCHED_MIN_COLLECT_HOURS: the late-open floor
    # the reminders' leads (:mod:`pubsched.reminders`), hours; 0 turns that reminder off
    remind_unanswered_hours: float = 24.0  # PUBSCHED_REMIND_UNANSWERED_HOURS
    remind_shift_hours: float = 6.0  # PUBSCHED_REMIND_SHIFT_HOURS
    short_hours: float = 24.0  # PUBSCHED_SHORT_HOURS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Config:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {
            "db_url": configured_url(env),
            "tz": zone_from_env(env),
            "mail": load_mail_settings(env),
            "secret": env.get("PUBSCHED_SECRET") or "pubsched-dev-secret",
            "previous_secrets": tuple((env.get("PUBSCHED_SECRET_PREVIOUS") or "").split()),
            "base_url": env.get("PUBSCHED_BASE_URL") or "http://127.0.0.1:8000",
            "min_collect_hours": min_collect_hours(env),
            "remind_unanswered_hours": hours_setting(env, "PUBSCHED_REMIND_UNANSWERED_HOURS",
                                                     24.0),
            "remind_shift_hours": hours_setting(env, "PUBSCHED_REMIND_SHIFT_HOURS", 6.0),
            "short_hours": hours_setting(env, "PUBSCHED_SHORT_HOURS", 24.0),
        }
        values.update(overrides)
        return cls(**values)

    @property
    def signing_keys(self) -> list[str]:
        """The keys for itsdangerous' rotation: every one verifies, the last (the current
        ``PUBSCHED_SECRET``) signs. So after a rotation the links and sessions signed with a
        key moved to ``PUBSCHED_SECRET_PREVIOUS`` keep working, new ones carry the new key,
        and a key taken off the list stops opening anything."""
        return [*self.previous_secrets, self.secret]


def min_collect_hours(environ: Mapping[str, str]) -> float:
    """``PUBSCHED_MIN_COLLECT_HOURS``: the least time an autopilot open leaves the tenders
    (hours, default 24, 0 for no floor)."""
    return hours_setting(environ, "PUBSCHED_MIN_COLLECT_HOURS", 24.0)


MAX_HOURS = 24 * 14  # a lead or a floor longer than two weeks would reach past the week


def hours_setting(environ: Mapping[str, str], name: str, default: float) -> float:
    """A setting that is a number of hours from 0 to :data:`MAX_HOURS` (``default`` when
    unset or empty; 0 turns its feature off). A bad value is :class:`BadInput` naming the
    variable at start-up, not at the tick that first needs it."""
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        hours = float(raw)
    except ValueError:
        hours = -1.0
    if not 0 <= hours <= MAX_HOURS:  # NaN fails both comparisons
        raise BadInput(f"{name} must be a number of hours from 0 to {MAX_HOURS}, got {raw!r}")
    return hours


Fence = Callable[[rowstate.Unit], None]
# the check every unit of work runs first, while an action chosen by an engine is running
# (:func:`pubsched.engines.choose.chosen`); per thread and per task, so it never leaks
_FENCE: ContextVar[Fence | None] = ContextVar("pubsched_fence", default=None)
# who is moving weeks in this thread or task (``cli:ann``, ``operator:EMAIL``, ``tick``):
# set once by each front end (:meth:`Pub.acting_as`), read where a move writes its event
_ACTOR: ContextVar[str | None] = ContextVar("pubsched_actor", default=None)
MAX_ACTOR = 200


@contextmanager
def acting_as(by: str | None) -> Iterator[None]:
    """Every move made in this block (this thread or task) records ``by`` as who made it
    (its event's ``by``, read from :attr:`Pub.actor`); a nested block names another actor
    until it ends (the tick run by ``pubsched tick`` is the tick, not the shell's user). A
    context variable, like the flag fence, so a front end sets it once and no domain
    signature grows an argument."""
    if by is not None and (not isinstance(by, str) or not by.strip() or len(by) > MAX_ACTOR
                           or not by.isprintable()):
        raise BadInput(f"who acts is a printable name of at most {MAX_ACTOR} characters, "
                       f"got {by!r}")
    token = _ACTOR.set(by)
    try:
        yield
    finally:
        _ACTOR.reset(token)


class Pub:
    """The pub's database and services; thin, so that the CLI and the web share it."""

    def __init__(self, store: rowstate.Store, config: Config | None = None, *,
                 mailer: Mailer | None = None, schema: SchemaLevel | None = None) -> None:
        self.store = store
        self.config = config or Config()
        # what the schema has, read once here (:mod:`pubsched.db.level`): domain code reads
        # ``pub.schema.covers``, never the catalogue, and never on every tick
        self.schema = schema if schema is not None else read_level(store)
        self.runs = rowstate.Lifecycle(store, RUNS)
        # the unit this pub has open in this thread or task (:meth:`query` reads in it)
        self._open: ContextVar[rowstate.Unit | None] = ContextVar(f"pub_unit_{id(self)}",
                                                                   default=None)
        self.covers = rowstate.Lifecycle(store, COVERS)
        self.mailer = mailer if mailer is not None else mailer_for(self.config.mail)

    @property
    def dialect(self) -> str:
        return str(self.store.dialect)

    @contextmanager
    def atomic(self) -> Iterator[rowstate.Unit]:
        """A unit of work on the pub's database (hold/fence default to the runs). Inside
        :meth:`fenced` it first runs the fence (which may refuse by raising: the unit
        then rolls back), so what it commits obeys what the fence checked under its lock.
        Opened inside another unit of this pub, it is a savepoint of that one."""
        with self.store.atomic(door=self.runs) as tx:
            check = _FENCE.get()
            if check is not None:
                check(tx)
            with self._reading_in(tx):
                yield tx

    @contextmanager
    def fenced(self, check: Fence | None) -> Iterator[None]:
        """Every unit of work opened in this block (this thread or task) runs ``check``
        first; ``None`` lifts the fence (a side effect's finalize, which must land)."""
        token = _FENCE.set(check)
        try:
            yield
        finally:
            _FENCE.reset(token)

    def acting_as(self, by: str | None) -> contextlib.AbstractContextManager[None]:
        """``with pub.acting_as("cli:ann"):`` (see :func:`acting_as`)."""
        return acting_as(by)

    @property
    def actor(self) -> str | None:
        """Who is moving weeks here and now (None: nobody said)."""
        return _ACTOR.get()

    @contextmanager
    def reading(self) -> Iterator[rowstate.Unit]:
        """A read-only unit that :meth:`query` reads in (one snapshot, one BEGIN for a
        page's many reads, no write lock); inside another unit of this pub, that one."""
        current = self._open.get()
        if current is not None:
            yield current
            return
        with self.store.atomic(door=self.runs, read_only=True) as tx, self._reading_in(tx):
            yield tx

    @contextmanager
    def _reading_in(self, tx: rowstate.Unit) -> Iterator[None]:
        """``tx`` is the unit :meth:`query` reads in, for this block (this thread, task)."""
        token = self._open.set(tx)
        try:
            yield
        finally:
            self._open.reset(token)

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
              ) -> list[dict[str, Any]]:
        """The rows of one read: inside a unit of this pub (this thread or task), read in
        that unit (its snapshot, no savepoint); else in a read-only unit of its own, which
        takes no write lock (SQLite) and refuses a write (both): a write goes through
        :meth:`atomic`. Under a rush of tenders every write lock taken is a wait, so a
        read must not take one."""
        tx = self._open.get()
        if tx is not None:
            return tx.execute(sql, params)
        with self.store.atomic(door=self.runs, read_only=True) as tx:
            return tx.execute(sql, params)

    def close(self) -> None:
        self.store.close()


def utc(now: datetime | None) -> datetime:
    """The instant an action acts at: the caller's, or the real clock (aware, UTC)."""
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise BadInput(f"times are aware (ISO with an offset or Z), got {now.isoformat()}")
    return now.astimezone(UTC)
