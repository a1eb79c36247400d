"""A streaming-replication standby of a throwaway cluster, for the tests of a client through
a failover without the Patroni cluster: ``pg_basebackup -R`` of a primary we started
(:func:`support.pg_server.start_postgres`), started on a port of its own, promoted by
``pg_ctl promote``. What a real failover does to a client (its primary gone, a standby
that becomes writable) without what a manager adds (fencing, leader election)."""

from __future__ import annotations

import atexit
import os
import pwd
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql as pg_sql
from psycopg.conninfo import make_conninfo

from support.pg_server import (
    PG_OS_USER,
    PG_SUPERUSER,
    PostgresServer,
    _postmaster_pid,
    _run_pg,
    start_postgres,
)
from support.services import LOCALHOST, ServiceUnavailable, free_port, log_tail


def start_standby(primary: PostgresServer, start_timeout: int = 60) -> PostgresServer:
    """A hot standby of ``primary`` (a cluster we started), streaming from it; its
    ``admin_dsn`` answers read-only. Raise ServiceUnavailable when it cannot be had."""
    if not primary.owned or primary.bindir is None or primary.port is None:
        raise ServiceUnavailable("a standby needs a primary we started")
    bindir = primary.bindir
    base = Path(tempfile.mkdtemp(prefix="rowstate-pg-standby-"))
    run_as = primary.run_as
    standby = PostgresServer(admin_dsn="", owned=True, base_dir=base, data_dir=base / "data",
                             bindir=bindir, run_as=run_as, log_file=base / "postgres.log")
    assert standby.data_dir is not None and standby.log_file is not None
    try:
        sock_dir = base / "sock"
        sock_dir.mkdir(mode=0o700)
        if run_as is not None:
            entry = pwd.getpwnam(PG_OS_USER)
            for path in (base, sock_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        _run_pg([str(bindir / "pg_basebackup"), "-D", str(standby.data_dir), "-h", LOCALHOST,
                 "-p", str(primary.port), "-U", PG_SUPERUSER, "-X", "stream", "-R", "-c", "fast",
                 "--no-sync"], run_as=run_as, cwd=base)
        with (standby.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(f"\n# the standby's own\nunix_socket_directories = '{sock_dir}'\n"
                       "hot_standby = on\n")
        port = free_port()
        proc = _run_pg([str(bindir / "pg_ctl"), "-D", str(standby.data_dir), "-l",
                        str(standby.log_file), "-o", f"-p {port}", "-w", "-t",
                        str(start_timeout), "start"], run_as=run_as, cwd=base, check=False,
                       timeout=start_timeout + 30)
        if proc.returncode != 0:
            raise ServiceUnavailable(f"the standby did not start: {proc.stdout}{proc.stderr}"
                                     f"\n{log_tail(standby.log_file)}")
        standby.port, standby.pid = port, _postmaster_pid(standby.data_dir)
        standby.admin_dsn = f"postgresql://{PG_SUPERUSER}@{LOCALHOST}:{port}/postgres"
    except BaseException:
        standby.stop()
        raise
    atexit.register(standby.stop)
    return standby


def promote(standby: PostgresServer, timeout: int = 60) -> None:
    """``pg_ctl promote -w``: the standby ends recovery and takes writes."""
    assert standby.bindir is not None and standby.data_dir is not None
    _run_pg([str(standby.bindir / "pg_ctl"), "-D", str(standby.data_dir), "-w", "-t",
             str(timeout), "promote"], run_as=standby.run_as, cwd=standby.base_dir,
            timeout=timeout + 30)


def caught_up(primary_dsn: str, standby_dsn: str, timeout: float = 30) -> None:
    """Wait until the standby has replayed everything the primary had committed. A
    throwaway cluster runs with ``synchronous_commit = off``, so a commit's WAL may still be
    in its buffers (sent only once flushed): a transaction committed synchronously here
    flushes it all first."""
    with psycopg.connect(primary_dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute("SELECT txid_current()")  # a commit record, flushed with all before it
        row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    deadline = time.monotonic() + timeout
    with psycopg.connect(standby_dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            got = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                               (row[0],)).fetchone()
            if got is not None and got[0]:
                return
            time.sleep(0.05)
    raise AssertionError("the standby did not catch up")


@contextmanager
def replicated(prepare: Callable[[str], None]) -> Iterator[tuple[PostgresServer,
                                                                  PostgresServer, str]]:
    """(primary, standby, database): a throwaway primary, a ``pg_basebackup -R`` standby
    streaming from it, and a database ``prepare(dsn)`` filled on the primary before the
    standby was made. Raise ServiceUnavailable when either cannot be had."""
    primary = start_postgres()
    try:
        name = f"rs_repl_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(primary.admin_dsn, autocommit=True) as conn:
            conn.execute(pg_sql.SQL("CREATE DATABASE {}").format(pg_sql.Identifier(name)))
            # an acknowledged commit is in the WAL sent to the standby (the throwaway
            # cluster's default is off: see caught_up)
            conn.execute(pg_sql.SQL("ALTER DATABASE {} SET synchronous_commit = on").format(
                pg_sql.Identifier(name)))
        prepare(make_conninfo(primary.admin_dsn, dbname=name))
        standby = start_standby(primary)
        try:
            caught_up(primary.admin_dsn, standby.admin_dsn)
            yield primary, standby, name
        finally:
            standby.stop()
    finally:
        primary.stop()


__all__ = ["caught_up", "promote", "replicated", "start_standby"]
