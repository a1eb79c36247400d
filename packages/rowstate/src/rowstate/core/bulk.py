"""Set-based moves: many rows through the door in one statement.

``transition_many`` moves every listed (or matching) row to ``to`` under exactly the
checks a one-row :meth:`transition` is conditioned on (from-states, no live lease, owner,
entry guards, the caller's guards), writes one event row per moved row in the same
statement (PostgreSQL: one statement of CTEs; SQLite: one ``BEGIN IMMEDIATE``
transaction), and explains every row it did not move with the Python reader of the same
checks. A UNIQUE invariant on the target makes a set-based write all-or-nothing, so when
the set write breaks one, the rows are moved one by one instead (each its own verdict).

Rows are named by a one-column key. ``where=`` first reads the matching keys (rows in a
from-state whose fields match, checked like guards), then moves those keys: the move
re-checks everything, so a row that changed in between is refused, never moved wrongly.
It moves EVERY matching row: ``limit`` keys per write (a keyset page, read in key order),
as many writes as it takes; ``keys=`` longer than ``limit`` is refused before any I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..compiler import Statement, event_said
from ..conditions import Check, Const, RowView, Slot, SqlOut, failing, render
from ..errors import InvariantViolation, ValidationError
from ..outbox import EVENT_COLUMNS
from ..protocol import Batch, Op
from ..results import BulkResult, Event, Reason
from ..specs import GuardSpec
from .context import Context
from .inputs import Inputs
from .moves import Moves
from .plans import Plans
from .rows import MAX_FIND, Rows
from .rules import Rules


class Bulk:
    """``transition_many``, and the timers' set-based move of a pure timed edge."""

    def __init__(self, context: Context, inputs: Inputs, rules: Rules, plans: Plans,
                 moves: Moves, rows: Rows) -> None:
        self.context = context
        self.binding = context.binding
        self.machine = context.machine
        self.dialect = context.dialect
        self.compiler = context.compiler
        self.inputs = inputs
        self.rules = rules
        self.plans = plans
        self.moves = moves
        self.rows = rows

    def transition_many(self, to: str, *, keys: Iterable[object] | None = None,
                        where: GuardSpec | None = None,
                        from_: Iterable[str] | str | None = None, owner: object = None,
                        guards: GuardSpec | None = None, data: Any = None,
                        limit: int = MAX_FIND, by: str | None = None,
                        note: str | None = None) -> Op[BulkResult]:
        to = self.inputs.target(to)
        froms = self.inputs.froms(to, from_)
        by, note = self.inputs.by(by), self.inputs.note(note)
        if len(self.binding.key) != 1:
            raise ValidationError(f"{self.binding.table}: transition_many needs a one-column key")
        if (keys is None) == (where is None):
            raise ValidationError("transition_many: give keys= or where=, not both")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_FIND:
            raise ValidationError(f"transition_many: limit is an int in 1..{MAX_FIND}, "
                                  f"got {limit!r}")
        owner = self.inputs.owner(owner)
        data_text = self.inputs.data(data) if data is not None else None
        if where is not None:
            return (yield from self._move_matching(to, froms, where, limit, owner, guards,
                                                   data_text, data, by, note))
        else:
            if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
                raise ValidationError(f"transition_many: keys is an iterable of keys, "
                                      f"got {keys!r}")
            wanted = list(dict.fromkeys(self.binding.key_values(k)[0] for k in keys))
            if len(wanted) > limit:
                raise ValidationError(f"transition_many: {len(wanted)} keys; the limit is "
                                      f"{limit}")
        return (yield from self.move_keys(to, wanted, froms, guards, None, None,
                                          owner, data_text, data, by=by, note=note))

    def _move_matching(self, to: str, froms: tuple[str, ...], where: GuardSpec, limit: int,
                       owner: Any, guards: GuardSpec | None, data_text: str | None,
                       data: Any, by: str | None, note: str | None) -> Op[BulkResult]:
        """Every row matching ``where``, moved in batches of ``limit`` keys (each batch its
        own write): the keys are read a keyset page at a time, so no matching row is left
        behind unreported and none is moved twice."""
        applied: list[tuple[Any, ...]] = []
        refused: list[tuple[tuple[Any, ...], str]] = []
        events: list[Event] = []
        after = None
        while True:
            wanted = yield from self.rows.match_keys(froms, where, after, limit)
            if not wanted:
                break
            got = yield from self.move_keys(to, wanted, froms, guards, None, None, owner,
                                            data_text, data, by=by, note=note)
            applied.extend(got.applied)
            refused.extend(got.refused)
            events.extend(got.events)
            if len(wanted) < limit:
                break
            after = wanted[-1]
        return BulkResult(tuple(applied), tuple(refused), tuple(events))

    def move_keys(self, to: str, wanted: list[Any], froms: tuple[str, ...],
                         guards: GuardSpec | None, due: str | None, edge: Any,
                         owner: Any = None, data_text: str | None = None,
                         data: Any = None, due_at: Any = None, *, by: str | None = None,
                         note: str | None = None) -> Op[BulkResult]:
        """Move ``wanted`` (checked key values; ``by`` and ``note`` checked too); ``due``
        adds a timer's deadline check (``@column``: judged by the business instant
        ``due_at``)."""
        if not wanted:
            return BulkResult(())
        values = self.context.clock_values()
        if due_at is not None:
            values["due_at"] = due_at
        plan = self.plans.transition(to, froms, owner, {}, guards, values, None, due)
        # the event's row_key is built in SQL (json_array / json_build_array): the text
        # json.dumps gives for ints and for text of U+0000..U+007E; other keys (DEL,
        # non-ASCII: json.dumps escapes them, the databases do not) go one by one
        values.update(to=to, ev_owner=None if owner is None else str(owner),
                      ev_data=data_text, ev_by=by, ev_note=note, keys_json=json.dumps(wanted),
                      key_list=wanted)
        gshape = tuple(self.binding.guard_items(guards)) if guards else ()
        # PostgreSQL needs the key array's type: the keys' own (str -> text, int -> bigint)
        array = "bigint[]" if all(type(k) is int for k in wanted) else "text[]"
        if array == "text[]" and not all(type(k) is str for k in wanted):
            raise ValidationError("transition_many: keys of one type, all str or all int")
        if array == "text[]" and not all(_sql_names_alike(k) for k in wanted):
            # the SQL's row_key would not be the one-row door's: each its own move
            return (yield from self._one_by_one(wanted, to, froms, owner, guards, data,
                                                due, edge, due_at, by, note))
        shape = ("many", to, froms, owner is not None, gshape, due, array)
        stmts = self.context.plans.get(shape)
        if stmts is None:
            stmts = self._compile_many(plan.checks, to, froms, array)
            self.context.plans[shape] = stmts
        try:
            rows = yield Batch(tuple(s.bind(self.dialect, values) for s in stmts),
                               transaction=len(stmts) > 1)
        except InvariantViolation:
            return (yield from self._one_by_one(wanted, to, froms, owner, guards, data,
                                                due, edge, due_at, by, note))
        return (yield from self._many_verdict(rows, wanted, plan.checks, values, to, owner,
                                              data))

    def _one_by_one(self, wanted: list[Any], to: str, froms: tuple[str, ...], owner: Any,
                    guards: GuardSpec | None, data: Any, due: str | None,
                    edge: Any, due_at: Any = None, by: str | None = None,
                    note: str | None = None) -> Op[BulkResult]:
        applied, refused, events = [], [], []
        for k in wanted:
            got = yield from self.moves.move(k, to, froms, owner, None, guards, data, edge,
                                              None, due, due_at, by=by, note=note)
            if got.applied:
                applied.append((k,))
                if got.event is not None:
                    events.append(got.event)
            else:
                refused.append(((k,), str(got.reason)))
        return BulkResult(tuple(applied), tuple(refused), tuple(events))

    def _many_verdict(self, rows: list[list[tuple[Any, ...]]], wanted: list[Any],
                      checks: tuple[Check, ...], values: dict[str, Any], to: str,
                      owner: Any, data: Any) -> Op[BulkResult]:
        """Per-row verdicts from what the write returned: for each moved row its key, the
        state it left, its event id and version; every other key is read once more (only
        when there is one) and explained by the Python reader of the same checks."""
        moved: list[tuple[Any, str, Any, Any]] = []  # key, from-state, event id, version
        if self.dialect.writable_ctes:
            at = rows[0][0][4] if rows[0] else None
            for key, src, event_id, version, _ in rows[0]:
                if self.context.event_table:  # the event's row_key, e.g. '["w1"]'
                    key = _key_of(key)
                moved.append((key, src, event_id, version))
        else:
            at = None
            versions = {r[0]: r[1] for r in rows[-1]}
            if self.context.event_table:
                for event_id, row_key, src in rows[0]:
                    key = _key_of(row_key)
                    moved.append((key, src, event_id, versions.get(key)))
            else:
                before = {r[0]: r[1] for r in rows[0]}
                moved = [(k, str(before.get(k)), None, v) for k, v in versions.items()]
        when = self.context.now(at)
        o = None if owner is None else str(owner)
        name = self.context.edge_name
        by, note = values.get("ev_by"), values.get("ev_note")
        events = tuple(Event(self.machine.name, (k,), name(src, to), src, to, o, data, version,
                             when, event_id, None, by, note)
                       for k, src, event_id, version in moved)
        done = {m[0] for m in moved}
        left = [k for k in wanted if k not in done]
        refused: list[tuple[tuple[Any, ...], str]] = []
        if left:
            found = yield from self._rows_of(left)
            for k in left:
                row = found.get(k)
                if row is None:
                    refused.append(((k,), Reason.RECORD_NOT_FOUND))
                    continue
                view = RowView(row[0], values, self.context.now(row[1]), self.dialect.parse_time,
                               self.dialect.load_json)
                bad = failing(checks, view)
                refused.append(((k,), str(bad[0].category) if bad else Reason.STATE_MISMATCH))
        return BulkResult(tuple((m[0],) for m in moved), tuple(refused), events)

    def _rows_of(self, keys: list[Any]) -> Op[dict[Any, tuple[dict[str, Any], Any]]]:
        """The rows of ``keys`` as they are now (with the clock reading that judges them)."""
        d, c = self.dialect, self.compiler
        out = SqlOut()
        now = d.now(out)
        key = d.quote(self.binding.key[0])
        cond = d.in_list(key, d.value(Slot("keys"), out))
        values: dict[str, Any] = {"keys": d.list_param(keys)}
        values.update(self.context.clock_values())
        stmt = Statement(f"SELECT {c.cols(None)}, {now} FROM {c.table} WHERE {cond}",
                         tuple(out.params))
        rows = yield Batch((stmt.bind(d, values),))
        n = len(self.context.columns)
        found = {}
        for r in rows[0]:
            row = dict(zip(self.context.columns, r[:n], strict=True))
            found[row[self.binding.key[0]]] = (row, r[n])
        return found

    def _compile_many(self, checks: tuple[Check, ...], to: str,
                      froms: tuple[str, ...], array: str) -> tuple[Statement, ...]:
        d, c, b = self.dialect, self.compiler, self.binding
        key = d.quote(b.key[0])
        names = tuple((s, self.context.edge_name(s, to)) for s in froms)
        state_cols = [b.state, *([b.derived.column] if b.derived else [])]
        if d.writable_ctes:
            return (self._compile_many_pg(checks, to, froms, array, names, state_cols),)
        # SQLite, inside BEGIN IMMEDIATE: the events (they name the state each row left),
        # then the UPDATE; without an events table, the states are read first
        keyset = "(SELECT value FROM json_each({p}))"
        stmts = []
        if self.context.event_table:
            ev_out = SqlOut()
            machine = d.value(Const(self.machine.name), ev_out)
            # json_each has columns of its own (id, key, value...): the table is aliased
            case_on = d.ref(b.state_ref, "src", ev_out) if len(names) > 1 else ""
            edge = self._edge_case(case_on, names, ev_out)
            state = d.ref(b.state_ref, "src", ev_out)
            version = f"COALESCE(src.{d.quote(b.version)}, 0) + 1" if b.version else "NULL"
            head = (f"{machine}, json_array(src.{key}), {edge}, {state}, "
                    f"{d.value(Slot('to'), ev_out)}, {d.value(Slot('ev_owner'), ev_out)}, "
                    f"{d.json_param(Slot('ev_data'), ev_out)}, {version}, {d.now(ev_out)}, "
                    f"{event_said(d, ev_out)}")
            source = keyset.format(p=d.value(Slot("keys_json"), ev_out))
            cond = " AND ".join(render(ch.node, d, "src", ev_out) for ch in checks)
            stmts.append(Statement(
                f"INSERT INTO {d.table(self.context.event_table)} ({EVENT_COLUMNS}) SELECT {head} "
                f"FROM {c.table} AS src WHERE src.{key} IN {source} AND {cond} "
                f"RETURNING id, row_key, from_state",
                tuple(ev_out.params)))
        else:
            pre_out = SqlOut()
            state = d.ref(b.state_ref, None, pre_out)
            where = keyset.format(p=d.value(Slot("keys_json"), pre_out))
            stmts.append(Statement(f"SELECT {key}, {state} FROM {c.table} WHERE {key} IN "
                                   f"{where}", tuple(pre_out.params)))
        up_out = SqlOut()
        set_sql = c.set_clause(self.rules.entry_sets(to, {}, {}, False), up_out)
        where = keyset.format(p=d.value(Slot("keys_json"), up_out))
        cond = " AND ".join(render(ch.node, d, None, up_out) for ch in checks)
        version = d.quote(b.version) if b.version else "NULL"
        stmts.append(Statement(
            f"UPDATE {c.table} SET {set_sql} WHERE {key} IN {where} AND {cond} "
            f"RETURNING {key}, {version}", tuple(up_out.params)))
        return tuple(stmts)

    def _compile_many_pg(self, checks: tuple[Check, ...], to: str, froms: tuple[str, ...],
                         array: str, names: tuple[tuple[str, str], ...],
                         state_cols: list[str]) -> Statement:
        """One statement: the UPDATE of every listed row that passes the checks, and its
        events, whose ``row_key`` is ``json_build_array(key)::text``, the text
        ``json.dumps`` gives for the keys this path takes (``_sql_names_alike``; others go
        one by one). The rows are first read and locked (``cur``, found by ``key =
        ANY(...)``, the primary key's index: a join with the key list misleads the planner
        into nested loops over tables every bulk move bloats) IN KEY ORDER, whatever order
        the plan's scan meets them in: two calls over overlapping rows then wait for each
        other instead of deadlocking (PostgreSQL would cancel one, and it would move
        nothing); the later one's rows are its per-row refusals. ``cur`` also tells the
        state each row left."""
        d, c, b = self.dialect, self.compiler, self.binding
        key = d.quote(b.key[0])
        out = SqlOut()
        picked = ", ".join(d.column(col, "c") for col in dict.fromkeys([b.key[0],
                                                                       *state_cols]))
        ctes = [f"cur AS (SELECT {picked} FROM {c.table} AS c WHERE c.{key} = "
                f"ANY({d.value(Slot('key_list'), out)}::{array}) ORDER BY c.{key} "
                f"FOR UPDATE)"]
        # parameters are appended in the order the text uses them
        sets = c.set_clause(self.rules.entry_sets(to, {}, {}, False), out)
        version = f"t.{d.quote(b.version)}" if b.version else "NULL::bigint"
        cond = " AND ".join(render(ch.node, d, "t", out) for ch in checks)
        if len(froms) > 1:
            state_before = d.ref(b.state_ref, "cur", out)
        else:
            state_before = f"{d.value(Const(froms[0]), out)}::text"
        ctes.append(f"upd AS (UPDATE {c.table} AS t SET {sets} FROM cur WHERE "
                    f"t.{key} = cur.{key} AND {cond} RETURNING t.{key} AS rs_key, "
                    f"{version} AS rs_version, {state_before} AS rs_from)")
        if not self.context.event_table:
            now = d.now(out)
            return Statement(f"WITH {', '.join(ctes)} SELECT rs_key, rs_from, NULL::bigint, "
                             f"rs_version, {now} FROM upd", tuple(out.params))
        ev_out = SqlOut()
        machine = d.value(Const(self.machine.name), ev_out)
        edge = self._edge_case("upd.rs_from", names, ev_out)
        head = (f"{machine}, json_build_array(upd.rs_key)::text, {edge}, upd.rs_from, "
                f"{d.value(Slot('to'), ev_out)}, {d.value(Slot('ev_owner'), ev_out)}, "
                f"{d.json_param(Slot('ev_data'), ev_out)}, upd.rs_version, {d.now(ev_out)}, "
                f"{event_said(d, ev_out)}")
        ctes.append(f"ev AS (INSERT INTO {d.table(self.context.event_table)} ({EVENT_COLUMNS}) "
                    f"SELECT {head} FROM upd RETURNING id, row_key, from_state, version)")
        now = d.now(ev_out)  # the final SELECT's clock comes after the event's parameters
        return Statement(f"WITH {', '.join(ctes)} SELECT row_key, from_state, id, version, "
                         f"{now} FROM ev", (*out.params, *ev_out.params))

    def _edge_case(self, state_sql: str, names: tuple[tuple[str, str], ...],
                   out: SqlOut) -> str:
        d = self.dialect
        if len(names) == 1:
            return d.value(Const(names[0][1]), out)
        whens = " ".join(f"WHEN {d.value(Const(s), out)} THEN {d.value(Const(n), out)}"
                         for s, n in names)
        return f"CASE {state_sql} {whens} END"


def _sql_names_alike(key: str) -> bool:
    """Does SQL's JSON text of ``key`` (SQLite's ``json_array``, PostgreSQL's
    ``json_build_array``) equal ``json.dumps``'s, the row_key the one-row door writes and
    ``history`` looks up? For U+0000..U+007E both escape alike (quotes, backslashes,
    control characters); DEL and non-ASCII only ``json.dumps`` escapes."""
    return key.isascii() and "\x7f" not in key


def _key_of(row_key: str) -> Any:
    """The one key value of an event's ``row_key`` (``[7]`` or ``["w1"]``); an int's text
    is read without the JSON decoder (a set-based move reads a thousand of them)."""
    inner = row_key[1:-1]
    if inner[:1] != '"':
        return int(inner)
    return json.loads(row_key)[0]
