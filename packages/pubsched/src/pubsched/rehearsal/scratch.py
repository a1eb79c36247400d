"""The rehearsal's throwaway copy of the pub: a database of the real one's dialect, migrated
with the same migrations, holding the pub's active tenders and its shift template and no
weeks, the v2 flag on. Everything the rehearsal does happens there, so the real weeks,
deliveries, events and mail log are never touched.

Where it lives:

* **PostgreSQL**: a schema of its own in the same database, ``pubsched_rehearsal_<hex>``,
  reached with the real URL plus ``options=-c search_path=<schema>``: psycopg, the
  migrator and rowstate's store all connect through libpq, which applies the option to
  every connection, and neither the migrations nor rowstate qualify a name with
  ``public.`` (``to_regclass`` and ``CREATE TABLE IF NOT EXISTS`` follow the search path).
  Nothing else is on that path, so a name the copy lacks is an error, never the real table.
* **SQLite**: a file in a fresh temporary directory, next to nothing real.

:func:`drop` removes either (``DROP SCHEMA ... CASCADE``; the file and its directory) and
is safe to call twice, so a later rehearsal can drop what a crashed one left.

Mail from the copy goes to the operator only, twice over: the copy's settings are the
real ones in rehearsal mode (:mod:`pubsched.mail.compose` addresses every message to the
operator, the intended tender in the subject), and its mailer is the real one wrapped in
:class:`OperatorOnly`, which refuses any message whose envelope is not the operator's.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ..db.migrate import migrate
from ..db.store import open_store
from ..engines.flags import set_v2
from ..mail.compose import Outgoing
from ..mail.mailer import Delivery, HandingOver, Mailer, MailSession, Outcome
from ..pub import Pub
from ..verdicts import BadInput

SCHEMA_PREFIX = "pubsched_rehearsal_"
DIR_PREFIX = "pubsched-rehearsal-"
_SCHEMA = re.compile(rf"^{SCHEMA_PREFIX}[0-9a-f]{{12}}$")
# the tables copied from the real pub (the rest of the copy starts empty)
COPIED = ("pub_tenders", "pub_shift_template")


def operator_of(pub: Pub) -> str:
    """The operator's address, or :class:`BadInput`: a rehearsal mails nobody else, so
    without one it cannot start."""
    operator = pub.config.mail.operator_email
    if operator is None:
        raise BadInput("a rehearsal sends every email to the operator, and no operator "
                       "address is configured: set PUBSCHED_OPERATOR_EMAIL")
    return operator


def new_name(pub: Pub) -> str:
    """A fresh scratch name for the real pub's dialect (nothing is created yet)."""
    if pub.dialect == "postgresql":
        return SCHEMA_PREFIX + secrets.token_hex(6)
    return str(Path(tempfile.mkdtemp(prefix=DIR_PREFIX)) / "rehearsal.db")


def url_of(pub: Pub, scratch: str) -> str:
    """The URL that reaches the scratch copy named ``scratch``."""
    if pub.dialect != "postgresql":
        return f"sqlite:///{scratch}"
    _check_schema(scratch)
    url = pub.config.db_url
    if not url.startswith(("postgresql:", "postgres:")):  # libpq's keyword form
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        given = conninfo_to_dict(url).get("options")
        return make_conninfo(url, options=" ".join(
            [*([str(given)] if given else []), f"-c search_path={scratch}"]))
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query)
    options = " ".join([v for k, v in pairs if k == "options"] + [f"-c search_path={scratch}"])
    query = [(k, v) for k, v in pairs if k != "options"] + [("options", options)]
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def create(pub: Pub, scratch: str) -> Pub:
    """Make the copy named ``scratch`` and open it as a pub (the caller closes it)."""
    if pub.dialect == "postgresql":
        _check_schema(scratch)
        with pub.atomic() as tx:
            tx.execute(f"CREATE SCHEMA {scratch}")
    url = url_of(pub, scratch)
    migrate(url)
    copy = open_copy(pub, scratch)
    try:
        _fill(pub, copy)
    except BaseException:
        copy.close()
        raise
    return copy


