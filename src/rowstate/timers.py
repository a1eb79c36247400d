"""Durable timers and once-per-row notices: due rows found through an index, each moved
through the normal door exactly once however many tickers run.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

from .base import ActiveLease, Call, Op
from .binding import TimedEdge, check_scalar
from .compiler import Batch
from .conditions import Check, Const, In, IsNull, Ref
from .errors import ValidationError
from .leases import LeaseOps
from .machine import Edge
from .results import Fired, FireReport, Reason


class TimerOps(LeaseOps):
    """fire_due: timed edges and notices."""

    # -- durable timers ------------------------------------------------------------------

    def fire_due(self, *, acts: Mapping[str, Callable[[ActiveLease], Any]] | None = None,
                 notify: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
                 limit: int = 100, holder: str | None = None) -> Op[FireReport]:
        """Move every due row through the normal door; one failing row does not stop the
        others. Several tickers may run at once: the CAS lets exactly one move each row."""
        _check_fire_args(acts, notify, limit, holder)
        acts, notify = dict(acts or {}), dict(notify or {})
        for t in self.b.timers:
            if self.m.edge(t.edge).lease and t.edge not in acts:
                raise ValidationError(f"timer {t.edge!r} is side-effecting: pass acts[{t.edge!r}]")
        for n in self.b.notices:
            if n.name not in notify:
                raise ValidationError(f"notice {n.name!r} needs notify[{n.name!r}]")
        fired: list[Fired] = []
        values = self._clock_values()
        for t in self.b.timers:
            edge = self.m.edge(t.edge)
            checks = [self._state_check((edge.src,)), self._due_check(t.due),
                      *self._guard_checks(t.guards, "tg", values)[1]]
            stmt = self.c.select_due(checks, Ref(t.due), limit)
            rows = yield Batch((stmt.bind(self.d, values),))
            for row in rows[0]:
                fired.append((yield from self._fire_edge(tuple(row), edge, t, acts, holder)))
        for n in self.b.notices:
            fired.extend((yield from self._fire_notice(n, notify[n.name], limit, values)))
        return FireReport(tuple(fired))

    def _fire_edge(self, key: tuple[Any, ...], edge: Edge, timer: TimedEdge,
                   acts: Mapping[str, Callable[[ActiveLease], Any]],
                   holder: str | None) -> Op[Fired]:
        # the write re-checks the deadline and the timer's guards: between the tick's SELECT
        # and this write, an operator may have extended the deadline or set autopilot off
        try:
            if edge.lease:
                res = yield from self.run(key, edge.name, acts[edge.name], holder=holder,
                                          guards=timer.guards, due=timer.due)
                return Fired(key, edge.name, res.applied, res.reason, res.error)
            tr = yield from self._transition(key, edge.dst, (edge.src,), None, None,
                                             timer.guards, None, edge, None, due=timer.due)
            return Fired(key, edge.name, tr.applied, tr.reason)
        except Exception as exc:  # one failing row must not stop the tick
            return Fired(key, edge.name, False, None, f"{type(exc).__name__}: {exc}")

    def _fire_notice(self, n: Any, send: Callable[[Mapping[str, Any]], Any], limit: int,
                     values: dict[str, Any]) -> Generator[Batch | Call, Any, list[Fired]]:
        checks = [Check(In(self.b.state_ref, tuple(Const(s) for s in n.states)),
                        Reason.STATE_MISMATCH, Reason.STATE_MISMATCH),
                  Check(IsNull(Ref(n.claim)), "ALREADY_SENT", "ALREADY_SENT"),
                  self._due_check(n.due), *self._guard_checks(n.guards, "ng", values)[1]]
        stmt = self.c.select_due(checks, Ref(n.due), limit)
        rows = yield Batch((stmt.bind(self.d, values),))
        out: list[Fired] = []
        shape = ("notice", n.name)
        plan = self._plans.get(shape)
        if plan is None:
            plan = self.c.cas(checks, [self.c.set_now(n.claim)], None, known_from=True)
            self._plans[shape] = plan
        for row in rows[0]:
            key = tuple(row)
            try:
                _, vals = self.values(key)
                vals.update({k: v for k, v in values.items() if k not in vals})
                got = yield from self._cas(plan, vals)
                if got.new is None:
                    out.append(Fired(key, n.name, False, "ALREADY_SENT"))
                    continue
                # claimed first, then sent: a crash or a failure here never sends twice
                yield Call(send, got.new)
                out.append(Fired(key, n.name, True))
            except Exception as exc:
                out.append(Fired(key, n.name, False, None, f"{type(exc).__name__}: {exc}"))
        return out


def _check_fire_args(acts: object, notify: object, limit: object, holder: object) -> None:
    """fire_due's arguments, checked before any I/O: a bad one would otherwise escape as a
    TypeError from ``dict()`` or ``int()``, or fail each due row on its own."""
    for name, given in (("acts", acts), ("notify", notify)):
        if given is None:
            continue
        if not isinstance(given, Mapping) or not all(callable(f) for f in given.values()):
            raise ValidationError(f"{name} must map names to callables, got {given!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit < 2**63:
        raise ValidationError(f"limit must be a non-negative int, got {limit!r}")
    if holder is not None:
        if not isinstance(holder, str) or not holder:
            raise ValidationError(f"a lease holder is a non-empty string, got {holder!r}")
        check_scalar(holder, "holder", ValidationError)
