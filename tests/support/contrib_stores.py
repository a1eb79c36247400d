"""The contrib stores as backends of the engine's functional tests (support.engine.Backend):
a SQLAlchemy engine (sync or async) or a Django database alias made for one test's
database (an SQLite file, or a fresh schema of a real PostgreSQL database) and the store
over it; ``close`` disposes of what was made.

Django is configured once per process (:func:`django_configured`) with a SQLite
``default``; each test's database is an alias of its own, added to Django's connection
handler and taken out again (:func:`django_alias`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Waiter = Callable[[Any], Any]  # runs a coroutine to completion (the backend's loop)


def _pg_parts(conninfo: str) -> dict[str, str]:
    from psycopg.conninfo import conninfo_to_dict

    return {k: str(v) for k, v in conninfo_to_dict(conninfo).items() if v is not None}


def _wal(dbapi_connection: Any, _record: Any) -> None:
    """The engine's PRAGMAs, the ones rowstate's own SQLite store sets: WAL, so a
    read-only unit does not wait for a writer, and synchronous=NORMAL (no fsync per
    commit)."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def sqlalchemy_engine(db: str, mode: str, where: str) -> Any:
    from sqlalchemy import create_engine, event
    from sqlalchemy.ext.asyncio import create_async_engine

    make: Any = create_async_engine if mode == "async" else create_engine
    if db == "sqlite":
        driver = "sqlite+aiosqlite" if mode == "async" else "sqlite"
        engine = make(f"{driver}:///{where}", connect_args={"timeout": 30})
        event.listen(getattr(engine, "sync_engine", engine), "connect", _wal)
        return engine
    return make(sqlalchemy_url(where), pool_size=8, max_overflow=8)


def sqlalchemy_url(conninfo: str) -> Any:
    """SQLAlchemy's URL (``postgresql+psycopg``) of a PostgreSQL DSN, in either form;
    ``.render_as_string(hide_password=False)`` gives it as text."""
    from sqlalchemy.engine import URL

    parts = _pg_parts(conninfo)
    return URL.create("postgresql+psycopg", username=parts.pop("user", None),
                      password=parts.pop("password", None), host=parts.pop("host", None),
                      port=int(parts.pop("port")) if "port" in parts else None,
                      database=parts.pop("dbname", None), query=parts)


class ContribStore:
    """One contrib store and what it was made on."""

    def __init__(self, door: str, db: str, mode: str, where: str) -> None:
        self.door = door
        self.alias: str | None = None
        self.engine: Any = None
        if door == "sqlalchemy":
            from rowstate.contrib.sqlalchemy import AsyncSQLAlchemyStore, SQLAlchemyStore

            self.engine = sqlalchemy_engine(db, mode, where)
            self.store: Any = (AsyncSQLAlchemyStore if mode == "async"
                               else SQLAlchemyStore)(self.engine)
        elif door == "django":
            from rowstate.contrib.django import DjangoStore

            self.alias = add_django_alias(db, where)
            self.store = DjangoStore(self.alias)
        else:
            raise ValueError(door)

    def close(self, wait: Waiter | None) -> None:
        if self.engine is not None:
            if wait is not None:
                wait(self.store.close())
                wait(self.engine.dispose())
            else:
                self.store.close()
                self.engine.dispose()
        if self.alias is not None:
            self.store.close()
            remove_django_alias(self.alias)


# -- Django --------------------------------------------------------------------------------


def django_configured() -> None:
    """Django's settings, once per process: no app but the tests' own label."""
    from django.conf import settings

    if settings.configured:
        return
    import django

    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        INSTALLED_APPS=[], USE_TZ=True, TIME_ZONE="UTC",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()


def django_settings(db: str, where: str) -> dict[str, Any]:
    if db == "sqlite":
        # IMMEDIATE: a unit's BEGIN takes the write lock at once (see rowstate.contrib.django)
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": where,
                "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30,
                            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"}}
    parts = _pg_parts(where)
    options = {"options": parts["options"]} if "options" in parts else {}
    return {"ENGINE": "django.db.backends.postgresql", "NAME": parts.get("dbname", ""),
            "USER": parts.get("user", ""), "PASSWORD": parts.get("password", ""),
            "HOST": parts.get("host", ""), "PORT": parts.get("port", ""), "OPTIONS": options}


def add_django_alias(db: str, where: str, alias: str | None = None) -> str:
    """A database alias of Django's for ``where``, usable at once in every thread."""
    django_configured()
    from django.db import connections

    alias = alias or f"rs_{uuid.uuid4().hex[:12]}"
    configured = connections.configure_settings(
        {"default": connections.settings["default"], alias: django_settings(db, where)})
    connections.settings[alias] = configured[alias]
    return alias


def remove_django_alias(alias: str) -> None:
    from django.db import connections

    if hasattr(connections._connections, alias):
        connections[alias].close()
        delattr(connections._connections, alias)
    connections.settings.pop(alias, None)


@contextmanager
def django_alias(db: str, where: str) -> Iterator[str]:
    alias = add_django_alias(db, where)
    try:
        yield alias
    finally:
        remove_django_alias(alias)
