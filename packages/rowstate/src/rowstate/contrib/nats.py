"""The relay's NATS JetStream publisher (the ``nats`` extra: nats-py).

``AsyncRelay(store, [NatsPublisher(js)])`` delivers the outbox's events to JetStream, each
at least once and deduplicated by the stream (``Nats-Msg-Id`` is the event's stable id), so
a relay that crashed between the publish and marking the event delivered does not deliver
it twice to a subscriber of a stream with a duplicate window. The publisher takes the
JetStream context the application made (``nc.jetstream()``), so nats-py is imported by the
application, not here.
"""

from __future__ import annotations

import json
from typing import Any

from ..results import Event

__all__ = ["NatsPublisher"]


class NatsPublisher:
    """Publishes to NATS JetStream, subject ``<prefix>.<machine>``, deduplicated by the
    event's stable id (``Nats-Msg-Id``: ``<namespace>:<machine>:<event id>``, unique across
    events tables and databases), waiting for the stream's acknowledgement."""

    def __init__(self, js: Any, prefix: str = "rowstate") -> None:
        self.js = js
        self.prefix = prefix

    async def __call__(self, event: Event) -> None:
        body = json.dumps({
            "id": event.stable_id, "machine": event.machine, "key": list(event.key),
            "edge": event.edge, "from": event.from_state, "to": event.to_state,
            "owner": event.owner, "data": event.data, "version": event.version,
            "at": event.at.isoformat() if event.at else None,
        }).encode()
        await self.js.publish(f"{self.prefix}.{event.machine}", body,
                              headers={"Nats-Msg-Id": event.stable_id})

