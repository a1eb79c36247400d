"""Reads: a row by its key, and its history (the events table, oldest first)."""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError
from ..outbox import EVENT_READ_COLUMNS, row_key
from ..protocol import Batch, Op
from ..results import Event
from .context import Context
from .inputs import Inputs


class Reads:
    """``get`` and ``history``."""

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
        context = self.context
        if not context.event_table:
            raise ValidationError(f"{context.binding.table}: the binding has no events table")
        kv, _ = self.inputs.values(key)
        dialect = context.dialect
        p = dialect.placeholder
        sql = (
            f"SELECT {EVENT_READ_COLUMNS} FROM {dialect.table(context.event_table)} "
            f"WHERE machine = {p} AND row_key = {p} ORDER BY id"
        )
        rows = yield Batch(((sql, [context.machine.name, row_key(kv)]),))
        return [context.event_of(r, kv) for r in rows[0]]
