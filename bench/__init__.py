"""Benchmarks of rowstate against hand-written SQL and django-fsm-2 (issue 4)."""
