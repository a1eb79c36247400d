"""One flavour of the twins: ``_async`` holds the sources (asyncio), ``_sync`` the sync
modules ``scripts/unasync.py`` generates from them."""
