"""The two engines of the pub run behind one protocol, and what chooses between them.

=================  ==========================================================================
``base``           the :class:`~pubsched.engines.base.Engine` protocol: the actions, the tick,
                   the state of a week, its times, the submission hold
``v2``             the v2 state machine (flag on): one door, ``pub.runs.transition``/``run``
``v2_tick``        v2's every-minute tick: nudges and autopilot through ``fire_due``
``legacy``         the implicit-status engine (flag off): its moves and its crons
``legacy_state``   how the legacy engine reads a week (timestamps as states, its db clock)
``legacy_send``    the legacy send under the single-purpose AD-12 send lease
``flags``          the ``PUB_SCHEDULER_V2`` flag, kept in the database
``choose``         ``engine_for(pub)``: the flag read once, the engine that runs
``cutover``        flipping the flag, in the idle gap only
``actions``        the ONE table of operator actions (CLI, web buttons, ``perform``)
=================  ==========================================================================

Kept empty on purpose (no re-exports): importing one engine module never pulls in the
others, and the imports inside the package run one way, down the table above from
``actions`` (the top) to ``base`` and ``flags`` (the bottom).
"""
