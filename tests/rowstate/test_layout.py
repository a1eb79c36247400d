"""The engine's layout holds: imports run one way (no circle, not even for type checking or
inside a function), no module is over 450 lines, every check is built in the rules module,
and ``python -m rowstate`` is the console script."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import rowstate
from rowstate.core.rules import CHECKS

SRC = Path(rowstate.__file__).resolve().parent.parent
MAX_LINES = 450


def _modules(package: str) -> dict[str, Path]:
    root = SRC / package
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, from the source (every ``import``
    anywhere in the file counts). ``from . import x`` imports the submodule ``x``;
    ``from pkg import Name`` imports ``pkg``."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        base = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = base
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    target = f"{anchor}.{node.module}" if node.module else anchor
                else:
                    target = node.module or ""
                for alias in node.names:
                    if f"{target}.{alias.name}" in modules:
                        graph[name].add(f"{target}.{alias.name}")
                    elif target in modules:
                        graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_rowstate_imports_run_one_way() -> None:
    assert circles(import_graph("rowstate")) == []


def test_the_bottom_stays_at_the_bottom() -> None:
    graph = import_graph("rowstate")
    below = {"rowstate.protocol": {"rowstate.errors", "rowstate.machine", "rowstate.results"},
             "rowstate.values": {"rowstate.errors"}}
    for module, allowed in below.items():
        assert graph[module] <= allowed, (module, graph[module] - allowed)
    # the declarative layer never reaches up to the core, the drivers' users or the stores
    for module in ("rowstate.binding", "rowstate.schema", "rowstate.schemacheck"):
        assert not {m for m in graph[module]
                    if m.startswith(("rowstate.core", "rowstate.lifecycle", "rowstate.units",
                                     "rowstate.stores"))}, module


@pytest.mark.parametrize("path", sorted(_modules("rowstate").values()),
                         ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_is_over_450_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_LINES


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
