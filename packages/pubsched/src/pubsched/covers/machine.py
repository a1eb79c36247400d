"""The cover request's machine, as the covers package names it (``STATES`` are its four).

It is defined at the ground floor, in :mod:`pubsched.machine` beside the run's: the pub
binds it (``pub.covers``) when it is built, and this package is built on the pub, so the
machine cannot live only here without an import circle.
"""

from __future__ import annotations

from ..machine import CANCELLED, COVER, COVERS, EXPIRED, OPEN, TAKEN
from ..machine import COVER_STATES as STATES

__all__ = ["CANCELLED", "COVER", "COVERS", "EXPIRED", "OPEN", "STATES", "TAKEN"]
