"""The seed's ``LifecycleConfig``: everything ``init`` takes, as one value.

``init(LifecycleConfig(...))`` and ``init(...)`` with the same keywords are the same call
(the keywords build a ``LifecycleConfig``); ``MockDatasetLifecycle(config)`` takes one too.
The persistence source and its precedence are decided here, once (:attr:`source`); the
rules (:meth:`rules`) are built from the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from rowstate import AsyncStore, Store, UsageError

from ._machine import STALE_CLAIM_MS
from ._rules import DEFAULT_SCHEMA, DEFAULT_TABLE, Rules, build_rules
from ._types import DatasetStatusChanged, EventPublisher, Logger, PersistenceAdapter

#: Where a configured lifecycle reads and writes, in precedence order: the first one given
#: wins and the later ones are not looked at (the seed's persistence > crudService > pool >
#: environment; ``dsn`` is the environment's connection string given in code).
PersistenceSource = Literal["persistence", "store", "pool", "dsn", "environment"]

Publisher = EventPublisher | Callable[[DatasetStatusChanged], Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class LifecycleConfig:
    """The seed's ``LifecycleConfig`` in Python naming (``init``'s options; see the table in
    docs/dataset_lifecycle.md). Plain data: ``init`` checks it, and a configuration the
    binding refuses is a :class:`rowstate.ValidationError` there.

    Persistence sources (at most one is used; :attr:`source` says which):

    * ``persistence``: a custom :class:`PersistenceAdapter` (the seed's ``persistence``);
    * ``store``: a ready rowstate store (the seed's ``crudService``): ``rowstate.connect``'s,
      a ``PostgresStore`` with its own options, a contrib SQLAlchemy or Django store. A
      ``Store`` for ``DatasetLifecycle``, an ``AsyncStore`` for ``AsyncDatasetLifecycle``;
      the caller's to close;
    * ``pool``: a ``psycopg_pool.ConnectionPool`` (``AsyncConnectionPool`` for async) to
      reuse (the seed's ``pool``); the caller's to close;
    * ``dsn``, else ``$MULTIPLATFORM_PG_CONNECTION_STRING`` (the seed's environment): a
      PostgreSQL conninfo or URL, or ``sqlite:///path.db``; the library opens the store and
      ``reset()`` closes it.
    """

    persistence: PersistenceAdapter | None = None
    store: Store | AsyncStore | None = None
    pool: Any = None
    dsn: str | None = None
    payload_columns: Iterable[str] = ()
    event_publisher: Publisher | None = None
    logger: Logger | None = None
    schema: str = DEFAULT_SCHEMA
    table_name: str = DEFAULT_TABLE
    reservation_field: str | None = None
    stale_claim_ms: float = STALE_CLAIM_MS
    load_guards: Mapping[str, Any] | None = None
    clock: Callable[[], datetime] | None = None

    def __post_init__(self) -> None:
        # a one-shot iterable would be used up by the first init: keep a tuple (a string
        # is left for init to refuse by name)
        if not isinstance(self.payload_columns, str | tuple):
            object.__setattr__(self, "payload_columns", tuple(self.payload_columns))

    @property
    def source(self) -> PersistenceSource:
        """Which persistence source ``init`` uses: the first one given of ``persistence``,
        ``store``, ``pool``, ``dsn``; ``"environment"`` when none is."""
        if self.persistence is not None:
            return "persistence"
        if self.store is not None:
            return "store"
        if self.pool is not None:
            return "pool"
        if self.dsn is not None:
            return "dsn"
        return "environment"

    def rules(self) -> Rules:
        """The binding and checks this configuration asks for (a ValidationError if the
        binding refuses it)."""
        return build_rules(schema=self.schema, table_name=self.table_name,
                           reservation_field=self.reservation_field,
                           stale_claim_ms=self.stale_claim_ms, load_guards=self.load_guards,
                           payload_columns=self.payload_columns)


def configured(config: LifecycleConfig | None, keywords: LifecycleConfig) -> LifecycleConfig:
    """The configuration of an ``init`` call given either form: a ``LifecycleConfig``, or
    keywords (already built into one); both is a :class:`rowstate.UsageError`."""
    if config is None:
        return keywords
    if not isinstance(config, LifecycleConfig):
        raise UsageError(f"init takes a LifecycleConfig, got {type(config).__name__}")
    if keywords != LifecycleConfig():
        raise UsageError("init takes a LifecycleConfig or keyword options, not both")
    return config
