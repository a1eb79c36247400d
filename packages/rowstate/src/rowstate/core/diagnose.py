"""The diagnosis: one row seen whole (``inspect``), and the rows that are stuck (``stuck``).

Read-only operations, driven like every other (``lc.do(lc.core.stuck())``; the ``rowstate
inspect`` and ``rowstate stuck`` commands run them in a read-only unit). They decide
nothing of their own: a lease is expired, a timer due, a claim stale or an event
unrelayed by the very checks the writes and ``fire_due`` are conditioned on
(:mod:`rowstate.core.rules`; a timer's through :meth:`Timers.due_checks`, fire_due's own
query), evaluated in Python for one row and rendered to SQL for many. Ages are measured
against the database's clock, read in the same round trip.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..compiler import Statement
from ..conditions import Check, SqlOut, failing, render
from ..diagnosis import (
    ClaimView,
    LeaseView,
    NoticeView,
    RowReport,
    StuckGroup,
    StuckReport,
    StuckRow,
    TimerView,
)
from ..errors import ValidationError
from ..protocol import Batch, Op
from .context import Context
from .dryrun import DryRun
from .inputs import Inputs
from .reads import Reads
from .rules import Ask, Rules
from .timers import Timers

#: the most rows one group lists, and the most events one inspection returns
MAX_LISTED = 10_000


class Diagnose:
    """``inspect`` and ``stuck``: what a person (or a health check) asks of a row that
    does not move."""

    def __init__(self, context: Context, inputs: Inputs, rules: Rules, dryrun: DryRun,
                 reads: Reads, timers: Timers) -> None:
        self.context = context
        self.binding = context.binding
        self.dialect = context.dialect
        self.inputs = inputs
        self.rules = rules
        self.dryrun = dryrun
        self.reads = reads
        self.timers = timers

    # -- one row -------------------------------------------------------------------------

    def inspect(self, key: object, *, events: int = 10) -> Op[RowReport | None]:
        """The row by ``key`` (None: no such row), its lease and finalization claim, every
        edge with why it is blocked now (:meth:`DryRun.enabled_edges`), its timers and
        notices, and its last ``events`` events (oldest first)."""
        _count(events, "inspect: events", 0)
        kv, values = self.inputs.values(key)
        context = self.context
        rows = yield Batch((context.read.bind(self.dialect, values),))
        if not rows[0]:
            return None
        raw = rows[0][0]
        row = context.row(raw)
        raw_now = raw[len(context.columns)]
        now = context.now(raw_now)
        edges = yield from self.dryrun.enabled_edges(kv)
        history = (yield from self.reads.history(kv)) if context.event_table else []
        tail = history[-events:] if events else []  # all of them when there are fewer
        return RowReport(
            context.machine.name, self.binding.table, kv, context.state_of(row), now,
            self._readable(row),
            self._lease(row, values, raw_now, now), self._claim(row, values, raw_now, now),
            edges, self._timers(row, values, raw_now), self._notices(row, values, raw_now),
            tuple(tail), len(history), context.event_table is not None)

    def _readable(self, row: dict[str, Any]) -> dict[str, Any]:
        """The row with its times as aware datetimes and its JSON columns decoded: alike on
        both databases (SQLite keeps both as text)."""
        out = dict(row)
        for column in self.context.time_columns:
            if out.get(column) is not None:
                with contextlib.suppress(ValueError, TypeError):
                    out[column] = self.dialect.parse_time(out[column])
        for column in self.binding.json_columns:
            if out.get(column) is not None:
                with contextlib.suppress(ValueError, TypeError):
                    out[column] = self.dialect.load_json(out[column])
        return out

    def _holds(self, checks: Sequence[Check], row: dict[str, Any], values: dict[str, Any],
               raw_now: Any) -> tuple[str, ...]:
        """The reasons of the ``checks`` the row fails now (none: they all hold)."""
        view = self.context.view(row, values, raw_now)
        return tuple(dict.fromkeys(str(c.reason) for c in failing(checks, view)))

    def _lease(self, row: dict[str, Any], base: dict[str, Any], raw_now: Any,
               now: datetime) -> LeaseView | None:
        lease = self.binding.lease
        if lease is None:
            return None
        values = dict(base)
        checks = self.rules.checks("lease_expired", Ask(), values)
        at = self.dialect.parse_time(row.get(lease.at))
        return LeaseView(
            at is not None, row.get(lease.kind), row.get(lease.holder) if lease.holder else None,
            row.get(lease.token) if lease.token else None, at, _age(now, at), float(lease.ttl),
            not self._holds(checks, row, values, raw_now),
            row.get(lease.error) if lease.error else None,
            self.dialect.parse_time(row.get(lease.failed_at)) if lease.failed_at else None)

    def _claim(self, row: dict[str, Any], base: dict[str, Any], raw_now: Any,
               now: datetime) -> ClaimView | None:
        f = self.binding.finalization
        if f is None:
            return None
        values = dict(base)
        checks = self.rules.checks("finalization_expired", Ask(), values)
        at = self.dialect.parse_time(row.get(f.at))
        return ClaimView(row.get(f.holder) is not None, row.get(f.holder), row.get(f.scope),
                         row.get(f.token) if f.token else None, at, _age(now, at),
                         float(f.ttl), not self._holds(checks, row, values, raw_now))

    def _timers(self, row: dict[str, Any], base: dict[str, Any],
                raw_now: Any) -> tuple[TimerView, ...]:
        out = []
        for t in self.binding.timers:
            edge = self.context.machine.edge(t.edge)
            values = dict(base)
            blocked = self._holds(self.timers.due_checks(t, t.due, values), row, values,
                                  raw_now)
            # overdue: the two checks that make a timer's deadline pass for this row
            late = (self.rules.state((edge.src,)), self.rules.due(t.due))
            out.append(TimerView(t.edge, t.due, self.dialect.parse_time(row.get(t.due)),
                                 not self._holds(late, row, values, raw_now), not blocked,
                                 blocked))
        return tuple(out)

    def _notices(self, row: dict[str, Any], base: dict[str, Any],
                 raw_now: Any) -> tuple[NoticeView, ...]:
        out = []
        for n in self.binding.notices:
            values = dict(base)
            blocked = self._holds(self.timers.notice_checks(n, n.due, values), row, values,
                                  raw_now)
            out.append(NoticeView(n.name, n.due, self.dialect.parse_time(row.get(n.due)),
                                  self.dialect.parse_time(row.get(n.claim)), not blocked,
                                  blocked))
        return tuple(out)

    # -- the stuck rows ------------------------------------------------------------------

    def stuck(self, *, older: float = 60.0, limit: int = 50,
              undelivered: bool | None = None) -> Op[StuckReport]:
        """Every row of the binding with an expired lease, an overdue timer (one
        ``fire_due`` would fire now: no ticker moved it) and a finalization claim past its
        TTL, and, when ``undelivered`` (by default: when the binding is ``relayed``), the
        events older than ``older`` seconds no relay delivered: each group's count and its
        first ``limit`` rows, oldest first. One round trip.

        An events table is also the row's history: where no relay reads it, every event
        stays undelivered for good and none of them is stuck, so they are counted only
        when a relay is said to deliver them (``Binding(relayed=True)``) or the caller
        asks (``undelivered=True``; the binding must have an events table)."""
        if isinstance(older, bool) or not isinstance(older, int | float) or not (
                0 <= older < 10**9):
            raise ValidationError(f"stuck: older is a number of seconds >= 0, got {older!r}")
        _count(limit, "stuck: limit", 1)
        if undelivered is None:
            undelivered = self.binding.relayed
        elif not isinstance(undelivered, bool):
            raise ValidationError(f"stuck: undelivered is True, False or None, got "
                                  f"{undelivered!r}")
        if undelivered and self.context.event_table is None:
            raise ValidationError(f"stuck: {self.binding.table} has no events table "
                                  "(events=None): no event of it can be undelivered")
        b, d = self.binding, self.dialect
        base = self.context.clock_values()
        out = SqlOut()
        statements: list[tuple[str, Any]] = [Statement(f"SELECT {d.now(out)}", tuple(
            out.params)).bind(d, base)]
        # per listing: (its group, how many key columns lead its rows, the columns after
        # them: the time the row is stuck since first)
        parts: list[tuple[str, int, tuple[str, ...]]] = []
        table, keys = self.context.compiler.table, tuple(b.key)
        # the table and its key and state columns are there (no row read): a report of
        # nothing stuck never comes from a database that lacks the binding's table
        probe = ", ".join(d.quote(c) for c in (*keys, b.state))
        statements.append(Statement(f"SELECT {probe} FROM {table} LIMIT 0", ()).bind(d, base))
        if b.lease is not None:
            lease, values = b.lease, dict(base)
            checks = self.rules.checks("lease_expired", Ask(), values)
            extra = tuple(c for c in (lease.at, lease.kind, lease.holder, lease.token) if c)
            statements += self._listing(table, checks, values, keys + extra, lease.at, limit)
            parts.append(("expired_leases", len(keys), extra))
        for t in b.timers:
            values = dict(base)
            checks = self.timers.due_checks(t, t.due, values)
            statements += self._listing(table, checks, values, (*keys, t.due), t.due, limit)
            parts.append((f"overdue_timers:{t.edge}", len(keys), (t.due,)))
        if b.finalization is not None:
            f, values = b.finalization, dict(base)
            checks = self.rules.checks("finalization_expired", Ask(), values)
            extra = (f.at, f.holder, f.scope)
            statements += self._listing(table, checks, values, keys + extra, f.at, limit)
            parts.append(("expired_claims", len(keys), extra))
        if undelivered and self.context.event_table is not None:
            values = dict(base, machine=self.context.machine.name, older=float(older))
            checks = [self.rules.event_unrelayed()]
            events = d.table(self.context.event_table)
            cols = ("row_key", "created_at", "id", "edge", "to_state")
            statements += self._listing(events, checks, values, cols, "id", limit)
            parts.append(("unrelayed_events", 0, cols[1:]))
        rows = yield Batch(tuple(statements))
        now = self.context.now(rows[0][0][0])
        groups: dict[str, tuple[int, list[StuckRow]]] = {}
        for i, (name, nkeys, extra) in enumerate(parts):
            listed, counted = rows[2 + 2 * i], rows[3 + 2 * i]
            group = name.split(":")[0]
            found = [self._stuck_row(r, nkeys, extra, now, name) for r in listed]
            count, before = groups.get(group, (0, []))
            groups[group] = (count + int(counted[0][0]), before + found)
        out_groups = []
        for name in ("expired_leases", "overdue_timers", "expired_claims", "unrelayed_events"):
            if name in groups:
                count, found = groups[name]
                found.sort(key=lambda r: (r.at is None, r.at or now))
                out_groups.append(StuckGroup(name, count, tuple(found[:limit])))
        return StuckReport(self.context.machine.name, b.table, now, float(older), limit,
                           tuple(out_groups), undelivered)

    def _listing(self, table: str, checks: Sequence[Check], values: dict[str, Any],
                 columns: tuple[str, ...], order: str, limit: int,
                 ) -> list[tuple[str, Any]]:
        """The first ``limit`` rows the checks pick (``columns``, ordered by ``order``),
        and how many they pick: two statements with one WHERE."""
        d, out = self.dialect, SqlOut()
        where = " AND ".join(render(c.node, d, None, out) for c in checks)
        cols = ", ".join(d.quote(c) for c in columns)
        listing = Statement(f"SELECT {cols} FROM {table} WHERE {where} "
                            f"ORDER BY {d.quote(order)} LIMIT {int(limit)}", tuple(out.params))
        counting = Statement(f"SELECT COUNT(*) FROM {table} WHERE {where}", tuple(out.params))
        return [listing.bind(d, values), counting.bind(d, values)]

    def _stuck_row(self, raw: Sequence[Any], nkeys: int, extra: tuple[str, ...],
                   now: datetime, name: str) -> StuckRow:
        if nkeys:
            key = tuple(raw[:nkeys])
        else:  # an event: its row's key is the event row's JSON text
            key = tuple(json.loads(raw[0]))
            nkeys = 1
        detail = dict(zip(extra, raw[nkeys:], strict=True))
        at = self.dialect.parse_time(detail.pop(extra[0]))
        if name.startswith("overdue_timers:"):
            detail = {"edge": name.split(":", 1)[1], "column": extra[0]}
        elif name == "expired_leases":
            assert self.binding.lease is not None
            lease = self.binding.lease
            detail = {"kind": detail.get(lease.kind), "holder": detail.get(lease.holder or ""),
                      "token": detail.get(lease.token or ""), "ttl": float(lease.ttl)}
        elif name == "expired_claims":
            f = self.binding.finalization
            assert f is not None
            detail = {"holder": detail.get(f.holder), "scope": detail.get(f.scope),
                      "ttl": float(f.ttl)}
        return StuckRow(key, at, _age(now, at), detail)


def _age(now: datetime, at: datetime | None) -> float | None:
    return None if at is None else round((now - at).total_seconds(), 3)


def _count(n: object, what: str, least: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not least <= n <= MAX_LISTED:
        raise ValidationError(f"{what} is an int in {least}..{MAX_LISTED}, got {n!r}")

