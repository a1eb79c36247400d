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
from typing import TYPE_CHECKING, Any

from .base import Op
from .binding import GuardSpec, check_payload_value
from .compiler import Batch, Statement
from .conditions import Check, Const, In, Slot, SqlOut, render
from .errors import InvariantViolation, ValidationError
from .outbox import EVENT_COLUMNS, row_key
from .results import Event, Reason, TransitionResult

if TYPE_CHECKING:
    from .core import Core

MAX_FIND = 10_000


# create, ensure, find and count.
# Functions of a Core, bound as its methods in rowstate.core (no mixins).


def _creatable(self: Core) -> frozenset[str]:
    """Columns a caller may give at birth: the binding's data columns, not the ones
    the engine owns (key, state, version, lease, claims, notice stamps)."""
    b = self.b
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


def _check_columns(self: Core, columns: Mapping[str, Any]) -> dict[str, Any]:
    allowed = self._creatable()
    out: dict[str, Any] = {}
    for name, value in columns.items():
        if name not in allowed:
            raise ValidationError(
                f"{self.b.table}: {name!r} is not a column a row can be created with "
                f"(allowed: {', '.join(sorted(allowed)) or 'none'})")
        check_payload_value(value, f"{self.b.table}: column {name!r}")
        out[name] = value
    return out


def _start_state(self: Core, state: str | None) -> str:
    if state is None:
        return self.m.initial
    self.m.check_state(state)
    if state not in self.m.starts:
        raise ValidationError(
            f"{self.m.name}: rows start in {', '.join(sorted(self.m.starts))}, "
            f"not {state!r} (Machine(starts=...) lists the others)")
    return state


def create(self: Core, key: object, *, state: str | None = None,
           columns: Mapping[str, Any] | None = None) -> Op[TransitionResult]:
    kv, values = self.values(key)
    start = self._start_state(state)
    checked = self._check_columns(columns or {})
    names = tuple(checked)
    for name, value in checked.items():
        values[f"c:{name}"] = self.d.payload_value(value)
    values["start"] = start
    if self._event_table:
        values["row_key"] = row_key(kv)
        owner = checked.get(self.b.owner) if self.b.owner else None
        values["ev_owner"] = None if owner is None else str(owner)
    shape = ("create", names)
    stmts = self._plans.get(shape)
    if stmts is None:
        stmts = self._compile_create(names)
        self._plans[shape] = stmts
    try:
        rows = yield Batch(tuple(s.bind(self.d, values) for s in stmts),
                           transaction=len(stmts) > 1)
    except InvariantViolation:
        return TransitionResult(False, Reason.INVARIANT, (Reason.INVARIANT,), None, None)
    n = len(self.columns)
    if not rows[0]:
        current = yield from self.get(key)
        now_in = self.state_of(current) if current is not None else None
        return TransitionResult(False, Reason.RECORD_EXISTS, (Reason.RECORD_EXISTS,),
                                now_in, now_in, current)
    first = rows[0][0]
    row = dict(zip(self.columns, first[:n], strict=True))
    if self.d.writable_ctes:
        event_id, at = first[n], first[n + 1]
    else:
        event_id = rows[1][0][0] if len(rows) > 1 and rows[1] else None
        at = first[n]
    version = row.get(self.b.version) if self.b.version else None
    event = Event(self.m.name, kv, None, None, start, values.get("ev_owner"), None,
                  version, self._now(at), event_id)
    return TransitionResult(True, None, (), None, start, row, event)


def _compile_create(self: Core, names: tuple[str, ...]) -> tuple[Statement, ...]:
    d, c, b = self.d, self.c, self.b
    out = SqlOut()
    cols = [*b.key, b.state, *names]
    vals = [*(d.value(Slot(f"k{i}"), out) for i in range(len(b.key))),
            d.value(Slot("start"), out),
            *(d.value(Slot(f"c:{n}"), out) for n in names)]
    conflict = ", ".join(d.quote(k) for k in b.key)
    insert = (f"INSERT INTO {c.table} ({', '.join(d.quote(x) for x in cols)}) "
              f"VALUES ({', '.join(vals)}) ON CONFLICT ({conflict}) DO NOTHING")
    if not self._event_table:
        now = d.now(out)
        return (Statement(f"{insert} RETURNING {c.cols(None)}, {now}", tuple(out.params)),)
    events = d.table(self._event_table)
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


