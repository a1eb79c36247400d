"""Reads: a row by its key, its history (the events table, oldest first), and what became of
a move whose COMMIT got no answer (:meth:`Reads.resolve`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ValidationError
from ..outbox import EVENT_READ_COLUMNS, row_key
from ..protocol import Batch, Op
from ..results import Event, Resolution
from .context import Context
from .inputs import Inputs


class Reads:
    """``get``, ``history`` and ``resolve``."""

    def __init__(self, context: Context, inputs: Inputs) -> None:
        self.context = context
        self.inputs = inputs

    def get(self, key: object) -> Op[dict[str, Any] | None]:
        _, values = self.inputs.values(key)
        rows = yield Batch((self.context.read.bind(self.context.dialect, values),))
        if not rows[0]:
            return None
        return self.context.public(self.context.row(rows[0][0]))

    def history(self, key: object) -> Op[list[Event]]:
        kv, _ = self.inputs.values(key)
        rows = yield Batch((self._events(kv),))
        return [self.context.event_of(r, kv) for r in rows[0]]

    def _events(self, kv: tuple[Any, ...]) -> tuple[str, list[Any]]:
        context = self.context
        if not context.event_table:
            raise ValidationError(f"{context.binding.table}: the binding has no events table")
        dialect = context.dialect
        p = dialect.placeholder
        sql = (
            f"SELECT {EVENT_READ_COLUMNS} FROM {dialect.table(context.event_table)} "
            f"WHERE machine = {p} AND row_key = {p} ORDER BY id"
        )
        return sql, [context.machine.name, row_key(kv)]

    def resolve(self, key: object, to: str, *, from_: Iterable[str] | str | None = None,
                since: int | None = None, by: str | None = None) -> Op[Resolution]:
        """Did the move of ``key`` into ``to`` (from ``from_``; by ``by``) happen? For a call
        that raised :class:`~rowstate.OutcomeUnknown`: one round trip reads the row, then
        its events, and :func:`judge` answers. Any move or lease edge into ``to`` counts
        (a finalize is the move of its edge)."""
        context = self.context
        to = self.inputs.target(to)
        froms = context.machine.resolve(to, from_)  # an edge the machine lacks raises
        if since is not None and not context.binding.version:
            raise ValidationError(f"{context.binding.table}: since= needs the binding's "
                                  "version column")
        if by is not None:
            by = self.inputs.by(by)
        kv, values = self.inputs.values(key)
        read = context.read.bind(context.dialect, values)
        if not context.event_table:
            rows = yield Batch((read,))
            events: list[Event] = []
        else:  # the row first: its version bounds the events that were there to see
            rows = yield Batch((read, self._events(kv)))
            events = [context.event_of(r, kv) for r in rows[1]]
        if not rows[0]:
            return Resolution(False)
        row = context.public(context.row(rows[0][0]))
        return judge(row, context.state_of(row), context.binding.version, events,
                     to=to, froms=froms, since=since, by=by,
                     has_events=bool(context.event_table))


def judge(row: dict[str, Any], state: str | None, version_column: str | None,
          events: Sequence[Event], *, to: str, froms: Sequence[str], since: int | None,
          by: str | None, has_events: bool) -> Resolution:
    """The verdict of :meth:`Reads.resolve`, without I/O.

    With an events table: the move applied when an event into ``to`` from one of ``froms``
    (and by ``by``, when given) is among the events after the row version ``since`` (the
    version read before the call), or is the row's last event when ``since`` is not given.
    Events newer than the row read are ignored (written between the two reads). Without
    an events table only the row speaks: the move applied when the row is in ``to`` (and
    its version passed ``since``). A move made by a racing worker looks the same: then this
    call's own write was refused, and the row is where the caller wanted it either way.
    """
    version = row.get(version_column) if version_column else None
    if not has_events:
        moved = state == to and (since is None or (version is not None and version > since))
        return Resolution(moved, state, version, None, row)
    seen = [e for e in events
            if version is None or e.version is None or e.version <= version]
    if since is None:
        window = seen[-1:]
    else:
        window = [e for e in seen if e.version is not None and e.version > since]
    for event in reversed(window):
        if (event.to_state == to and event.from_state in froms
                and (by is None or event.by == by)):
            return Resolution(True, state, version, event, row)
    return Resolution(False, state, version, None, row)
