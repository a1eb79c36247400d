"""pubsched's database: where it is (``urls``), its schema as numbered SQL files
(``migrations/``) and their runner (``migrate``), and opening it as a rowstate store
(``store``). The imports run one way: ``store`` -> ``migrate`` -> ``urls``.

The package re-exports what callers open the database with (``pubsched.db.open_store``,
``pubsched.db.database_url``, ...), the names it had as one module.
"""

from .store import Store, open_store
from .urls import (
    DB_ENV,
    DEFAULT_URL,
    DatabaseURLError,
    Dialect,
    configured_url,
    database_url,
    dialect_of,
    sqlite_path,
)

__all__ = [
    "DB_ENV",
    "DEFAULT_URL",
    "DatabaseURLError",
    "Dialect",
    "Store",
    "configured_url",
    "database_url",
    "dialect_of",
    "open_store",
    "sqlite_path",
]
