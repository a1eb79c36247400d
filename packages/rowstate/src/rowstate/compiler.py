"""Statements built from conditions, once per statement shape.

A *shape* is everything that changes the SQL text of a call (target state, from-set, which
guards and payload columns, whether an owner is checked) and nothing that only changes its
values. Plans are cached per shape, so a call costs a dict lookup and a parameter tuple;
the text is byte-identical across calls, which lets psycopg prepare it server-side.

The central plan is the compare-and-set (:class:`CasPlan`): one conditional UPDATE, the
event row, and a read of the row as it was, so a refusal can be explained:

* the fast path, when the from-state is known: the hand-written ``UPDATE ... RETURNING``
  itself (on PostgreSQL with the event row, the hand-written CTE that writes both). A
  refusal returns no row; a follow-up read explains it.
* PostgreSQL, several from-states: one statement. ``cur`` locks and reads the row (FOR
  UPDATE waits for a concurrent writer and then sees its result), ``upd`` is the
  conditional UPDATE, ``ev`` inserts the event from both (the edge depends on the state
  left); the final SELECT returns the row before and after.
* SQLite otherwise: inside ``BEGIN IMMEDIATE``, the read (only from several states), the
  event ``INSERT ... SELECT`` under the same conditions, and the UPDATE, which returns the
  event's id (``last_insert_rowid()``) and the write's time with the row. SQLite has one
  writer, so they see the same row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from .binding import Binding
from .conditions import Check, Const, Ref, Slot, SqlOut, Value, render
from .dialects import Dialect, Postgres
from .outbox import EVENT_COLUMNS
from .protocol import Batch
from .specs import NOW


def event_said(d: Dialect, out: SqlOut) -> str:
    """The event row's ``actor, note`` (who moved the row and why): every writer of events
    ends its value list with these two slots, filled from ``ev_by`` and ``ev_note``."""
    return f"{d.value(Slot('ev_by'), out)}, {d.value(Slot('ev_note'), out)}"


@dataclass(frozen=True, slots=True)
class Statement:
    """SQL text and the slots/constants its parameters come from, in order."""

    sql: str
    params: tuple[Value, ...]
    # when no parameter is a JSON slot (which the dialects adapt), binding is a plain
    # lookup: constants are sent as they are, slots read from the call's values
    plain: Callable[[dict[str, Any]], list[Any]] | None = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plain = None
        if not any(isinstance(p, Slot) and p.json for p in self.params):
            plain = _plain_binder(self.params)
        object.__setattr__(self, "plain", plain)

    def bind(self, dialect: Dialect, values: dict[str, Any]) -> tuple[str, list[Any]]:
        plain = self.plain
        if plain is not None and type(dialect).adapt in _PLAIN_ADAPT:
            return self.sql, plain(values)
        return self.sql, [dialect.adapt(p, values) for p in self.params]


def _plain_binder(params: tuple[Value, ...]) -> Callable[[dict[str, Any]], list[Any]]:
    """The parameter list from a call's values: one C-level ``itemgetter`` when every
    parameter is a slot (the common case), else a lookup per parameter."""
    names = [p.name for p in params if isinstance(p, Slot)]
    if len(names) == len(params) and len(names) > 1:
        get = itemgetter(*names)
        return lambda values: list(get(values))
    plan: tuple[tuple[bool, Any], ...] = tuple(
        (True, p.name) if isinstance(p, Slot) else (False, p.value) for p in params)
    return lambda values: [values[v] if slot else v for slot, v in plan]


# adapt() of these returns a constant's value and a non-JSON slot's value unchanged
_PLAIN_ADAPT = frozenset({Dialect.adapt, Postgres.adapt})


Set = tuple[str, str, tuple[Value, ...]]  # column, SQL expression, its parameters


@dataclass(frozen=True, slots=True)
class EventSpec:
    """Which event row a CAS writes; ``edges`` maps a from-state to the edge's name."""

    table: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class CasPlan:
    checks: tuple[Check, ...]
    main: Statement
    pre: Statement | None  # SQLite transaction path: the read before the write
    event: Statement | None  # SQLite transaction path: the event INSERT
    fast: bool  # one UPDATE returning the new row (+ event id): a miss is explained by a read
    columns: tuple[str, ...]  # the columns of the row written, as the statement returns them

    @property
    def ncols(self) -> int:
        return len(self.columns)

    def batch(self, dialect: Dialect, values: dict[str, Any],
              otherwise: Statement | None = None) -> Batch:
        """The plan's statements bound; ``otherwise``: the read explaining a miss, run in
        the same transaction when the update wrote nothing (SQLite's plan without ``pre``)."""
        if self.fast:
            return Batch((self.main.bind(dialect, values),))
        stmts = [s.bind(dialect, values) for s in (self.pre, self.event, self.main) if s]
        return Batch(tuple(stmts), transaction=len(stmts) > 1,
                     otherwise=None if otherwise is None else otherwise.bind(dialect, values))


