"""``pubsched secret new``: a key for ``PUBSCHED_SECRET``, which signs every tender's link,
every cover offer and every operator session. The key alone goes to standard output (so
``pubsched secret new >> /etc/pubsched/env`` style scripts get nothing else); how to use
and rotate it goes to standard error.

Rotation: the new key becomes ``PUBSCHED_SECRET`` and the old one moves to
``PUBSCHED_SECRET_PREVIOUS`` (several, separated by spaces): links already mailed and
sessions already open keep working, everything new is signed with the new key, and once
the old key is taken off that list nothing it signed opens anything."""

from __future__ import annotations

import argparse
import secrets

from ..context import EXIT_APPLIED, Context

KEY_BYTES = 32  # serve refuses less beyond loopback (pubsched.web.serve.MIN_SECRET_BYTES)


def cmd_secret_new(ctx: Context, args: argparse.Namespace) -> int:
    ctx.say(secrets.token_urlsafe(KEY_BYTES))
    ctx.complain("put it in PUBSCHED_SECRET; when it replaces a key in use, move that one to "
                 "PUBSCHED_SECRET_PREVIOUS so the links and sessions signed with it keep "
                 "working, and take it off once they may lapse")
    return EXIT_APPLIED
