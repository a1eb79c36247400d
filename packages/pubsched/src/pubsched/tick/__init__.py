"""The every-minute tick: the engine's moves, the covers' expiry, the reminders owed, then the
deliveries; and the tick's own record.

Nothing is imported here: each module is imported by name."""