def _birth_values(self: Core, out: SqlOut, version: str) -> str:
    d = self.d
    machine = d.value(Const(self.m.name), out)
    row_key = d.value(Slot("row_key"), out)
    to = d.value(Slot("start"), out)
    owner = d.value(Slot("ev_owner"), out)
    now = d.now(out)
    return f"{machine}, {row_key}, NULL, NULL, {to}, {owner}, NULL, {version}, {now}"


def ensure(self: Core, key: object, *, state: str | None = None,
           columns: Mapping[str, Any] | None = None) -> Op[dict[str, Any]]:
    """The row, created (as :meth:`create`) if it did not exist: the seed's
    ``ensureRow``. Idempotent; a racing creator's row is returned as found."""
    got = yield from self.create(key, state=state, columns=columns)
    if got.row is not None:
        return dict(got.row)
    if got.reason == Reason.INVARIANT:
        raise InvariantViolation(f"{self.b.table}: creating {key!r} in "
                                 f"{state or self.m.initial} breaks an invariant",
                                 index=None)
    row = yield from self.get(key)  # pragma: no cover - created and deleted meanwhile
    if row is None:
        raise ValidationError(f"{self.b.table}: row {key!r} vanished while ensured")
    return row


# -- queries by state ----------------------------------------------------------------


def _query_where(self: Core, state: str | Sequence[str] | None, where: GuardSpec | None,
                 values: dict[str, Any], out: SqlOut) -> str:
    checks: list[Check] = []
    if state is not None:
        states = (state,) if isinstance(state, str) else tuple(state)
        if not states:
            raise ValidationError("find/count: state= lists no state")
        for s in states:
            self.m.check_state(s)
        checks.append(Check(In(self.b.state_ref, tuple(Const(s) for s in states)),
                            Reason.STATE_MISMATCH, Reason.STATE_MISMATCH))
    if where:
        checks.extend(self._guard_checks(where, "w", values)[1])
    if not checks:
        return "1 = 1"
    return " AND ".join(render(ch.node, self.d, None, out) for ch in checks)


def find(self: Core, *, state: str | Sequence[str] | None = None,
         where: GuardSpec | None = None, order_by: str | Sequence[str] | None = None,
         limit: int = 100) -> Op[list[dict[str, Any]]]:
    """Rows in ``state`` (one or several) whose fields match ``where`` (checked and
    null-aware like guards), ordered by known columns (``-col`` descending; the key
    breaks ties, so pages are stable), at most ``limit`` (<= 10,000)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_FIND:
        raise ValidationError(f"find: limit is an int in 1..{MAX_FIND}, got {limit!r}")
    values = self._clock_values()
    out = SqlOut()
    cond = self._query_where(state, where, values, out)
    order = []
    for spec in ((order_by,) if isinstance(order_by, str) else tuple(order_by or ())):
        desc = isinstance(spec, str) and spec.startswith("-")
        name = spec[1:] if desc else spec
        ref = self.b.ref(name)
        if ref.path or name not in self.columns:
            raise ValidationError(f"find: order_by names a column, got {spec!r}")
        order.append(self.d.quote(name) + (" DESC" if desc else ""))
    order += [self.d.quote(k) for k in self.b.key]
    stmt = Statement(f"SELECT {self.c.cols(None)} FROM {self.c.table} WHERE {cond} "
                     f"ORDER BY {', '.join(order)} LIMIT {limit}", tuple(out.params))
    rows = yield Batch((stmt.bind(self.d, values),))
    return [dict(zip(self.columns, r, strict=True)) for r in rows[0]]


def count(self: Core, *, state: str | Sequence[str] | None = None,
          where: GuardSpec | None = None) -> Op[int]:
    values: dict[str, Any] = {}
    out = SqlOut()
    cond = self._query_where(state, where, values, out)
    stmt = Statement(f"SELECT COUNT(*) FROM {self.c.table} WHERE {cond}",
                     tuple(out.params))
    rows = yield Batch((stmt.bind(self.d, values),))
    return int(rows[0][0][0])

