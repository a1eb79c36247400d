"""Durable timers and once-per-row notices: due rows found through an index, each moved
through the normal door exactly once however many tickers run.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from datetime import datetime
from typing import Any

from ..conditions import Check, Ref
from ..errors import ValidationError
from ..machine import Edge
from ..protocol import ActiveLease, Batch, Call, Op
from ..results import Fired, FireReport
from ..specs import Notice, TimedEdge
from ..values import check_payload_value
from .bulk import Bulk
from .cas import Cas
from .context import Context
from .inputs import Inputs
from .leases import Leases
from .moves import Moves
from .rules import Ask, Rules

# who moved the rows and why (checked): every event a tick writes says it
Said = tuple[str | None, str | None]


class Timers:
    """``fire_due``: timed edges and once-per-row notices."""

    def __init__(self, context: Context, inputs: Inputs, rules: Rules, cas: Cas,
                 moves: Moves, leases: Leases, bulk: Bulk) -> None:
        self.context = context
        self.binding = context.binding
        self.machine = context.machine
        self.dialect = context.dialect
        self.compiler = context.compiler
        self.inputs = inputs
        self.rules = rules
        self.cas = cas
        self.moves = moves
        self.leases = leases
        self.bulk = bulk

    def fire_due(self, *, acts: Mapping[str, Callable[[ActiveLease], Any]] | None = None,
                 notify: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
                 limit: int = 100, holder: str | None = None,
                 now: datetime | None = None, data: Any = None, by: str | None = None,
                 note: str | None = None) -> Op[FireReport]:
        """Move every due row through the normal door; one failing row does not stop the
        others. Several tickers may run at once: the CAS lets exactly one move each row.

        ``now`` is the business instant the due columns are judged by (a tick "as of" a
        time); leases and claims still age by the database clock. A side-effecting timer
        or a notice needs its callback only when a row is due for it: a missing one is
        reported for that row (``Fired.error``), and the row is left as it was. The due
        query skips rows no write could move now (a live lease; an act that failed within
        the timer's back-off), so failing rows cannot take the places of healthy ones.

        ``data``, ``by`` and ``note``: the event data, who and why of every move this call
        makes (a tick), checked like a transition's before any I/O.
        """
        _check_fire_args(acts, notify, limit)
        if holder is not None:
            self.inputs.holder(holder)
        acts, notify = dict(acts or {}), dict(notify or {})
        data_text = self.inputs.data(data) if data is not None else None
        said = (self.inputs.by(by), self.inputs.note(note))
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValidationError(f"fire_due: limit is a positive int, got {limit!r}")
        values = self.context.clock_values()
        if now is not None:
            if not isinstance(now, datetime) or now.tzinfo is None:
                raise ValidationError(f"fire_due: now is an aware datetime, got {now!r}")
            # an instant outside years 1-9999 in UTC: SQLite's canonical text cannot hold
            # it (OverflowError) where PostgreSQL would judge by it; refused alike
            check_payload_value(now, "fire_due: now")
            values["due_at"] = self.dialect.db_time(now)
        fired: list[Fired] = []
        for t in self.binding.timers:
            edge = self.machine.edge(t.edge)
            due = t.due if now is None else "@" + t.due
            vals = dict(values)
            checks = self.due_checks(t, due, vals)
            stmt = self.compiler.select_due(checks, Ref(t.due), limit)
            rows = yield Batch((stmt.bind(self.dialect, vals),))
            keys = [tuple(row) for row in rows[0]]
            if not keys:
                continue
            if not edge.lease and len(self.binding.key) == 1:
                fired.extend((yield from self._fire_many(keys, edge, t, due,
                                                         values.get("due_at"),
                                                         data_text, data, said)))
                continue
            for key in keys:
                fired.append((yield from self._fire_edge(key, edge, t, acts, holder, due,
                                                         values.get("due_at"), data, said)))
        for n in self.binding.notices:
            fired.extend((yield from self._fire_notice(n, notify.get(n.name), limit, values,
                                                       now is not None)))
        return FireReport(tuple(fired))

    def due_checks(self, timer: TimedEdge, due: str, values: dict[str, Any]) -> list[Check]:
        """What makes a row due for ``timer`` (fire_due's query): in the edge's from-state,
        past the ``due`` column, its guards holding, and a write could move it now. The
        stuck report and the inspector read the same checks."""
        edge = self.machine.edge(timer.edge)
        ask = Ask(froms=(edge.src,), kind=edge.lease, due=due, timer=timer,
                  guards=tuple(self.rules.guards(timer.guards, "tg", values)[1]))
        return self.rules.checks("leased_timer_due" if edge.lease else "timer_due", ask,
                                 values)

    def notice_checks(self, notice: Notice, due: str, values: dict[str, Any]) -> list[Check]:
        """What makes a row owed ``notice`` (its due query): in one of its states, past
        ``due``, not sent yet, its guards holding."""
        ask = Ask(due=due, notice=notice,
                  guards=tuple(self.rules.guards(notice.guards, "ng", values)[1]))
        return self.rules.checks("notice", ask, values)

    def _fire_many(self, keys: list[tuple[Any, ...]], edge: Edge, timer: TimedEdge,
                   due: str, due_at: Any, data_text: str | None = None,
                   data: Any = None, said: Said = (None, None)) -> Op[list[Fired]]:
        """A pure timed edge: every due row in one set-based move."""
        try:
            got = yield from self.bulk.move_keys(edge.dst, [k[0] for k in keys], (edge.src,),
                                                   timer.guards or None, due, edge,
                                                   data_text=data_text, data=data,
                                                   due_at=due_at, by=said[0], note=said[1])
        except Exception as exc:  # one failing batch must not stop the tick
            return [Fired(k, edge.name, False, None, f"{type(exc).__name__}: {exc}")
                    for k in keys]
        out = [Fired(k, edge.name, True) for k in got.applied]
        out += [Fired(k, edge.name, False, reason) for k, reason in got.refused]
        return out

    def _fire_edge(self, key: tuple[Any, ...], edge: Edge, timer: TimedEdge,
                   acts: Mapping[str, Callable[[ActiveLease], Any]],
                   holder: str | None, due: str, due_at: Any,
                   data: Any = None, said: Said = (None, None)) -> Op[Fired]:
        # the write re-checks the deadline and the timer's guards: between the tick's SELECT
        # and this write, an operator may have extended the deadline or set autopilot off
        try:
            if edge.lease:
                act = acts.get(edge.name)
                if act is None:
                    return Fired(key, edge.name, False, None,
                                 f"ValidationError: timer {edge.name!r} is side-effecting: "
                                 f"pass acts[{edge.name!r}]")
                res = yield from self.leases.run(key, edge.name, act, holder=holder,
                                          guards=timer.guards, data=data, due=due,
                                          due_at=due_at, by=said[0], note=said[1])
                return Fired(key, edge.name, res.applied, res.reason, res.error)
            tr = yield from self.moves.move(key, edge.dst, (edge.src,), None, None,
                                             timer.guards, data, edge, None, due=due,
                                             due_at=due_at, by=said[0], note=said[1])
            return Fired(key, edge.name, tr.applied, tr.reason)
        except Exception as exc:  # one failing row must not stop the tick
            return Fired(key, edge.name, False, None, f"{type(exc).__name__}: {exc}")

    def _fire_notice(self, n: Notice, send: Callable[[Mapping[str, Any]], Any] | None,
                     limit: int, values: dict[str, Any],
                     business: bool) -> Generator[Batch | Call, Any, list[Fired]]:
        values = dict(values)
        checks = self.notice_checks(n, "@" + n.due if business else n.due, values)
        stmt = self.compiler.select_due(checks, Ref(n.due), limit)
        rows = yield Batch((stmt.bind(self.dialect, values),))
        out: list[Fired] = []
        if send is None:  # reported per due row; nothing is claimed
            return [Fired(tuple(row), n.name, False, None,
                          f"ValidationError: notice {n.name!r} needs notify[{n.name!r}]")
                    for row in rows[0]]
        shape = ("notice", n.name, business)
        plan = self.context.plans.get(shape)
        if plan is None:
            plan = self.compiler.cas(checks, self.rules.notice_sets(n), None, known_from=True)
            self.context.plans[shape] = plan
        for row in rows[0]:
            key = tuple(row)
            try:
                _, vals = self.inputs.values(key)
                vals.update({k: v for k, v in values.items() if k not in vals})
                got = yield from self.cas.run(plan, vals)
                if got.new is None:
                    out.append(Fired(key, n.name, False, "ALREADY_SENT"))
                    continue
                # claimed first, then sent: a crash or a failure here never sends twice
                yield Call(send, got.new)
                out.append(Fired(key, n.name, True))
            except Exception as exc:
                out.append(Fired(key, n.name, False, None, f"{type(exc).__name__}: {exc}"))
        return out


def _check_fire_args(acts: object, notify: object, limit: object) -> None:
    """fire_due's arguments, checked before any I/O: a bad one would otherwise escape as a
    TypeError from ``dict()`` or ``int()``, or fail each due row on its own."""
    for name, given in (("acts", acts), ("notify", notify)):
        if given is None:
            continue
        if not isinstance(given, Mapping) or not all(callable(f) for f in given.values()):
            raise ValidationError(f"{name} must map names to callables, got {given!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit < 2**63:
        raise ValidationError(f"limit must be a non-negative int, got {limit!r}")

