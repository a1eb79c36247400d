"""Databases on a PostgreSQL server: uniquely named (so that concurrent test processes
sharing one server do not collide), cloned from a template, dropped whoever is connected.

A database migrated once and cloned per test (``CREATE DATABASE ... TEMPLATE``) is the cheap
way to give every test its own schema: see tests/pubsched/conftest.py. PostgreSQL refuses to
clone a template while anyone is connected to it.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo


def database_dsn(admin_dsn: str, name: str) -> str:
    """``admin_dsn`` pointed at database ``name`` (URL form kept when the input is a URL)."""
    if admin_dsn.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(admin_dsn)
        if "dbname" not in parse_qs(parts.query):
            return urlunsplit(parts._replace(path="/" + name))
    return make_conninfo(admin_dsn, dbname=name)


def admin_connect(admin_dsn: str) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(admin_dsn, autocommit=True, connect_timeout=10)


def make_database(admin_dsn: str, template: str | None = None, *, prefix: str = "rs_") -> str:
    """Create database ``<prefix><uuid hex>`` (from ``template``, else the server default).

    Returns the database *name*; see :func:`database_dsn` for its DSN. Names are unique, so
    concurrent test processes sharing one server do not collide. Note that PostgreSQL refuses
    to clone a template while anyone is connected to it.
    """
    name = f"{prefix}{uuid.uuid4().hex}"
    stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        stmt = stmt + sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with admin_connect(admin_dsn) as conn:
        conn.execute(stmt)
    return name


def drop_database(admin_dsn: str, name: str) -> None:
    """Drop database ``name`` (if it exists), disconnecting whoever is still connected."""
    ident = sql.Identifier(name)
    with admin_connect(admin_dsn) as conn:
        try:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        except psycopg.errors.SyntaxError:  # server < 13: no WITH (FORCE)
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity"
                " where datname = %s and pid <> pg_backend_pid()",
                [name],
            )
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(ident))


@contextmanager
def cloned_database(admin_dsn: str, template: str, *, prefix: str = "rs_") -> Iterator[str]:
    """The DSN of a new database cloned from ``template``, dropped on the way out.

    Cloning copies the template's files, so a schema migrated once into the template costs a
    ``CREATE DATABASE`` per test instead of a replay of every migration.
    """
    name = make_database(admin_dsn, template=template, prefix=prefix)
    try:
        yield database_dsn(admin_dsn, name)
    finally:
        drop_database(admin_dsn, name)


class Dropper:
    """Drops databases on worker threads, so that a test's teardown does not wait for the
    server: a ``DROP DATABASE`` waits for a checkpoint of the whole cluster, the slowest step
    of a database per test (~0.6 s each on a busy machine, more than the
    ``CREATE DATABASE ... TEMPLATE`` that made it). Whatever is waiting is dropped at once,
    one connection each: the server serves drops that wait together with one checkpoint
    (8 drops: ~0.5 s together, ~5 s one after the other, measured here).

    ``close()`` waits until every database handed over is gone and raises the first error a
    drop met, so nothing is left behind silently. Drops use ``WITH (FORCE)``: a connection a
    test left open does not hold its database up.
    """

    def __init__(self, admin_dsn: str, *, at_once: int = 8) -> None:
        self.admin_dsn = admin_dsn
        self.at_once = at_once
        self._names: queue.Queue[str | None] = queue.Queue()
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="database-dropper", daemon=True)
        self._thread.start()

    def drop(self, name: str) -> None:
        self._names.put(name)

    def _run(self) -> None:
        done = False
        while not done:
            batch = [self._names.get()]
            while len(batch) < self.at_once and not self._names.empty():
                batch.append(self._names.get())
            done = None in batch
            workers = [threading.Thread(target=self._drop, args=(name,))
                       for name in batch if name is not None]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()

    def _drop(self, name: str) -> None:
        try:
            drop_database(self.admin_dsn, name)
        except BaseException as exc:  # reported by close()
            self._errors.append(exc)

    def close(self) -> None:
        self._names.put(None)
        self._thread.join()
        if self._errors:
            raise self._errors[0]


class Clones:
    """Databases cloned from ``template`` by a worker thread, ``ahead`` of them made before
    they are asked for, so that a test takes a ready database instead of waiting for the
    server to copy one (``CREATE DATABASE ... TEMPLATE``) in its set-up.

    The worker connects only to the admin database, never to the template (PostgreSQL
    refuses to clone a template anyone is connected to). ``close()`` stops the worker and
    drops the databases made ahead that no test took; the ones handed out are the taker's.
    """

    def __init__(self, admin_dsn: str, template: str, *, prefix: str = "rs_",
                 ahead: int = 1) -> None:
        self.admin_dsn = admin_dsn
        self.template = template
        self.prefix = prefix
        self._ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="database-cloner", daemon=True)
        self._thread.start()

    def take(self) -> str:
        """The NAME of a new database cloned from the template (raises what making it raised)."""
        got = self._ready.get()
        if isinstance(got, BaseException):
            raise got
        return got

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                made: str | BaseException = make_database(
                    self.admin_dsn, template=self.template, prefix=self.prefix)
            except BaseException as exc:  # handed to the next take()
                made = exc
            while not self._stop.is_set():
                try:
                    self._ready.put(made, timeout=0.1)
                    break
                except queue.Full:
                    continue
            else:
                if isinstance(made, str):
                    drop_database(self.admin_dsn, made)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        while not self._ready.empty():
            left = self._ready.get()
            if isinstance(left, str):
                drop_database(self.admin_dsn, left)
