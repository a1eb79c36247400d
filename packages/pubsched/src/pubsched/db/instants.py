"""Reading a stored instant back: the one reader of a time column.

The two databases hand a time column back in two forms: PostgreSQL (``TIMESTAMPTZ``) as an
aware ``datetime``, SQLite as the text it stores, canonical UTC ISO 8601 such as
``2026-12-14T15:00:00.000Z``. rowstate's lifecycles already hand rows back with aware
datetimes on both, but the app's own SQL (``pub.query``, ``tx.execute``) does not, so a
value read there must be turned into an instant before it is compared or shown.

Every such read goes through :func:`instant` (or :func:`maybe_instant` for a nullable
column), so the rule is written once: the instant is aware and in UTC; text is parsed as
ISO 8601 (``Z`` included); a value without a zone is UTC, which is how both databases
store it. A value that is no instant at all is ``ValueError``, as a bad column would be.
No I/O: a caller reads the row, this reads the value.
"""

from __future__ import annotations

from datetime import UTC, datetime


def instant(raw: object) -> datetime:
    """A stored instant (a ``datetime``, or the ISO text SQLite hands back), aware, UTC."""
    if isinstance(raw, datetime):
        value = raw
    elif isinstance(raw, str):
        value = datetime.fromisoformat(raw.strip())
    else:
        raise ValueError(f"not a stored instant: {raw!r}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def maybe_instant(raw: object) -> datetime | None:
    """:func:`instant` of a nullable column: None stays None."""
    return None if raw is None else instant(raw)


__all__ = ["instant", "maybe_instant"]
