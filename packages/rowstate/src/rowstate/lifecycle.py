"""The front ends: :class:`Lifecycle` (sync) and :class:`AsyncLifecycle` (asyncio).

Both are thin: each method builds the core operation and drives it on the store. The only
thing they add is publishing events after commit when the binding has no events table (with
an events table, the :mod:`relay <rowstate.relay>` delivers them from the outbox).

They are written once: ``_async/lifecycle.py`` is the source, ``_sync/lifecycle.py`` is
generated from it by ``scripts/unasync.py`` (``make twins`` checks that it is current), and
what they share beyond spelling is :mod:`rowstate.frontend`.
"""

from ._async.lifecycle import AsyncLifecycle
from ._sync.lifecycle import Lifecycle
from .frontend import Publisher

__all__ = ["AsyncLifecycle", "Lifecycle", "Publisher"]
