"""Rows through the door, and queries by state: create, ensure, find, count.

A row is born through the door like every later move: ``create`` inserts it in the
machine's initial state (or another state the machine allows as a start) and writes the
``[*] -> state`` event (from-state NULL, edge NULL) in the same write, so the history of
every row starts with its birth. An existing key is a refusal (``RECORD_EXISTS``), never an
exception: two workers that both create the row race like any other move. The key alone
decides the conflict (``ON CONFLICT (key) DO NOTHING``): a UNIQUE invariant the new row
would break is still reported as ``INVARIANT``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..compiler import Statement, event_said
from ..conditions import Check, Const, Slot, SqlOut, render
from ..errors import InvariantViolation, ValidationError
from ..outbox import EVENT_COLUMNS, row_key
from ..protocol import Batch, Op
from ..results import Event, Reason, TransitionResult
from ..specs import GuardSpec
from ..values import check_payload_value
from .context import Context
from .inputs import Inputs
from .reads import Reads
from .rules import Rules

MAX_FIND = 10_000


class Rows:
    """``create``, ``ensure``, ``find`` and ``count``."""

    def __init__(self, context: Context, inputs: Inputs, rules: Rules, reads: Reads) -> None:
        self.context = context
        self.binding = context.binding
        self.machine = context.machine
        self.dialect = context.dialect
        self.compiler = context.compiler
        self.inputs = inputs
        self.rules = rules
        self.reads = reads

    def _creatable(self) -> frozenset[str]:
        """Columns a caller may give at birth: the binding's data columns, not the ones
        the engine owns (key, state, version, lease, claims, notice stamps)."""
        b = self.binding
        owned = {*b.key, b.state}
        if b.version:
            owned.add(b.version)
        if b.lease:
            owned |= {c for c in (b.lease.at, b.lease.kind, b.lease.token, b.lease.holder)
                      if c}
        if b.finalization:
            f = b.finalization
            owned |= {c for c in (f.holder, f.scope, f.at, f.token) if c}
        owned |= {n.claim for n in b.notices}
        return frozenset(b.known - owned)

    def _check_columns(self, columns: Mapping[str, Any]) -> dict[str, Any]:
        allowed = self._creatable()
        out: dict[str, Any] = {}
        for name, value in columns.items():
            if name not in allowed:
                raise ValidationError(
                    f"{self.binding.table}: {name!r} is not a column a row can be created with "
                    f"(allowed: {', '.join(sorted(allowed)) or 'none'})")
            check_payload_value(value, f"{self.binding.table}: column {name!r}")
            out[name] = value
        return out

    def _start_state(self, state: str | None) -> str:
        if state is None:
            return self.machine.initial
        state = self.machine.check_state(state)
        if state not in self.machine.starts:
            raise ValidationError(
                f"{self.machine.name}: rows start in {', '.join(sorted(self.machine.starts))}, "
                f"not {state!r} (Machine(starts=...) lists the others)")
        return state

    def create(self, key: object, *, state: str | None = None,
               columns: Mapping[str, Any] | None = None,
               data: Any = None, by: str | None = None,
               note: str | None = None) -> Op[TransitionResult]:
        """Insert the row in its start state; with an events table, its birth event
        (``[*] -> start``) in the same write, carrying ``data``, ``by`` and ``note`` as a
        transition's event does. A key that exists already: RECORD_EXISTS, nothing
        written."""
        kv, values = self.inputs.values(key)
        self.binding.check_new_key(key)
        by, note = self.inputs.by(by), self.inputs.note(note)
        start = self._start_state(state)
        checked = self._check_columns(columns or {})
        data_text = self.inputs.data(data) if data is not None else None
        names = tuple(checked)
        for name, value in checked.items():
            values[f"c:{name}"] = self.dialect.payload_value(value)
        values["start"] = start
        if self.context.event_table:
            values["row_key"] = row_key(kv)
            owner = checked.get(self.binding.owner) if self.binding.owner else None
            values["ev_owner"] = None if owner is None else str(owner)
            values["ev_data"] = data_text
            values["ev_by"], values["ev_note"] = by, note
        shape = ("create", names)
        stmts = self.context.plans.get(shape)
        if stmts is None:
            stmts = self._compile_create(names)
            self.context.plans[shape] = stmts
        try:
            rows = yield Batch(tuple(s.bind(self.dialect, values) for s in stmts),
                               transaction=len(stmts) > 1)
        except InvariantViolation:
            return TransitionResult(False, Reason.INVARIANT, (Reason.INVARIANT,), None, None)
        n = len(self.context.columns)
        if not rows[0]:
            current = yield from self.reads.get(key)
            now_in = self.context.state_of(current) if current is not None else None
            return TransitionResult(False, Reason.RECORD_EXISTS, (Reason.RECORD_EXISTS,),
                                    now_in, now_in, current)
        first = rows[0][0]
        row = dict(zip(self.context.columns, first[:n], strict=True))
        if self.dialect.writable_ctes and self.context.event_table:  # (the event's id)
            event_id, at = first[n], first[n + 1]
        else:
            event_id = rows[1][0][0] if len(rows) > 1 and rows[1] else None
            at = first[n]
        version = row.get(self.binding.version) if self.binding.version else None
        event = Event(self.machine.name, kv, None, None, start, values.get("ev_owner"),
                      data if self.context.event_table else None, version,
                      self.context.now(at), event_id, None, by, note)
        return TransitionResult(True, None, (), None, start, self.context.public(row), event)

    def _compile_create(self, names: tuple[str, ...]) -> tuple[Statement, ...]:
        d, c, b = self.dialect, self.compiler, self.binding
        out = SqlOut()
        cols = [*b.key, b.state, *names]
        vals = [*(d.value(Slot(f"k{i}"), out) for i in range(len(b.key))),
                d.value(Slot("start"), out),
                *(d.value(Slot(f"c:{n}"), out) for n in names)]
        conflict = ", ".join(d.quote(k) for k in b.key)
        insert = (f"INSERT INTO {c.table} ({', '.join(d.quote(x) for x in cols)}) "
                  f"VALUES ({', '.join(vals)}) ON CONFLICT ({conflict}) DO NOTHING")
        if not self.context.event_table:
            now = d.now(out)
            return (Statement(f"{insert} RETURNING {c.cols(None)}, {now}", tuple(out.params)),)
        events = d.table(self.context.event_table)
        version = d.column(b.version, "src") if b.version else "NULL"
        if d.writable_ctes:
            ins = f"ins AS ({insert} RETURNING {c.cols(None)})"
            head = self._birth_values(out, version)
            now = d.now(out)
            sql = (f"WITH {ins}, ev AS (INSERT INTO {events} ({EVENT_COLUMNS}) "
                   f"SELECT {head} FROM ins AS src RETURNING id) "
                   f"SELECT {c.cols('ins')}, (SELECT id FROM ev), {now} FROM ins")
            return (Statement(sql, tuple(out.params)),)
        now = d.now(out)
        first = Statement(f"{insert} RETURNING {c.cols(None)}, {now}", tuple(out.params))
        ev_out = SqlOut()
        head = self._birth_values(ev_out, version)
        # changes(): the rows the INSERT just before it wrote (0 when the key existed)
        second = Statement(
            f"INSERT INTO {events} ({EVENT_COLUMNS}) SELECT {head} FROM {c.table} AS src "
            f"WHERE {c.key_where('src', ev_out)} AND changes() = 1 RETURNING id",
            tuple(ev_out.params))
        return first, second

    def _birth_values(self, out: SqlOut, version: str) -> str:
        d = self.dialect
        machine = d.value(Const(self.machine.name), out)
        row_key = d.value(Slot("row_key"), out)
        to = d.value(Slot("start"), out)
        owner = d.value(Slot("ev_owner"), out)
        data = d.json_param(Slot("ev_data"), out)
        now = d.now(out)
        said = event_said(d, out)
        return (f"{machine}, {row_key}, NULL, NULL, {to}, {owner}, {data}, {version}, {now}, "
                f"{said}")

    def ensure(self, key: object, *, state: str | None = None,
               columns: Mapping[str, Any] | None = None,
               data: Any = None, by: str | None = None,
               note: str | None = None) -> Op[dict[str, Any]]:
        """The row, created (as :meth:`create`, ``data``, ``by``, ``note`` on its birth
        event) if it did not
        exist: the seed's ``ensureRow``. Idempotent; a racing creator's row is returned as
        found."""
        got = yield from self.create(key, state=state, columns=columns, data=data, by=by,
                                    note=note)
        if got.row is not None:
            return dict(got.row)
        if got.reason == Reason.INVARIANT:
            raise InvariantViolation(f"{self.binding.table}: creating {key!r} in "
                                     f"{state or self.machine.initial} breaks an invariant",
                                     index=None)
        row = yield from self.reads.get(key)  # pragma: no cover - created and deleted meanwhile
        if row is None:
            raise ValidationError(f"{self.binding.table}: row {key!r} vanished while ensured")
        return row


    # -- queries by state ----------------------------------------------------------------

    def _query_where(self, state: str | Sequence[str] | None, where: GuardSpec | None,
                     values: dict[str, Any], out: SqlOut) -> str:
        checks: list[Check] = []
        if state is not None:
            states = (state,) if isinstance(state, str) else tuple(state)
            if not states:
                raise ValidationError("find/count: state= lists no state")
            states = tuple(self.machine.check_state(s) for s in states)  # aliases read
            checks.append(self.rules.state(states))
        if where:
            checks.extend(self.rules.guards(where, "w", values)[1])
        if not checks:
            return "1 = 1"
        return " AND ".join(render(ch.node, self.dialect, None, out) for ch in checks)

    def find(self, *, state: str | Sequence[str] | None = None,
             where: GuardSpec | None = None, order_by: str | Sequence[str] | None = None,
             limit: int = 100) -> Op[list[dict[str, Any]]]:
        """Rows in ``state`` (one or several) whose fields match ``where`` (checked and
        null-aware like guards), ordered by known columns (``-col`` descending; the key
        breaks ties, so pages are stable), at most ``limit`` (<= 10,000)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_FIND:
            raise ValidationError(f"find: limit is an int in 1..{MAX_FIND}, got {limit!r}")
        values = self.context.clock_values()
        out = SqlOut()
        cond = self._query_where(state, where, values, out)
        order = []
        for spec in ((order_by,) if isinstance(order_by, str) else tuple(order_by or ())):
            desc = isinstance(spec, str) and spec.startswith("-")
            name = spec[1:] if desc else spec
            ref = self.binding.ref(name)
            if ref.path or name not in self.context.columns:
                raise ValidationError(f"find: order_by names a column, got {spec!r}")
            order.append(self.dialect.quote(name) + (" DESC" if desc else ""))
        order += [self.dialect.quote(k) for k in self.binding.key]
        stmt = Statement(f"SELECT {self.compiler.cols(None)} FROM {self.compiler.table} "
                         f"WHERE {cond} ORDER BY {', '.join(order)} LIMIT {limit}",
                         tuple(out.params))
        rows = yield Batch((stmt.bind(self.dialect, values),))
        public, columns = self.context.public, self.context.columns
        return [public(dict(zip(columns, r, strict=True))) for r in rows[0]]

    def match_keys(self, state: Sequence[str], where: GuardSpec, after: Any,
                   limit: int) -> Op[list[Any]]:
        """One page of the (one-column) keys of rows in ``state`` matching ``where``, in key
        order, after the key ``after`` (None: from the first): a keyset page, so a set-based
        move that pages through them sees every row once, even one it moves back into a
        matching state."""
        values = self.context.clock_values()
        out = SqlOut()
        cond = self._query_where(state, where, values, out)
        key = self.dialect.quote(self.binding.key[0])
        if after is not None:
            values["after"] = after
            cond += f" AND {key} > {self.dialect.value(Slot('after'), out)}"
        stmt = Statement(f"SELECT {key} FROM {self.compiler.table} WHERE {cond} "
                         f"ORDER BY {key} LIMIT {int(limit)}", tuple(out.params))
        rows = yield Batch((stmt.bind(self.dialect, values),))
        return [r[0] for r in rows[0]]

    def count(self, *, state: str | Sequence[str] | None = None,
              where: GuardSpec | None = None) -> Op[int]:
        values: dict[str, Any] = {}
        out = SqlOut()
        cond = self._query_where(state, where, values, out)
        stmt = Statement(f"SELECT COUNT(*) FROM {self.compiler.table} WHERE {cond}",
                         tuple(out.params))
        rows = yield Batch((stmt.bind(self.dialect, values),))
        return int(rows[0][0][0])
