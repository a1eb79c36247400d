"""A row's number as a URL or a form names it (the bound is :mod:`pubsched.db.ids`'s).

In a path, the ``{name:id}`` convertor matches only numbers a row can have, so a longer
one matches no route and is a 404 like any unknown page; in a form, :func:`row_id` turns
anything else into :class:`~pubsched.verdicts.BadInput`, which each page answers in its
own words. Starlette's own ``:int`` takes any length, which reached the drivers as a 500.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor

from ..db.ids import DIGITS, row_number
from ..verdicts import BadInput


class RowIdConvertor(Convertor[int]):
    """``{name:id}``: 1 to :data:`~pubsched.db.ids.DIGITS` digits, as an int."""

    regex = f"[0-9]{{1,{DIGITS}}}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("id", RowIdConvertor())


def row_id(raw: str | None, what: str) -> int:
    """The row number a form's field names (``what``: the thing, for the message)."""
    found = row_number(raw)
    if found is None:
        raise BadInput(f"not a {what}: {(raw or '')[:40]!r}")
    return found


__all__ = ["RowIdConvertor", "row_id"]
