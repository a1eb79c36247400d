# Generated from dataset_lifecycle/_async/__init__.py by scripts/unasync.py: do not edit.
# Edit the source, then run `make unasync` (`make twins` checks).
"""One flavour of the twins: ``_async`` holds the sources (asyncio), ``_sync`` the sync
modules ``scripts/unasync.py`` generates from them."""
