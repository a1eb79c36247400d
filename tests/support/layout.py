"""Reading the distributions' ``packages/*/src/`` as one graph of imports, for the house
rules (tests/test_house.py) and the packages' own layout tests: every ``import``/``from ...
import`` statement anywhere in a file counts (at the top, inside a function, under
``TYPE_CHECKING``); ``from . import x`` is the submodule ``x`` (the package itself is not
re-entered), ``from pkg import Name`` is ``pkg``; importing ``a.b.c`` also imports the
packages ``a`` and ``a.b`` whose ``__init__`` Python runs first (but the importer's own).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGES = Path(__file__).resolve().parents[2] / "packages"
# each distribution's import root (packages/<distribution>/src); read together they are one
# graph, since the app's imports of the engine count too
SRC: tuple[Path, ...] = tuple(sorted(PACKAGES.glob("*/src")))
Roots = Path | tuple[Path, ...]


def python_files(roots: Roots) -> list[tuple[Path, Path]]:
    """(root, file) for every ``.py`` under the root or roots."""
    return [(root, path) for root in ((roots,) if isinstance(roots, Path) else roots)
            for path in sorted(root.rglob("*.py"))]


def module_names(root: Roots) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root`` (or each root)."""
    found: dict[str, Path] = {}
    for base, path in python_files(root):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that the file imports, wherever the statement sits."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names} & known.keys()
            if subs:
                out |= subs
            names_left = [a for a in node.names if f"{target}.{a.name}" not in known]
            if names_left and target in known:
                out.add(target)
    # importing a.b.c first runs the packages a and a.b (their __init__): they are imported
    # too, but for the importer's own packages, which are running already
    own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    for target in list(out):
        parts = target.split(".")
        out |= {p for i in range(1, len(parts))
                if (p := ".".join(parts[:i])) in known and p not in own}
    out.discard(name)
    return out


def import_graph(root: Roots = SRC, package: str = "") -> dict[str, set[str]]:
    """Module -> the modules under ``root`` it imports (only ``package``'s, if named)."""
    known = module_names(root)
    if package:
        known = {n: p for n, p in known.items() if n == package or n.startswith(f"{package}.")}
    return {name: imports_of(name, path, known) for name, path in known.items()}


def circles(root: Roots = SRC) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    graph = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found
