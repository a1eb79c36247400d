"""Which URLs are PostgreSQL's, as libpq reads them: its own module, without psycopg, so
that :mod:`.urls` (which a SQLite-only program imports) and :mod:`.pgreads` (a store's
read URL) share it without either importing the other."""

from __future__ import annotations

import re

from ..errors import ValidationError

#: a libpq keyword/value conninfo (``host=a,b port=1,2 dbname=x``): a word, then ``=``
_KEYWORDS = re.compile(r"\s*[a-z_]+\s*=")

#: SQLAlchemy's driver names for psycopg 3, which is what the PostgreSQL stores use
_PSYCOPG_DRIVERS = ("psycopg", "psycopg_async")


def postgres_url(url: str) -> str | None:
    """``url`` as libpq reads it when it is a PostgreSQL URL (or libpq's keyword/value
    form, ``host=a,b port=5432,5433 dbname=app``), else None.

    SQLAlchemy users have ``postgresql+psycopg://``: the suffix names psycopg 3, which is
    what we connect with, so it is dropped. Another driver suffix (``+asyncpg``,
    ``+psycopg2``, ``+pg8000``) is refused by name: libpq does not read the form, and the
    URL may carry options only that driver knows.
    """
    if _KEYWORDS.match(url):  # libpq's other form: host=a,b port=5432,5433 dbname=...
        return url
    scheme, sep, rest = url.partition(":")
    base, plus, driver = scheme.partition("+")
    if not sep or base not in ("postgresql", "postgres"):  # libpq's prefixes, as spelt
        return None
    if not plus:
        return url
    if driver in _PSYCOPG_DRIVERS:
        return f"{base}:{rest}"
    raise ValidationError(
        f"database URL {scheme}://...: the driver suffix '+{driver}' is SQLAlchemy's for "
        "another driver; rowstate connects with psycopg 3: write postgresql:// (or "
        "postgresql+psycopg://)")
