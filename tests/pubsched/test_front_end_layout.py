"""The front ends' shape (issue 16): ``pubsched.cli`` and ``pubsched.web`` import one way
(no module imports, at the top, inside a function or for type checking only, a module that
imports it back), no file of theirs is over 450 lines, and their week actions and buttons
are the rows of the one table of actions, not lists of their own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pubsched.cli import build_parser
from pubsched.engines.actions import ACTIONS
from pubsched.web.buttons import BUTTONS, CONFIRM

SRC = Path(__file__).resolve().parents[2] / "src"
FRONT_ENDS = ("pubsched/cli", "pubsched/web")


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in (SRC / "pubsched").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _imports(name: str, path: Path, package: bool, known: set[str]) -> set[str]:
    """Every module of ours that ``name`` imports anywhere in its text (``from . import x``
    is the submodule x, not the package)."""
    here = name if package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def test_no_import_circle_in_pubsched() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, package, set(modules))
             for name, (path, package) in modules.items()}
    done: set[str] = set()

    def visit(name: str, stack: list[str]) -> None:
        if name in stack:
            raise AssertionError("import circle: " + " -> ".join(
                [*stack[stack.index(name):], name]))
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*stack, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_no_front_end_file_is_over_450_lines() -> None:
    for folder in FRONT_ENDS:
        for path in (SRC / folder).rglob("*.py"):
            lines = len(path.read_text().splitlines())
            assert lines <= 450, f"{path.relative_to(SRC)}: {lines} lines"


def test_the_cli_week_commands_are_the_table_rows() -> None:
    text = _help(["week", "--help"])
    listed = re.findall(r"^    (\w+)\s", text, re.M)
    assert listed == [a.name for a in ACTIONS if a.cli] + ["show"]


def test_the_web_buttons_are_the_table_rows() -> None:
    assert {edge: (a.name, label) for a in ACTIONS for edge, label in a.buttons} == BUTTONS
    assert {a.name: a.confirm for a in ACTIONS if a.confirm} == CONFIRM


def _help(argv: list[str]) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args(argv)
    return out.getvalue()
