"""Databases on a PostgreSQL server: uniquely named (so that concurrent test processes
sharing one server do not collide), cloned from a template, dropped whoever is connected.

A database migrated once and cloned per test (``CREATE DATABASE ... TEMPLATE``) is the cheap
way to give every test its own schema: see tests/pubsched/conftest.py. PostgreSQL refuses to
clone a template while anyone is connected to it.
"""

from __future__ import annotations

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
