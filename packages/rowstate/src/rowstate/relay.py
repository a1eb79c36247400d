"""The outbox relay: delivers event rows at least once, in order per row, with a stable id.

Events are written by the transition itself (same atomic write), so nothing is lost between
the write and the publish. The relay reads undelivered rows in id order, hands each to every
publisher, and marks them delivered. A publisher that raises stops the pass at that event:
it and every later event stay undelivered and are retried on the next pass, so the order per
row holds (rows of one key get increasing ids, because their writes serialize on the row).
A crash between the publish and the mark redelivers: consumers dedupe on ``stable_id``
(NATS JetStream does it for us through the ``Nats-Msg-Id`` header).

An event id is unique only within its events table, so a delivered event's ``stable_id``
is ``<namespace>:<machine>:<event id>``: two events tables (two tenants or regions, two
databases, or a table dropped and created again, whose ids start at 1 again) relaying into
one stream must not drop each other's events as duplicates. The namespace is ``namespace=``
when given (a name the operator keeps stable, e.g. ``"eu-1"``), else derived on the first
pass from the table's identity, hashed to 16 hex digits:

* PostgreSQL: the cluster's ``system_identifier`` (``pg_control_system()``), the database's
  oid and the events table's oid, so a restored copy on another cluster or a recreated
  table gets a new namespace while a restart of the server keeps it;
* SQLite: the database file's path and the time of the table's first event (a table
  created again starts with a new first event; a path alone would let two hosts with the
  same file path collide). Until the table holds an event there is nothing to derive it
  from, nor anything to deliver. An in-memory database gets a random namespace per relay,
  since it dies with the process.

The namespace is derived once per relay object. Deleting a table's first events (pruning)
changes what a new relay derives: events redelivered across that restart then come twice
(at least once still holds), never lost.

Pass ``namespace=`` when the derived one does not fit: the database is moved to another
path or cluster while events are in flight, or ``pg_control_system()`` is not granted.

Run one relay per events table. Two relays are safe (at least once still holds) but may
deliver an event twice and interleave.

The relays are written once: ``_async/relay.py`` is the source, ``_sync/relay.py`` is
generated from it by ``scripts/unasync.py``; the pass they drive is :mod:`rowstate.relaypass`.
"""

from __future__ import annotations

from ._async.relay import AsyncRelay
from ._sync.relay import Relay
from .relaypass import Publisher

__all__ = ["AsyncRelay", "Publisher", "Relay"]