def open_copy(pub: Pub, scratch: str) -> Pub:
    """The existing copy ``scratch`` as a pub: the real settings in rehearsal mode, the real
    mailer behind :class:`OperatorOnly`."""
    operator = operator_of(pub)
    url = url_of(pub, scratch)
    if pub.dialect != "postgresql" and not os.path.exists(scratch):
        raise BadInput(f"the rehearsal's copy {scratch} is gone")
    mail = replace(pub.config.mail, rehearsal=True)
    config = replace(pub.config, db_url=url, mail=mail)
    return Pub(open_store(url), config, mailer=OperatorOnly(pub.mailer, operator))


def drop(pub: Pub, scratch: str) -> None:
    """Remove the copy ``scratch``; nothing to do when it is already gone."""
    if pub.dialect == "postgresql":
        _check_schema(scratch)
        with pub.atomic() as tx:
            tx.execute(f"DROP SCHEMA IF EXISTS {scratch} CASCADE")
        return
    path = Path(scratch)
    if not path.parent.name.startswith(DIR_PREFIX):  # only ever a directory we made
        raise BadInput(f"not a rehearsal's copy: {scratch}")
    shutil.rmtree(path.parent, ignore_errors=True)


def leftovers(pub: Pub) -> list[str]:
    """Scratch schemas in the real database (PostgreSQL; SQLite's are named by records)."""
    if pub.dialect != "postgresql":
        return []
    rows = pub.query("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                     [SCHEMA_PREFIX.replace("_", r"\_") + "%"])
    return [str(r["nspname"]) for r in rows if _SCHEMA.match(str(r["nspname"]))]


def exists(pub: Pub, scratch: str) -> bool:
    if pub.dialect == "postgresql":
        return scratch in leftovers(pub)
    return os.path.exists(Path(scratch).parent)


def _check_schema(name: str) -> None:
    """A schema name is pasted into DDL, so only our own shape ever is."""
    if not _SCHEMA.match(name):
        raise BadInput(f"not a rehearsal's schema name: {name!r}")


def _fill(pub: Pub, copy: Pub) -> None:
    """The real pub's active tenders and its shift template, the flag on; the template
    the migrations seeded in the copy is replaced by the pub's own."""
    tenders = pub.query("SELECT * FROM pub_tenders WHERE active <> 0 ORDER BY id")
    template = pub.query("SELECT * FROM pub_shift_template ORDER BY id")
    with copy.atomic() as tx:
        tx.execute("DELETE FROM pub_shift_template")
        for table, rows in (("pub_tenders", tenders), ("pub_shift_template", template)):
            for row in rows:
                _insert(tx, table, row)
    set_v2(copy, True)


def _insert(tx: Any, table: str, row: dict[str, Any]) -> None:
    names = list(row)  # the real table's columns: the copy has the same migrations
    tx.execute(f"INSERT INTO {table} ({', '.join(names)}) "
               f"VALUES ({', '.join(['%s'] * len(names))})", [row[n] for n in names])


class OperatorOnly:
    """The real mailer, refusing every message not addressed to the operator: the second
    lock on the rehearsal's mail (the first is rehearsal mode in the copy's settings)."""

    def __init__(self, inner: Mailer, operator: str) -> None:
        self.inner = inner
        self.operator = operator

    def session(self) -> MailSession:
        return _OperatorSession(self.inner.session(), self.operator)


class _OperatorSession:
    def __init__(self, inner: MailSession, operator: str) -> None:
        self._inner = inner
        self._operator = operator.lower()

    def __enter__(self) -> Self:
        self._inner.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._inner.__exit__(exc_type, exc, tb)

    def send(self, outgoing: Outgoing, handing_over: HandingOver | None = None) -> Outcome:
        if outgoing.envelope_to.lower() != self._operator:
            return Outcome(outgoing.intended, Delivery.REFUSED,
                           f"rehearsal: not sent to {outgoing.envelope_to}, only the "
                           "operator gets a rehearsal's email")
        return self._inner.send(outgoing, handing_over)
