"""What differs between SQLite and PostgreSQL, and nothing else.

A dialect renders references, parameters, the clock and JSON access, adapts values on their
way in and times on their way out. All decisions live in the compiler and the core; a dialect
only knows how each database spells them.

Time: by default "now" is the database's clock, so workers with skewed clocks agree on what
is stale (SQLite has no server, so there it is the writing host's clock). With an injected
clock, "now" is a bound parameter instead. SQLite stores times as one canonical UTC text
format, ``YYYY-MM-DDTHH:MM:SS.sssZ``, so that comparing the text compares the instants.

``base`` holds :class:`Dialect` (what both spell alike) and the shared helpers; ``sqlite``
and ``postgres`` each spell their own database. This package re-exports all of them.
"""

from __future__ import annotations

from .base import STORE_NOW, Dialect, canonical_time, check_ident, text_array
from .postgres import Postgres
from .sqlite import SQLite

__all__ = ["STORE_NOW", "Dialect", "Postgres", "SQLite", "canonical_time", "check_ident",
           "text_array"]
