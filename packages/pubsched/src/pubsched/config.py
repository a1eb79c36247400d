"""The pub's settings (:class:`Config`), read once from the environment and then passed
around, and the one reading of a setting that is a number of hours.

A bad value is :class:`~pubsched.verdicts.BadInput` naming the variable, at start-up,
not at the tick that first needs it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from .db.urls import DEFAULT_URL, DatabaseURLError, configured_reads_url, configured_url
from .mail.settings import MailSettings, load_mail_settings
from .verdicts import BadInput
from .week.time import DEFAULT_SETTINGS, RunSettings, zone_from_env


@dataclass(frozen=True)
class Config:
    """The pub's settings, read once (``from_env``) and then passed around. The pub's
    weekly shifts are not a setting: they are data, the ``pub_shift_template`` table
    (:mod:`pubsched.week.template`), so every instance reads the same week."""

    db_url: str = DEFAULT_URL
    db_reads_url: str | None = None  # PUBSCHED_DB_READS: where the pages read (a standby)
    tz: ZoneInfo = field(default_factory=lambda: ZoneInfo("America/New_York"))
    times: RunSettings = DEFAULT_SETTINGS
    mail: MailSettings = field(default_factory=lambda: load_mail_settings({}))
    secret: str = "pubsched-dev-secret"
    # PUBSCHED_SECRET_PREVIOUS: older keys still accepted (links, sessions), never signed with
    previous_secrets: tuple[str, ...] = ()
    base_url: str = "http://127.0.0.1:8000"
    min_collect_hours: float = 24.0  # PUBSCHED_MIN_COLLECT_HOURS: the late-open floor
    # the reminders' leads (:mod:`pubsched.tick.reminders`), hours; 0 turns that reminder off
    remind_unanswered_hours: float = 24.0  # PUBSCHED_REMIND_UNANSWERED_HOURS
    remind_shift_hours: float = 6.0  # PUBSCHED_REMIND_SHIFT_HOURS
    short_hours: float = 24.0  # PUBSCHED_SHORT_HOURS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Config:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {
            "db_url": configured_url(env),
            "db_reads_url": _reads_url(env),
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


def _reads_url(environ: Mapping[str, str]) -> str | None:
    try:
        return configured_reads_url(environ)
    except DatabaseURLError as exc:
        raise BadInput(str(exc)) from None


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


__all__ = ["MAX_HOURS", "Config", "hours_setting", "min_collect_hours"]
