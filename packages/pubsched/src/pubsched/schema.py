"""Whether the pub's database has a column yet: the legacy engine still runs on a database
at the legacy schema (0034, before the cutover's migrations), and what issue #18 adds
reads columns of later migrations (``pub_tenders.link_version`` of 0037; ``needs`` and
``skills`` of 0038). Each such reader asks here first and does without the column's
feature when it is missing (no links in the email, no skills to check), so a send or a
submission on an older schema behaves as it did before, instead of failing on a column
it never needed.

The probe is a ``SELECT`` of the columns from no rows, in a unit of its own (inside the
caller's, a savepoint of it: a failed statement cannot spoil the caller's). A column found
is remembered for the store (columns are only ever added); one missing is asked again,
since a migration may run meanwhile.
"""

from __future__ import annotations

import weakref

import rowstate

from .pub import Pub

_FOUND: weakref.WeakKeyDictionary[rowstate.Store, set[str]] = weakref.WeakKeyDictionary()


def has_columns(pub: Pub, table: str, *columns: str) -> bool:
    """True when ``table`` has every one of ``columns`` (names are the code's own)."""
    wanted = {f"{table}.{c}" for c in columns}
    found = _FOUND.setdefault(pub.store, set())
    if wanted <= found:
        return True
    try:  # a unit of its own, a savepoint inside the caller's: a failure spoils neither
        with pub.store.atomic(read_only=True) as tx:
            tx.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE 1 = 0")
    except rowstate.StoreError:
        return False
    found |= wanted
    return True
