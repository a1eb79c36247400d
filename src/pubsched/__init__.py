"""pubsched: the pub scheduler of seeds/pub-scheduler-v2.md, built on rowstate.

Kept empty on purpose: callers import from the modules (``pubsched.picker``,
``pubsched.weeks``, ...), so that engineers building the package side by side never
collide on one shared list of re-exports.
"""
