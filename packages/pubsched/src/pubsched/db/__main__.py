"""``python -m pubsched.db``: apply the migrations, the step a deployment runs before any
instance starts (:func:`pubsched.db.migrate.main`)."""

from .migrate import main

raise SystemExit(main())
