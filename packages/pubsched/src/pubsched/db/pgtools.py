"""PostgreSQL's client tools (``pg_dump``, ``pg_restore``), run as children for
``pubsched backup`` and ``pubsched restore``.

The database's password never appears in a child's arguments, which every process listing
shows: it is taken out of the URL and handed over in ``PGPASSWORD``. A tool that is not
installed is :class:`ToolMissing`, naming the package to install, so a backup or a restore
is refused before it starts rather than quietly doing nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

TIMEOUT = 3600  # a pub's database dumps or restores in seconds; an hour means it hangs


class ToolMissing(Exception):
    """The tool is not on PATH; the message says what to install."""


def find(tool: str) -> str:
    """The path of ``tool`` (``pg_dump``, ``pg_restore``), or :class:`ToolMissing`."""
    found = shutil.which(tool)
    if found is None:
        raise ToolMissing(f"{tool} is not installed: install PostgreSQL's client tools "
                          "(Debian: apt install postgresql-client, of the server's major "
                          "version or newer) and run this again")
    return found


def run(tool: str, args: Sequence[str], url: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    """``tool`` with ``args`` (and ``--dbname`` for ``url``, its password in the
    environment), its output captured as text."""
    env = dict(os.environ)
    argv = [find(tool), *args]
    if url is not None:
        where, password = without_password(url)
        if password is not None:
            env["PGPASSWORD"] = password
        argv += ["--no-password", f"--dbname={where}"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT)


def without_password(url: str) -> tuple[str, str | None]:
    """The URL with its password taken out, and the password. Either of libpq's forms, with
    one host or a cluster's several (``user:pw@db1:5432,db2:5432``: the hosts are kept as
    written, never parsed as one host and port)."""
    if not url.startswith(("postgresql:", "postgres:")):  # the keyword form: host=... dbname=...
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(url)
        password = params.pop("password", None)
        if password is None:
            return url, None
        return make_conninfo("", **params), str(password)
    parts = urlsplit(url)
    if parts.password is None:
        return url, None
    hosts = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}{hosts}")), unquote(parts.password)


def last_line(text: str) -> str:
    """The line of a tool's stderr that says what went wrong (its last)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


__all__ = ["TIMEOUT", "ToolMissing", "find", "last_line", "run", "without_password"]
