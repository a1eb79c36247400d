"""The engine's layout holds: the bottom modules stay at the bottom, every check is built in
the rules module, and ``python -m rowstate`` is the console script. (No import circle and no
file over 450 lines, for all of ``src/``: tests/test_house.py.)"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import rowstate
from rowstate.core.rules import CHECKS
from support.layout import import_graph

SRC = Path(rowstate.__file__).resolve().parent.parent


def test_the_bottom_stays_at_the_bottom() -> None:
    graph = import_graph(package="rowstate")
    below = {"rowstate.protocol": {"rowstate.errors", "rowstate.machine", "rowstate.results"},
             "rowstate.values": {"rowstate.errors"}}
    for module, allowed in below.items():
        assert graph[module] <= allowed, (module, graph[module] - allowed)
    # the declarative layer never reaches up to the core, the drivers' users or the stores
    for module in ("rowstate.binding", "rowstate.schema", "rowstate.schemacheck"):
        assert not {m for m in graph[module]
                    if m.startswith(("rowstate.core", "rowstate.lifecycle", "rowstate.units",
                                     "rowstate.stores"))}, module


def test_every_check_is_built_in_the_rules() -> None:
    """No core part builds a Check of its own: they ask rules.checks (or its builders)."""
    core = SRC / "rowstate" / "core"
    for path in core.glob("*.py"):
        if path.name == "rules.py":
            continue
        calls = [n for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id == "Check"]
        assert calls == [], path.name
    assert set(CHECKS) >= {"transition", "finalize", "claim", "hold", "fence", "release"}


def test_python_m_rowstate_is_the_console_script() -> None:
    target = "rowstate.machine:Machine"  # not a machine instance: the same refusal from both
    ran = subprocess.run([sys.executable, "-m", "rowstate", "diagram", target],
                         capture_output=True, text=True)
    assert ran.returncode != 0 and "not a Machine or Binding" in ran.stderr
    helped = subprocess.run([sys.executable, "-m", "rowstate", "--help"],
                            capture_output=True, text=True, check=True)
    assert helped.stdout.startswith("usage: rowstate")
