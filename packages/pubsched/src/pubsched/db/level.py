"""What the pub's database schema has: read once, when a pub opens its database.

The legacy engine still runs on a database at the legacy schema (0034, before the
cutover's migrations), and each later feature reads tables or columns its own migration
added. Such a feature does without them where they are missing (no links in the schedule
email before 0037, no skills before 0038, no cover requests before 0045 ...), so a send or
a tick on an older schema behaves as it did before instead of failing on a table it never
needed.

Whether a feature's migration is applied is a fact about the database, not about a tick:
:func:`read_level` reads the applied versions once, when the :class:`~pubsched.pub.Pub`
is built, and domain code reads the flag it needs (``pub.schema.covers``), never the
catalogue. Every front end refuses to start on a database with migrations pending
(``pubsched init`` applies them), and a deployment runs the migrations before it starts
any instance, so a pub's level is the level its database keeps while it runs; a pub
opened before a migration sees the new tables after it is opened again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields

import rowstate

from .migrate import TABLE


def _since(version: str) -> bool:
    """A feature's flag, off by default, with the migration that brings it."""
    return field(default=False, metadata={"since": version})


@dataclass(frozen=True)
class SchemaLevel:
    """One named boolean per feature a later migration brings (its version beside it, in
    :data:`INTRODUCED`). The default is the legacy schema: none of them."""

    link_versions: bool = _since("0037")  # pub_tenders.link_version: the email's links
    skills: bool = _since("0038")         # pub_shifts.needs, pub_tenders.skills
    roster_edits: bool = _since("0041")   # pub_roster_edits: the roster's hand edits
    time_off: bool = _since("0043")       # pub_time_off
    notices: bool = _since("0044")        # pub_notices: the outbox (pub_mail since 0049)
    covers: bool = _since("0045")         # pub_covers: the cover requests
    usual: bool = _since("0046")          # pub_usual, pub_availability.source
    tick_status: bool = _since("0047")    # pub_tick_status: the tick's own record
    mail: bool = _since("0050")           # pub_mail (0049), the schedule's mail in it (0050)
    week_record: bool = _since("0052")    # pub_week_edits, form_moved_at, clock_note
    handover: bool = _since("0055")       # pub_mail.handover_at, pub_calendar_sequences

    @classmethod
    def of(cls, applied: Iterable[str]) -> SchemaLevel:
        """The level of a database whose applied migration versions are ``applied``."""
        done = set(applied)
        return cls(**{name: version in done for name, version in INTRODUCED.items()})

    @classmethod
    def full(cls) -> SchemaLevel:
        """Every feature: a database every migration of this package was applied to."""
        return cls(**dict.fromkeys(INTRODUCED, True))


# the migration that brings each feature of :class:`SchemaLevel`
INTRODUCED: Mapping[str, str] = {f.name: f.metadata["since"] for f in fields(SchemaLevel)}

_HAS_TABLE = {
    "sqlite": f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{TABLE}'",
    "postgresql": f"SELECT 1 WHERE to_regclass('{TABLE}') IS NOT NULL",
}


def read_level(store: rowstate.Store) -> SchemaLevel:
    """The level of the database behind ``store``, from the migrations recorded as applied
    (none recorded: the legacy level). One read-only unit; a database that cannot be read
    raises, as any first query would."""
    with store.atomic(read_only=True) as tx:
        if not tx.execute(_HAS_TABLE[str(store.dialect)]):
            return SchemaLevel()
        rows = tx.execute(f"SELECT version FROM {TABLE}")
    return SchemaLevel.of(str(r["version"]) for r in rows)


__all__ = ["INTRODUCED", "SchemaLevel", "read_level"]