class Compiler:
    """Renders the statements of one binding in one dialect."""

    def __init__(self, binding: Binding, dialect: Dialect) -> None:
        self.binding = binding
        self.dialect = dialect
        self.columns: tuple[str, ...] = tuple(sorted(binding.known))
        self.table = dialect.table(binding.table_parts)
        # the UPDATE's own alias: the one-statement CAS (writable CTEs) joins ``cur``, so
        # bare names would be ambiguous
        self.target = "t" if dialect.writable_ctes else None

    def incremented(self, column: str) -> Set:
        """``column = COALESCE(column, 0) + 1`` (versions, fencing tokens)."""
        return column, f"COALESCE({self.dialect.column(column, self.target)}, 0) + 1", ()

    # -- pieces ------------------------------------------------------------------------

    def cols(self, alias: str | None, names: Sequence[str] | None = None) -> str:
        return ", ".join(self.dialect.column(c, alias) for c in (names or self.columns))

    def key_where(self, alias: str | None, out: SqlOut) -> str:
        return " AND ".join(
            f"{self.dialect.column(k, alias)} = {self.dialect.value(Slot(f'k{i}'), out)}"
            for i, k in enumerate(self.binding.key)
        )

    def where(self, checks: Sequence[Check], alias: str | None, out: SqlOut) -> str:
        parts = [self.key_where(alias, out)]
        parts.extend(render(c.node, self.dialect, alias, out) for c in checks)
        return " AND ".join(parts)

    def set_now(self, column: str) -> Set:
        out = SqlOut()
        return column, self.dialect.now(out), tuple(out.params)

    def set_value(self, column: str, value: Value) -> Set:
        out = SqlOut()
        return column, self.dialect.value(value, out), tuple(out.params)

    def set_null(self, column: str) -> Set:
        return column, "NULL", ()

    def entry_sets(self, writes: dict[str, Any], alias: str | None) -> list[Set]:
        """Entry writes: plain columns, NOW, NULL, or paths inside a JSON column."""
        import json

        sets: list[Set] = []
        by_json: dict[str, list[tuple[tuple[str, ...], Any]]] = {}
        for target, value in writes.items():
            column, *rest = target.split(".")
            if rest:
                by_json.setdefault(column, []).append((tuple(rest), value))
            elif value is NOW:
                sets.append(self.set_now(column))
            elif value is None:
                sets.append(self.set_null(column))
            else:
                sets.append(self.set_value(column, Const(value)))
        for column, paths in by_json.items():
            out = SqlOut()
            puts = [(json_path, Const(json.dumps(value))) for json_path, value in paths]
            expr = self.dialect.json_set(self.dialect.column(column, alias), puts, out)
            sets.append((column, expr, tuple(out.params)))
        return sets

    # -- the compare-and-set -----------------------------------------------------------

    def cas(self, checks: Sequence[Check], sets: Sequence[Set], event: EventSpec | None,
            *, known_from: bool, returning: tuple[str, ...] | None = None) -> CasPlan:
        """``returning``: the columns the one-statement fast plans send back (the caller
        needs no more; every column by default). The other plans read the whole row."""
        d, b = self.dialect, self.binding
        if d.writable_ctes:
            if known_from:
                return self._cas_pg_known(tuple(checks), sets, event,
                                          returning or self.columns)
            return self._cas_pg(tuple(checks), sets, event)
        set_out = SqlOut()
        set_sql = self.set_clause(sets, set_out)
        where_out = SqlOut()
        where_sql = self.where(checks, None, where_out)
        if known_from and event is None:
            names = returning or self.columns
            main = Statement(
                f"UPDATE {self.table} SET {set_sql} WHERE {where_sql} "
                f"RETURNING {self.cols(None, names)}", (*set_out.params, *where_out.params))
            return CasPlan(tuple(checks), main, None, None, True, names)
        # from one known state, the state before is that one: no read before the write
        # (an event INSERT and the UPDATE, one transaction; a miss is explained by a read
        # after it, as the fast plan's is). From several, the read tells which it was.
        names = (returning or self.columns) if known_from else self.columns
        # with an event row (written just before, in the same transaction), the UPDATE
        # returns its id and the write's time too: an INSERT's own RETURNING costs SQLite
        # a third of the INSERT, and the id is the connection's last_insert_rowid()
        said_out = SqlOut()
        said = (f", last_insert_rowid(), {d.now(said_out)}" if event is not None else "")
        main = Statement(
            f"UPDATE {self.table} SET {set_sql} WHERE {where_sql} "
            f"RETURNING {self.cols(None, names)}{said}",
            (*set_out.params, *where_out.params, *said_out.params),
        )
        pre_out = SqlOut()
        pre = Statement(
            f"SELECT {self.cols(None)}, {d.now(pre_out)} FROM {self.table} "
            f"WHERE {self.key_where(None, pre_out)}",
            tuple(pre_out.params),
        )
        ev = None
        if event is not None:
            ev_out = SqlOut()
            version = f"{d.column(b.version, None)} + 1" if b.version else "NULL"
            head = self._event_values(event, None, ev_out, version)
            ev_where = self.where(checks, None, ev_out)
            ev = Statement(
                f"INSERT INTO {d.table(event.table)} ({EVENT_COLUMNS}) "
                f"SELECT {head} FROM {self.table} WHERE {ev_where}", tuple(ev_out.params),
            )
        if known_from:
            return CasPlan(tuple(checks), main, None, ev, False, names)
        return CasPlan(tuple(checks), main, pre, ev, False, self.columns)

    def set_clause(self, sets: Sequence[Set], out: SqlOut) -> str:
        parts = []
        for column, expr, params in sets:
            parts.append(f"{self.dialect.quote(column)} = {expr}")
            out.params.extend(params)
        return ", ".join(parts)

    def _event_values(self, event: EventSpec, alias: str | None, out: SqlOut,
                      version: str) -> str:
        """machine, row_key, edge, from_state, to_state, owner, data, version, created_at,
        actor, note for an event row, read from the row *before* the update (``alias``)."""
        d, b = self.dialect, self.binding
        # parameters are appended as the text is built, so build it in text order
        machine = d.value(Const(b.machine.name), out)
        row_key = d.value(Slot("row_key"), out)
        if len(event.edges) == 1:
            edge = d.value(Const(event.edges[0][1]), out)
        else:
            case = d.ref(b.state_ref, alias, out)
            whens = " ".join(
                f"WHEN {d.value(Const(src), out)} THEN {d.value(Const(name), out)}"
                for src, name in event.edges
            )
            edge = f"CASE {case} {whens} END"
        if alias is None or alias == "cur":
            state = d.ref(b.state_ref, alias, out)
        else:  # the row before is not read: the from-state is the one the plan moves from
            state = d.value(Const(event.edges[0][0]), out)
        to = d.value(Slot("to"), out)
        owner = d.value(Slot("ev_owner"), out)
        data = d.json_param(Slot("ev_data"), out)
        now = d.now(out)
        said = event_said(d, out)
        return (f"{machine}, {row_key}, {edge}, {state}, {to}, {owner}, {data}, {version}, "
                f"{now}, {said}")

    def _cas_pg(self, checks: tuple[Check, ...], sets: Sequence[Set],
                event: EventSpec | None) -> CasPlan:
        d = self.dialect
        out = SqlOut()
        cur = (
            f"cur AS (SELECT {self.cols('c')} FROM {self.table} AS c "
            f"WHERE {self.key_where('c', out)}{d.for_update})"
        )
        set_sql = self.set_clause(sets, out)
        where_sql = self.where(checks, "t", out)
        upd = (
            f"upd AS (UPDATE {self.table} AS t SET {set_sql} FROM cur WHERE {where_sql} "
            f"RETURNING {self.cols('t')})"
        )
        ctes = [cur, upd]
        event_col = self._event_cte(event, "cur", "upd CROSS JOIN cur", ctes, out)
        sql = (
            "WITH " + ", ".join(ctes) + f" SELECT {self.cols('cur')}, {self.cols('upd')}, "
            f"{event_col}, {self._now_if_refused()} FROM cur LEFT JOIN upd ON true"
        )
        return CasPlan(checks, Statement(sql, tuple(out.params)), None, None, False,
                       self.columns)

    def _event_cte(self, event: EventSpec | None, before: str, source: str, ctes: list[str],
                   out: SqlOut) -> str:
        """Append the event INSERT (from ``source``; the from-state read from ``before``)
        and return the expression of its id for the final SELECT."""
        if event is None:
            return "NULL::bigint"
        d = self.dialect
        version = d.column(self.binding.version, "upd") if self.binding.version else "NULL"
        values = self._event_values(event, before, out, version)
        ctes.append(
            f"ev AS (INSERT INTO {d.table(event.table)} ({EVENT_COLUMNS}) "
            f"SELECT {values} FROM {source} RETURNING id)"
        )
        return "(SELECT id FROM ev)"

    def _now_if_refused(self) -> str:
        """The clock reading that explains a refusal (stale or live lease); NULL when the
        write applied, so the applied path does not pay for decoding a timestamp."""
        key = self.dialect.column(self.binding.key[0], "upd")
        return f"CASE WHEN {key} IS NULL THEN now() END"

    def _cas_pg_known(self, checks: tuple[Check, ...], sets: Sequence[Set],
                      event: EventSpec | None, names: tuple[str, ...]) -> CasPlan:
        """The CAS when the from-state is known (one from-state, a claim): exactly the
        hand-written ``UPDATE ... RETURNING`` (with the event row, the hand-written CTE that
        writes both). A refusal returns no row and is explained by a follow-up read.

        An earlier shape also locked and read the row in the same statement, so a refusal
        cost no second round trip; it made every *applied* write ~25 us of server time and
        ~10 us of client time dearer (bench/, measured per backend process), and applied
        writes are the common case."""
        out = SqlOut()
        set_sql = self.set_clause(sets, out)
        where_sql = self.where(checks, "t", out)
        update = (f"UPDATE {self.table} AS t SET {set_sql} WHERE {where_sql} "
                  f"RETURNING {self.cols('t', names)}")
        if event is None:
            return CasPlan(checks, Statement(update, tuple(out.params)), None, None, True,
                           names)
        ctes = [f"upd AS ({update})"]
        event_col = self._event_cte(event, "upd", "upd", ctes, out)
        sql = ("WITH " + ", ".join(ctes) + f" SELECT {self.cols('upd', names)}, {event_col} "
               "FROM upd")
        return CasPlan(checks, Statement(sql, tuple(out.params)), None, None, True, names)

    def written_or_read(self, plan: CasPlan) -> Statement:
        """PostgreSQL: a fast plan's write, and the row as the statement saw it when the
        write was refused, in one statement: ``flag, every column`` (a column the write does
        not return is NULL on its branch). For moves refused more often than not
        (:mod:`rowstate.core.lane`): a refusal costs one round trip, not two."""
        written = ", ".join(self.dialect.column(c, "upd") if c in plan.columns else "NULL"
                            for c in self.columns)
        out = SqlOut()
        where = self.key_where(None, out)
        sql = (f"WITH upd AS ({plan.main.sql}) SELECT true, {written} FROM upd UNION ALL "
               f"SELECT false, {self.cols(None)} FROM {self.table} WHERE {where} "
               "AND NOT EXISTS (SELECT 1 FROM upd)")
        return Statement(sql, (*plan.main.params, *out.params))

    # -- simple statements -------------------------------------------------------------

    def read(self, *, clock: bool = True) -> Statement:
        """The row by its key, and (``clock``) the database's time to judge it by."""
        out = SqlOut()
        now = f", {self.dialect.now(out)}" if clock else ""
        where = self.key_where(None, out)
        return Statement(
            f"SELECT {self.cols(None)}{now} FROM {self.table} WHERE {where}",
            tuple(out.params),
        )

    def conditional_update(self, checks: Sequence[Check], sets: Sequence[Set]) -> Statement:
        """An UPDATE that reports only whether it applied (releases)."""
        out = SqlOut()
        set_sql = self.set_clause(sets, out)
        where = self.where(checks, None, out)
        key = self.dialect.quote(self.binding.key[0])
        return Statement(
            f"UPDATE {self.table} SET {set_sql} WHERE {where} RETURNING {key}",
            tuple(out.params),
        )

    def select_due(self, checks: Sequence[Check], due: Ref, limit: int) -> Statement:
        out = SqlOut()
        where = " AND ".join(render(c.node, self.dialect, None, out) for c in checks)
        keys = ", ".join(self.dialect.quote(k) for k in self.binding.key)
        return Statement(
            f"SELECT {keys} FROM {self.table} WHERE {where} "
            f"ORDER BY {self.dialect.quote(due.column)} LIMIT {int(limit)}",
            tuple(out.params),
        )

    def other_in_state(self, state: str, per: tuple[str, ...]) -> Statement:
        """Is another row already in ``state`` (within the same ``per`` group)?"""
        out = SqlOut()
        d = self.dialect
        # The state is the machine's own (never a caller's value), spelled as a literal
        # exactly as the partial UNIQUE index's predicate (schema.py): with a bound
        # parameter, PostgreSQL's generic plan (after 5 runs) and SQLite cannot prove the
        # index applies and scan the whole table (measured: 54 ms at 300k rows vs 0.4 ms).
        literal = "'" + state.replace("'", "''") + "'"
        cond = f"o.{d.quote(self.binding.state)} = {literal}"
        for col in per:
            cond += (
                f" AND o.{d.quote(col)} = (SELECT s.{d.quote(col)} FROM {self.table} AS s "
                f"WHERE {self.key_where('s', out)})"
            )
        keys = " OR ".join(
            f"o.{d.quote(k)} <> {d.value(Slot(f'k{i}'), out)}"
            for i, k in enumerate(self.binding.key)
        )
        return Statement(
            f"SELECT 1 FROM {self.table} AS o WHERE {cond} AND ({keys}) LIMIT 1",
            tuple(out.params),
        )

