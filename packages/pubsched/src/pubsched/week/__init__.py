"""A week: its run row, its shifts, its answers, its roster, its send, what its pages show,
and its time.

Nothing is imported here: each module is imported by name."""
