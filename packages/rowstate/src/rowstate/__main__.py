"""``python -m rowstate``: the ``rowstate`` console script (:func:`rowstate.cli.main`)."""

from .cli import main

raise SystemExit(main())
