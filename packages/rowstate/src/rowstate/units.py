"""Units of work: the application's own SQL and the engine's moves in one transaction.

An application keeps its own tables around the machine's row (a week's submissions, its
assignments, per-recipient deliveries). ``with lifecycle.atomic() as tx:`` (``async with``
on the async twin, or ``store.atomic()`` so that several bindings on one store share it)
opens ONE database transaction (``BEGIN IMMEDIATE`` on SQLite); every transition, claim,
finalize and create called on that store while it is open joins it, and so does the
caller's own SQL (:meth:`Unit.execute`). Everything commits together or not at all:

* an exception rolls everything back and propagates;
* a refused move is a result, as outside a unit, and does not abort the unit (each engine
  write runs in a savepoint, so a refused UNIQUE invariant does not poison the
  transaction on PostgreSQL);
* ``tx.hold(key, states)`` and ``tx.fence(lease)`` make the caller's later writes
  conditional on the row: refused, they return a result with the reason and the unit can
  no longer commit: every later statement raises :class:`UnitRefusedError` and the unit
  rolls back when it ends, so forgetting to check the result cannot write past the rule.
  A hold is shared: several units may hold a row at once (many answers to one open form),
  and a move out waits for them all. ``tx.hold(key, states, exclusive=True)`` is for the
  unit that writes what depends on the state and then moves the row itself (an approve
  that stamps the roster, then approves): no other unit holds or moves the row until it
  ends, so no holder can slip a row in between its writes and its move (PostgreSQL: ``FOR
  UPDATE`` rather than ``FOR SHARE``; SQLite's writer lock already serialises units);
* nesting (a unit opened while one is open on the same store, or ``tx.savepoint()``) is a
  savepoint: an exception inside rolls back only the inner part.

**Placeholders.** Application SQL uses ONE style on both databases, psycopg's: ``%s`` for
a positional value, ``%(name)s`` for a named one, ``%%`` for a literal percent sign. On
SQLite the text is rewritten to ``?`` / ``:name``, exactly where psycopg would bind (it
reads placeholders anywhere, inside quotes too), so no caller ever rewrites placeholders.
Values are always bound, never pasted.

**Values and rows.** Aware ``datetime`` values are bound in the database's canonical time
form (UTC text ``YYYY-MM-DDTHH:MM:SS.sssZ`` on SQLite, ``timestamptz`` on PostgreSQL); a
naive one is refused. ``dict`` and ``list`` values are bound as JSON. Rows come back as
dicts keyed by column name; times come back as aware UTC datetimes on both databases (on
SQLite, a text value in exactly the canonical form is read as a time).

The unit is found through a context variable of its store: code running in the same thread
(or asyncio task) joins it; a new thread does not (it would block on the writer lock).

The units are written once: ``_async/units.py`` is the source, ``_sync/units.py`` is
generated from it by ``scripts/unasync.py``; what they share is :mod:`rowstate.unitbase`.
"""

from ._async.units import AsyncUnit, anested, aunit_scope
from ._sync.units import Unit, nested, unit_scope
from .unitbase import (
    Params,
    Rows,
    UnitBase,
    as_dicts,
    bound_params,
    bound_value,
    read_value,
    sqlite_sql,
)

__all__ = [
    "AsyncUnit",
    "Params",
    "Rows",
    "Unit",
    "UnitBase",
    "anested",
    "as_dicts",
    "aunit_scope",
    "bound_params",
    "bound_value",
    "nested",
    "read_value",
    "sqlite_sql",
    "unit_scope",
]
