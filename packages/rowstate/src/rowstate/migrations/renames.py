"""A renamed (or dropped) state's rows moved in one set-based write, with an event per row.

The operation is written once, as a core operation (an :data:`~rowstate.protocol.Op`
yielding one :class:`~rowstate.protocol.Batch`), and driven by either front end.

**All or nothing, decided by the write itself.** Every row holding the old name moves, or
none does: a live lease on any of them (the rules' ``lease_free`` check, the very one a
plain transition carries) refuses the whole rename, and the result names the keys that
refused it. The check is part of the write, so a lease claimed between a look and the
write cannot be overrun:

* PostgreSQL, one statement of CTEs: the rows of the old name are read and locked first
  (``FOR UPDATE``, in key order), so a claim in flight is waited for and its lease seen;
  the UPDATE runs only if none of the locked rows holds a live lease; its RETURNING feeds
  the INSERT of the events.
* SQLite, one ``BEGIN IMMEDIATE`` transaction (the writer's lock for its whole length):
  the refusing rows read, then the events' INSERT ... SELECT and the UPDATE, each
  conditioned on there being none.

**What a rename is not.** It is not a transition into a new meaning: the row stays where it
was under its new name. So no ``on_enter`` write runs, no entry guard or finalization claim
is consulted (a finalizer at work keeps its claim, and the row), no lease is cleared (an
expired one stays as it was, and does not refuse), and a row whose state column is NULL
(a binding's ``derived`` reading) is never renamed: its derived reading is one of the
machine's states already. The version is bumped, so an optimistic reader sees the change.

**The event's key.** Each event's ``row_key`` is built in SQL, the text ``json.dumps``
gives the key (what ``history`` looks up): exact for integers and for text of
U+0001..U+007E. A text key outside that range would be filed under another spelling, so a
rename whose rows include one is refused (``KEY_NOT_ASCII``, the keys named) rather than
write history that ``history()`` would never find.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple

from ..binding import Binding
from ..compiler import Statement, event_said
from ..conditions import Const, Slot, SqlOut, render
from ..core.context import Context
from ..core.rules import Ask, Rules
from ..dialects import Dialect
from ..errors import InvariantViolation, ValidationError
from ..outbox import EVENT_COLUMNS
from ..protocol import Batch, Op
from ..results import Reason
from ..values import check_by, check_note, check_scalar

#: the refusing keys a result names, at most (the count of them is always exact)
MAX_NAMED = 100
KEY_NOT_ASCII = "KEY_NOT_ASCII"


class RenameResult(NamedTuple):
    """What a rename did: ``applied`` and how many rows ``moved`` (zero when no row held
    the old name), or why nothing was written: ``reason`` (``LEASE_HELD``,
    ``KEY_NOT_ASCII``, ``INVARIANT``) and the first keys that refused it with their
    reasons (at most 100; ``blocked`` counts them all). Truthy exactly when applied."""

    applied: bool
    old: str
    new: str
    moved: int = 0
    reason: str | None = None
    refused: tuple[tuple[tuple[Any, ...], str], ...] = ()
    blocked: int = 0

    def __bool__(self) -> bool:
        return self.applied


class Renames:
    """The rename of one binding in one dialect: its checks from the rules, its statements
    compiled once per events-or-not, and the operation."""

    def __init__(self, binding: Binding, dialect: Dialect,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.context = Context(binding, dialect, clock)
        self.rules = Rules(self.context)
        self.binding = binding
        self.machine = binding.machine
        self.dialect = dialect
        self._stmts: tuple[Statement, ...] | None = None
        self._static: dict[str, Any] = {}

    # -- the operation -------------------------------------------------------------------

    def move(self, old: object, new: object, *, edge: str, by: object, note: object,
             said: str) -> Op[RenameResult]:
        """Every row holding ``old`` moved to ``new`` (checked here, before any I/O: the
        generator returned has not run). ``said`` is the event's note when the caller
        gives none."""
        old, new = self._names(old, new, edge)
        by, note = check_by(by), check_note(note)  # the events' own rules, before any I/O
        values = self.context.clock_values()
        values.update(old=old, new=new, edge=edge, ev_by=by,
                      ev_note=note if note is not None else said)
        return self._run(old, new, values)

    def _names(self, old: object, new: object, edge: str) -> tuple[str, str]:
        m = self.machine
        what = "into" if edge == "retire" else "new"
        if not isinstance(new, str) or new not in m.states:
            raise ValidationError(f"{m.name}: {edge}_state: {what}={new!r} is not a state of "
                                  f"the machine ({', '.join(m.states)})")
        if not isinstance(old, str) or not old:
            raise ValidationError(f"{m.name}: {edge}_state: old is a state's name, "
                                  f"got {old!r}")
        check_scalar(old, f"{edge}_state: old", ValidationError)
        if old in m.states:
            raise ValidationError(f"{m.name}: {edge}_state: {old!r} is still a state of the "
                                  "machine; rename it in the machine first (an alias may "
                                  "keep the old name for a release)")
        if old in m.aliases and m.aliases[old] != new:
            raise ValidationError(f"{m.name}: {edge}_state: {old!r} is an alias of "
                                  f"{m.aliases[old]!r}, not of {new!r}")
        return old, new

    def _run(self, old: str, new: str, values: dict[str, Any]) -> Op[RenameResult]:
        stmts = self._statements()
        values.update(self._static)
        try:
            rows = yield Batch(tuple(s.bind(self.dialect, values) for s in stmts),
                               transaction=len(stmts) > 1)
        except InvariantViolation:  # a UNIQUE state: the statement wrote nothing
            return RenameResult(False, old, new, reason=Reason.INVARIANT)
        if self.dialect.writable_ctes:
            head = next(r for r in rows[0] if r[1] is None)  # the counts; then the keys
            moved, blocked = int(head[0]), int(head[3])
            named = [(r[1], r[2]) for r in rows[0] if r[1] is not None]
        else:
            named = [(r[0], r[1]) for r in rows[0]]
            blocked = int(rows[0][0][2]) if rows[0] else 0
            moved = int(rows[-1][0][0])
        if blocked:
            refused = tuple((tuple(json.loads(k)), str(why)) for k, why in named)
            first = Reason.LEASE_HELD if any(why == Reason.LEASE_HELD for _, why in refused) \
                else KEY_NOT_ASCII
            return RenameResult(False, old, new, 0, first, refused, blocked)
        return RenameResult(True, old, new, moved)

    # -- the statements ------------------------------------------------------------------

    def _statements(self) -> tuple[Statement, ...]:
        if self._stmts is None:
            static: dict[str, Any] = {}
            checks = self.rules.checks("rename", Ask(), static)
            self._static = static
            self._stmts = (self._postgres(checks) if self.dialect.writable_ctes
                           else self._sqlite(checks))
        return self._stmts

    def _row_key(self, alias: str) -> str:
        """The event's ``row_key`` in SQL: ``json.dumps`` of the key, for the keys this
        path takes (integers; text of U+0001..U+007E)."""
        d = self.dialect
        quote = "json_quote({})" if not d.writable_ctes else "to_json({})::text"
        parts = " || ', ' || ".join(quote.format(d.column(k, alias))
                                     for k in self.binding.key)
        return f"'[' || {parts} || ']'"

    def _refusing(self, checks: list[Any], alias: str, out: SqlOut) -> str:
        """SQL: the row refuses the rename (a live lease, a key SQL cannot spell)."""
        lease = self._lease_held(checks, alias, out)
        bad_key = []
        for name, kind in zip(self.binding.key, self.binding.key_kinds, strict=True):
            if kind == "int":
                continue
            col = f"CAST({self.dialect.column(name, alias)} AS TEXT)"
            if self.dialect.writable_ctes:
                bad_key.append(f"{col} ~ '[^\\x01-\\x7e]'")
            else:
                bad_key.append(f"{col} GLOB '*[^' || char(1) || '-' || char(126) || ']*'")
        return "(" + " OR ".join([*([lease] if lease else []), *bad_key] or ["1 = 0"]) + ")"

    def _why(self, checks: list[Any], alias: str, out: SqlOut) -> str:
        """SQL: the reason a refusing row gives (parameters appended where it is used)."""
        lease = self._lease_held(checks, alias, out)
        if not lease:
            return f"'{KEY_NOT_ASCII}'"
        return f"CASE WHEN {lease} THEN '{Reason.LEASE_HELD}' ELSE '{KEY_NOT_ASCII}' END"

    def _lease_held(self, checks: list[Any], alias: str, out: SqlOut) -> str:
        """SQL: the rename's checks (``lease_free``, from the rules) fail on the row."""
        if not checks:
            return ""
        return "NOT (" + " AND ".join(render(ch.node, self.dialect, alias, out)
                                      for ch in checks) + ")"

    def _event_head(self, alias: str, version: str, out: SqlOut) -> str:
        """The event's values, in :data:`~rowstate.outbox.EVENT_WRITTEN` order: no owner
        and no data (a rename is nobody's move of the row), who and why in ``actor`` and
        ``note`` (:func:`~rowstate.compiler.event_said`)."""
        d = self.dialect
        return (f"{d.value(Const(self.machine.name), out)}, {self._row_key(alias)}, "
                f"{d.value(Slot('edge'), out)}, {d.value(Slot('old'), out)}, "
                f"{d.value(Slot('new'), out)}, NULL, NULL, {version}, {d.now(out)}, "
                f"{event_said(d, out)}")

    def _postgres(self, checks: list[Any]) -> tuple[Statement, ...]:
        d, c, b = self.dialect, self.context.compiler, self.binding
        out = SqlOut()
        keys = [d.quote(k) for k in b.key]
        picked = ", ".join(f"c.{k}" for k in keys)
        if b.lease is not None:
            picked += f", c.{d.quote(b.lease.at)}"
        ctes = [f"cur AS (SELECT {picked} FROM {c.table} AS c WHERE c.{d.quote(b.state)} = "
                f"{d.value(Slot('old'), out)} ORDER BY {', '.join(f'c.{k}' for k in keys)} "
                f"FOR UPDATE)"]
        why = self._why(checks, "cur", out)
        refusing = self._refusing(checks, "cur", out)
        ctes.append(f"blocked AS (SELECT {self._row_key('cur')} AS rs_key, {why} AS rs_why "
                    f"FROM cur WHERE {refusing})")
        sets = c.set_clause(self.rules.rename_sets(), out)
        version = f"t.{d.quote(b.version)}" if b.version else "NULL::bigint"
        returned = ", ".join(f"t.{k}" for k in keys)
        # the rows ``cur`` locked, found again by the same snapshot (no join with cur: the
        # planner would hash 250k keys); the one-time NOT EXISTS reads all of ``blocked``,
        # so every row is locked and judged before the first is written
        ctes.append(f"upd AS (UPDATE {c.table} AS t SET {sets} WHERE t.{d.quote(b.state)} = "
                    f"{d.value(Slot('old'), out)} AND NOT EXISTS (SELECT 1 FROM blocked) "
                    f"RETURNING {returned}, {version} AS rs_version)")
        counted = "upd"
        if self.context.event_table:
            head = self._event_head("upd", "upd.rs_version", out)
            ctes.append(f"ev AS (INSERT INTO {d.table(self.context.event_table)} "
                        f"({EVENT_COLUMNS}) SELECT {head} FROM upd RETURNING 1)")
            counted = "ev"
        sql = (f"WITH {', '.join(ctes)} SELECT (SELECT COUNT(*) FROM {counted}), NULL::text, "
               f"NULL::text, (SELECT COUNT(*) FROM blocked) UNION ALL (SELECT NULL, rs_key, "
               f"rs_why, NULL FROM blocked ORDER BY rs_key LIMIT {MAX_NAMED})")
        return (Statement(sql, tuple(out.params)),)

    def _sqlite(self, checks: list[Any]) -> tuple[Statement, ...]:
        """Inside BEGIN IMMEDIATE: the refusing rows named and counted, then the events
        and the UPDATE (each only if there are none), then how many rows it moved. (Each
        write's NOT EXISTS is one more scan for the first refusing row: the price of
        deciding inside the one transaction, where no Python runs between statements.)"""
        d, c, b = self.dialect, self.context.compiler, self.binding
        state = d.quote(b.state)
        table = c.table
        stmts = []

        def none_refusing(out: SqlOut) -> str:  # parameters appended in the text's order
            old = d.value(Slot("old"), out)
            refusing = self._refusing(checks, "r", out)
            return (f"NOT EXISTS (SELECT 1 FROM {table} AS r WHERE r.{state} = {old} "
                    f"AND {refusing})")

        out = SqlOut()
        why = self._why(checks, "r", out)
        where = f"r.{state} = {d.value(Slot('old'), out)} AND {self._refusing(checks, 'r', out)}"
        # the window counts every refusing row before the LIMIT: one scan names and counts
        stmts.append(Statement(f"SELECT {self._row_key('r')} AS k, {why}, COUNT(*) OVER () "
                               f"FROM {table} AS r WHERE {where} ORDER BY k LIMIT {MAX_NAMED}",
                               tuple(out.params)))
        if self.context.event_table:
            out = SqlOut()
            version = f"COALESCE(src.{d.quote(b.version)}, 0) + 1" if b.version else "NULL"
            head = self._event_head("src", version, out)
            cond = f"src.{state} = {d.value(Slot('old'), out)} AND {none_refusing(out)}"
            stmts.append(Statement(
                f"INSERT INTO {d.table(self.context.event_table)} ({EVENT_COLUMNS}) "
                f"SELECT {head} FROM {table} AS src WHERE {cond}", tuple(out.params)))
        out = SqlOut()
        sets = c.set_clause(self.rules.rename_sets(), out)
        cond = f"{state} = {d.value(Slot('old'), out)} AND {none_refusing(out)}"
        stmts.append(Statement(f"UPDATE {table} SET {sets} WHERE {cond}", tuple(out.params)))
        stmts.append(Statement("SELECT changes()", ()))
        return tuple(stmts)
