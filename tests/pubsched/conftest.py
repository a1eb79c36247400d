"""The pubsched fixtures (tests/pubsched/pub_fixtures.py): a migrated database on SQLite and
PostgreSQL, a real SMTP server on loopback, and a Pub wired to both."""

from pub_fixtures import db_url, pub, smtp

__all__ = ["db_url", "pub", "smtp"]
