"""How big a row's number can be: every table's id is a 64-bit integer (SQLite's INTEGER,
PostgreSQL's bigint), and a bigger number is not "no such row" to the drivers but an error
(Python's sqlite3 cannot bind it; PostgreSQL refuses it as out of range). So the front ends
judge a number a person typed here, before it reaches a query: at most :data:`DIGITS`
digits, every id a row of ours can reach with room to spare (10**18 - 1 < 2**63 - 1)."""

from __future__ import annotations

DIGITS = 18
LIMIT = 10**DIGITS  # a number's size must stay below this


def row_number(text: str | None) -> int | None:
    """The row number ``text`` names (digits, at most :data:`DIGITS` of them once leading
    zeros are dropped), or None when no row can have it."""
    value = (text or "").strip()
    if not (value.isascii() and value.isdigit()) or len(value.lstrip("0")) > DIGITS:
        return None
    return int(value)


__all__ = ["DIGITS", "LIMIT", "row_number"]
