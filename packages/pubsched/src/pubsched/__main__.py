"""``python -m pubsched ...``: the same command line as the ``pubsched`` console script
(:func:`pubsched.cli.main`), for when the script is not on PATH (a venv not activated, a
container with only the interpreter)."""

from .cli import main

if __name__ == "__main__":
    main()
