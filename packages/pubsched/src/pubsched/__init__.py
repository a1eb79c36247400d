"""pubsched: the pub scheduler of seeds/pub-scheduler-v2.md, built on rowstate.

Kept empty on purpose: callers import from the modules (``pubsched.picker``,
``pubsched.week.time``, ``pubsched.mail.mailer``...), so that the package's parts never collide
on one shared list of re-exports.
"""
