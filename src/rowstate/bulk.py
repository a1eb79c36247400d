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
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .base import Op
from .binding import GuardSpec
from .compiler import Batch, Statement
from .conditions import Check, Const, RowView, Slot, SqlOut, failing, render
from .errors import InvariantViolation, ValidationError
from .outbox import EVENT_COLUMNS
from .results import BulkResult, Event, Reason
from .rows import MAX_FIND, RowOps


class BulkOps(RowOps):
    """transition_many."""

    def transition_many(self, to: str, *, keys: Iterable[object] | None = None,
                        where: GuardSpec | None = None,
                        from_: Iterable[str] | str | None = None, owner: object = None,
                        guards: GuardSpec | None = None, data: Any = None,
                        limit: int = MAX_FIND) -> Op[BulkResult]:
        froms = self._froms(to, from_)
        if len(self.b.key) != 1:
            raise ValidationError(f"{self.b.table}: transition_many needs a one-column key")
        if (keys is None) == (where is None):
            raise ValidationError("transition_many: give keys= or where=, not both")
        owner = self._owner(owner)
        data_text = self._data(data) if data is not None else None
        if where is not None:
            found = yield from self.find(state=froms, where=where, limit=limit)
            wanted = [row[self.b.key[0]] for row in found]
        else:
            if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
                raise ValidationError(f"transition_many: keys is an iterable of keys, "
                                      f"got {keys!r}")
            wanted = list(dict.fromkeys(self.b.key_values(k)[0] for k in keys))
            if len(wanted) > limit:
                raise ValidationError(f"transition_many: {len(wanted)} keys; the limit is "
                                      f"{limit}")
        return (yield from self._transition_many(to, wanted, froms, guards, None, None,
                                                 owner, data_text, data))

    def _transition_many(self, to: str, wanted: list[Any], froms: tuple[str, ...],
                         guards: GuardSpec | None, due: str | None, edge: Any,
                         owner: Any = None, data_text: str | None = None,
                         data: Any = None, due_at: Any = None) -> Op[BulkResult]:
        """Move ``wanted`` (checked key values); ``due`` adds a timer's deadline check
        (``@column``: judged by the business instant ``due_at``)."""
        if not wanted:
            return BulkResult(())
        values = self._clock_values()
        if due_at is not None:
            values["due_at"] = due_at
        plan = self._transition_plan(to, froms, owner, {}, guards, values, None, due)
        pairs = [[k, json.dumps([k])] for k in wanted]
        values.update(to=to, ev_owner=None if owner is None else str(owner),
                      ev_data=data_text, keys_json=json.dumps(pairs),
                      key_list=[p[0] for p in pairs], row_key_list=[p[1] for p in pairs])
        gshape = tuple(self.b.guard_items(guards)) if guards else ()
        # PostgreSQL needs the key array's type: the keys' own (str -> text, int -> bigint)
        array = "bigint[]" if all(type(k) is int for k in wanted) else "text[]"
        if array == "text[]" and not all(type(k) is str for k in wanted):
            raise ValidationError("transition_many: keys of one type, all str or all int")
        shape = ("many", to, froms, owner is not None, gshape, due, array)
        stmts = self._plans.get(shape)
        if stmts is None:
            stmts = self._compile_many(plan.checks, to, froms, array)
            self._plans[shape] = stmts
        try:
            rows = yield Batch(tuple(s.bind(self.d, values) for s in stmts),
                               transaction=len(stmts) > 1)
        except InvariantViolation:
            return (yield from self._one_by_one(wanted, to, froms, owner, guards, data,
                                                due, edge, due_at))
        return self._many_verdict(rows, wanted, plan.checks, values, to, owner, data)

    def _one_by_one(self, wanted: list[Any], to: str, froms: tuple[str, ...], owner: Any,
                    guards: GuardSpec | None, data: Any, due: str | None,
                    edge: Any, due_at: Any = None) -> Op[BulkResult]:
        applied, refused, events = [], [], []
        for k in wanted:
            got = yield from self._transition(k, to, froms, owner, None, guards, data, edge,
                                              None, due, due_at)
            if got.applied:
                applied.append((k,))
                if got.event is not None:
                    events.append(got.event)
            else:
                refused.append(((k,), str(got.reason)))
        return BulkResult(tuple(applied), tuple(refused), tuple(events))

    def _many_verdict(self, rows: list[list[tuple[Any, ...]]], wanted: list[Any],
                      checks: tuple[Check, ...], values: dict[str, Any], to: str,
                      owner: Any, data: Any) -> BulkResult:
        n = len(self.columns)
        if self.c.pg:
            result = rows[0]
        else:  # before-rows, event ids, moved keys
            ev_ids = {r[1]: r[0] for r in rows[1]} if len(rows) > 2 else {}
            moved = {r[0]: r[1] for r in rows[-1]}
            result = [(*r[:n], r[self._key_index] in moved, ev_ids.get(
                json.dumps([r[self._key_index]])), moved.get(r[self._key_index]), r[n])
                for r in rows[0]]
        seen: set[Any] = set()
        applied, refused, events = [], [], []
        ki = self._key_index
        plain_state = self.b.state_ref.derived is None
        si = self.columns.index(self.b.state)
        at = self._now(result[0][n + 3]) if result else None  # one clock for the statement
        for r in result:
            k = r[ki]
            seen.add(k)
            moved_it, event_id, version, now = r[n], r[n + 1], r[n + 2], r[n + 3]
            if moved_it and plain_state:  # the common case: no row dict to build
                src = r[si]
            else:
                before = dict(zip(self.columns, r[:n], strict=True))
                src = self.state_of(before) or ""
            if moved_it:
                applied.append((k,))
                events.append(Event(self.m.name, (k,), self._edge_name(src, to), src, to,
                                    None if owner is None else str(owner), data, version,
                                    at, event_id))
                continue
            view = RowView(before, values, self._now(now), self.d.parse_time)
            bad = failing(checks, view)
            refused.append(((k,), str(bad[0].category) if bad else Reason.STATE_MISMATCH))
        for k in wanted:
            if k not in seen:
                refused.append(((k,), Reason.RECORD_NOT_FOUND))
        return BulkResult(tuple(applied), tuple(refused), tuple(events))

    def _compile_many(self, checks: tuple[Check, ...], to: str,
                      froms: tuple[str, ...], array: str) -> tuple[Statement, ...]:
        d, c, b = self.d, self.c, self.b
        key = d.quote(b.key[0])
        names = tuple((s, self._edge_name(s, to)) for s in froms)
        if c.pg:
            out = SqlOut()
            k = (f"k AS (SELECT * FROM unnest({d.value(Slot('key_list'), out)}::{array}, "
                 f"{d.value(Slot('row_key_list'), out)}::text[]) AS k(key, row_key))")
            cur = (f"cur AS (SELECT {c.cols('c')}, k.row_key AS rs_row_key FROM {c.table} AS c "
                   f"JOIN k ON c.{key} = k.key FOR UPDATE OF c)")
            sets = self._entry_sets(to, {}, {}, False)
            set_sql = c._set_clause(sets, out)
            cond = " AND ".join(render(ch.node, d, "t", out) for ch in checks)
            state_before = d.ref(b.state_ref, "cur", out)  # parameters in text order
            version = f"t.{d.quote(b.version)}" if b.version else "NULL::bigint"
            upd = (f"upd AS (UPDATE {c.table} AS t SET {set_sql} FROM cur "
                   f"WHERE t.{key} = cur.{key} AND {cond} "
                   f"RETURNING t.{key} AS rs_key, {version} AS rs_version, "
                   f"{state_before} AS rs_from, cur.rs_row_key)")
            machine = d.value(Const(self.m.name), out)
            edge = self._edge_case("upd.rs_from", names, out)
            head = (f"{machine}, upd.rs_row_key, {edge}, upd.rs_from, "
                    f"{d.value(Slot('to'), out)}, {d.value(Slot('ev_owner'), out)}, "
                    f"{d.json_param(Slot('ev_data'), out)}, upd.rs_version, {d.now(out)}")
            ev = (f"ev AS (INSERT INTO {d.table(self._event_table)} ({EVENT_COLUMNS}) "
                  f"SELECT {head} FROM upd RETURNING id, row_key)") if self._event_table else ""
            # joined, not a subquery per row: a hash join instead of n x n scans of ev
            ev_id, ev_join = (("ev.id", " LEFT JOIN ev ON ev.row_key = cur.rs_row_key")
                              if self._event_table else ("NULL::bigint", ""))
            now = d.now(out)
            ctes = ", ".join(x for x in (k, cur, upd, ev) if x)
            sql = (f"WITH {ctes} SELECT {c.cols('cur')}, upd.rs_key IS NOT NULL, {ev_id}, "
                   f"upd.rs_version, {now} FROM cur LEFT JOIN upd ON upd.rs_key = cur.{key}"
                   f"{ev_join}")
            return (Statement(sql, tuple(out.params)),)
        # SQLite, inside BEGIN IMMEDIATE: the rows before, the events, the UPDATE
        keyset = "(SELECT json_extract(value, '$[0]') FROM json_each({p}))"
        pre_out = SqlOut()
        pre = Statement(
            f"SELECT {c.cols(None)}, {d.now(pre_out)} FROM {c.table} WHERE {key} IN "
            + keyset.format(p=d.value(Slot("keys_json"), pre_out)), tuple(pre_out.params))
        stmts = [pre]
        if self._event_table:
            ev_out = SqlOut()
            machine = d.value(Const(self.m.name), ev_out)
            # json_each has columns of its own (id, key, value...): the table is aliased
            # the CASE reads the state only with several from-states (and only then binds)
            case_on = d.ref(b.state_ref, "src", ev_out) if len(names) > 1 else ""
            edge = self._edge_case(case_on, names, ev_out)
            state = d.ref(b.state_ref, "src", ev_out)
            version = f"COALESCE(src.{d.quote(b.version)}, 0) + 1" if b.version else "NULL"
            head = (f"{machine}, json_extract(k.value, '$[1]'), {edge}, {state}, "
                    f"{d.value(Slot('to'), ev_out)}, {d.value(Slot('ev_owner'), ev_out)}, "
                    f"{d.json_param(Slot('ev_data'), ev_out)}, {version}, {d.now(ev_out)}")
            source = d.value(Slot("keys_json"), ev_out)
            cond = " AND ".join(render(ch.node, d, "src", ev_out) for ch in checks)
            stmts.append(Statement(
                f"INSERT INTO {d.table(self._event_table)} ({EVENT_COLUMNS}) SELECT {head} "
                f"FROM {c.table} AS src JOIN json_each({source}) AS k "
                f"ON src.{key} = json_extract(k.value, '$[0]') WHERE {cond} "
                f"RETURNING id, row_key",
                tuple(ev_out.params)))
        up_out = SqlOut()
        set_sql = c._set_clause(self._entry_sets(to, {}, {}, False), up_out)
        where = keyset.format(p=d.value(Slot("keys_json"), up_out))
        cond = " AND ".join(render(ch.node, d, None, up_out) for ch in checks)
        version = d.quote(b.version) if b.version else "NULL"
        stmts.append(Statement(
            f"UPDATE {c.table} SET {set_sql} WHERE {key} IN {where} AND {cond} "
            f"RETURNING {key}, {version}", tuple(up_out.params)))
        return tuple(stmts)

    def _edge_case(self, state_sql: str, names: tuple[tuple[str, str], ...],
                   out: SqlOut) -> str:
        d = self.d
        if len(names) == 1:
            return d.value(Const(names[0][1]), out)
        whens = " ".join(f"WHEN {d.value(Const(s), out)} THEN {d.value(Const(n), out)}"
                         for s, n in names)
        return f"CASE {state_sql} {whens} END"
