"""Test doubles: the real engine on an in-memory SQLite database.

``MockDatasetLifecycle`` is not a copy of the rules: it *is* ``DatasetLifecycle``, on a
private ``sqlite://`` database, so an illegal transition, a lost claim or a failed load guard
behaves in a unit test exactly as in production. On top it records every call
(``transition_calls``, ``claim_calls``, ``release_calls``) and every published event
(``events``), and lets a test put a row in any state (``set_initial_state``).
``AsyncMockDatasetLifecycle`` is the same for ``AsyncDatasetLifecycle``.

The mocks are written once (``_async/mock.py``; ``_sync/mock.py`` is generated from it by
``scripts/unasync.py``); what they record is :mod:`dataset_lifecycle._recording`.
"""

from ._async.mock import AsyncMockDatasetLifecycle
from ._recording import ClaimCall, ReleaseCall, TransitionCall, upsert_row
from ._sync.mock import MockDatasetLifecycle

__all__ = [
    "AsyncMockDatasetLifecycle",
    "ClaimCall",
    "MockDatasetLifecycle",
    "ReleaseCall",
    "TransitionCall",
    "upsert_row",
]
