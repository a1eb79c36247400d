"""How the commands print: aligned text for a person (80 columns, plain in a pipe, local
time with its zone), one JSON document for a script (stable keys, times in ISO 8601 UTC)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import IO, Any
from uuid import UUID

WIDTH = 80


def iso(at: datetime | None) -> str | None:
    """A time for JSON: ISO 8601 in UTC (``2026-01-05T09:30:00.123000+00:00``)."""
    return None if at is None else at.astimezone(UTC).isoformat()


def stamp(at: datetime | None) -> str:
    """A time for a person: the local time to the second, its zone named
    (``2026-01-05 10:30:00 CET``). Local is the process's zone: ``TZ``, else the host's;
    a Django project's ``TIME_ZONE`` once Django is set up (Django sets ``TZ``)."""
    if at is None:
        return "-"
    here = at.astimezone()
    return f"{here:%Y-%m-%d %H:%M:%S} {here.tzname() or here.strftime('%z')}"


def span(seconds: float | None) -> str:
    """A duration in the two largest units that matter: ``45 s``, ``3 min``, ``1 h 5 min``,
    ``2 d 3 h``."""
    if seconds is None:
        return "-"
    s = int(abs(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(s // 3600, 24)
    return f"{d} d {h} h" if h else f"{d} d"


def ago(at: datetime | None, now: datetime) -> str:
    """``3 min ago``, ``in 4 h``, ``just now``; ``-`` for no time."""
    if at is None:
        return "-"
    seconds = (now - at).total_seconds()
    if abs(seconds) < 1:
        return "just now"
    return f"{span(seconds)} ago" if seconds > 0 else f"in {span(seconds)}"


def when(at: datetime | None, now: datetime) -> str:
    """``2026-01-05 10:30:00 CET (3 min ago)``."""
    return "-" if at is None else f"{stamp(at)} ({ago(at, now)})"


def key_text(key: Sequence[Any]) -> str:
    """A key as the command line takes it back: the value of a one-column key, else its
    JSON array."""
    if len(key) == 1:
        return str(key[0])
    return json.dumps(list(key))


def cell(value: Any) -> str:
    """A column's value in text: ``-`` for NULL, JSON for documents."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return stamp(value)
    if isinstance(value, dict | list):
        return json.dumps(value, default=plain)
    return str(value)


def plain(value: Any) -> Any:
    """What ``json.dumps`` cannot write itself, as JSON."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal | UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)


def dump(doc: Mapping[str, Any], out: IO[str]) -> None:
    out.write(json.dumps(doc, indent=2, default=plain, ensure_ascii=False) + "\n")


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "\u2026"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: IO[str], *,
          indent: int = 2, most: int = 28) -> None:
    """Rows aligned under their headers; a column is at most ``most`` wide (clipped with
    an ellipsis) except the last, which wraps within :data:`WIDTH` under itself."""
    if not rows:
        return
    n = len(headers)
    widths = [min(max(len(r[i]) for r in [headers, *rows]), most) for i in range(n - 1)]
    start = indent + sum(w + 2 for w in widths)
    last = max(WIDTH - start, 20)
    for r in [headers, *rows]:
        head = " " * indent + "".join(clip(c, w).ljust(w + 2) for c, w in zip(r, widths,
                                                                           strict=False))
        lines = textwrap.wrap(r[-1], last) or [""]
        out.write((head + lines[0]).rstrip() + "\n")
        for more in lines[1:]:
            out.write(" " * start + more + "\n")


def fields(pairs: Sequence[tuple[str, str]], out: IO[str], *, indent: int = 2) -> None:
    """``name  value`` lines, the values aligned; a long value wraps under itself."""
    if not pairs:
        return
    width = max(len(name) for name, _ in pairs)
    start = indent + width + 2
    for name, value in pairs:
        lines = textwrap.wrap(value, max(WIDTH - start, 20)) or ["-"]
        out.write(" " * indent + name.ljust(width + 2) + lines[0] + "\n")
        for more in lines[1:]:
            out.write(" " * start + more + "\n")


def wrapped(text: str, out: IO[str], *, indent: int = 2, hang: int = 2) -> None:
    """A paragraph within :data:`WIDTH`; its later lines ``hang`` further in."""
    lines = textwrap.wrap(text, WIDTH, initial_indent=" " * indent,
                          subsequent_indent=" " * (indent + hang))
    out.write("".join(line + "\n" for line in lines))
