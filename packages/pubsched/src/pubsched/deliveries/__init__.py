"""Mail: every email the pub sends is a row of its third machine (:mod:`.machine`), owed in
the unit of work that decides it (:mod:`.outbox`) and sent once through the machine's lease
(:mod:`.deliver`), the one place that hands owed mail to the mailer.

Nothing is imported here: :class:`pubsched.pub.Pub` binds the machine, and the modules
above it import :class:`~pubsched.pub.Pub`, so the package stays below the pub."""
