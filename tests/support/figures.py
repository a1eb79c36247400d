"""Figures a test measured, printed at the end of the run under a heading of their own (so
``make failover`` shows them without ``-s``): the source of the numbers in the docs.

A session fixture registers one :class:`Figures` per heading as a pytest plugin, so its
``pytest_terminal_summary`` runs once, after every test::

    @pytest.fixture(scope="session")
    def figures(pytestconfig: pytest.Config) -> Figures:
        return Figures.registered(pytestconfig, "failover figures")
"""

from __future__ import annotations

from typing import Any

import pytest


class Figures:
    """The lines, in the order the tests measured them."""

    def __init__(self, heading: str) -> None:
        self.heading = heading
        self.lines: list[str] = []

    @classmethod
    def registered(cls, config: pytest.Config, heading: str) -> Figures:
        """The plugin of this heading, registered on first use."""
        name = f"rowstate-figures-{heading}"
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is None:
            plugin = cls(heading)
            config.pluginmanager.register(plugin, name)
        assert isinstance(plugin, Figures)
        return plugin

    def add(self, line: str) -> None:
        print(line)  # in the test's own captured output too
        self.lines.append(line)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.lines:
            terminalreporter.write_sep("=", self.heading)
            for line in self.lines:
                terminalreporter.write_line(line)
