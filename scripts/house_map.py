"""Draw a package's map from its code: one line per module, in the order its folders nest,
with the first sentence of its docstring and the modules of the package it imports.

docs/architecture.md carries the pub scheduler's map as this prints it, and a test
(tests/test_house.py) compares the two, so the map is redrawn with every move and cannot
drift from the code::

    python scripts/house_map.py packages/pubsched/src/pubsched
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

NAME, WHAT = 24, 42  # the columns: the file, what it is (its first words); then what it imports


def _first_sentence(tree: ast.Module) -> str:
    doc = ast.get_docstring(tree) or ""
    text = " ".join(doc.split()).replace("``", "`")
    cuts = [text.index(stop) for stop in (". ", ": ", "; ", " (") if stop in text[12:]]
    text = text[: min(cuts)] if cuts else text
    return text.rstrip(".:")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(root: Path, path: Path, tree: ast.Module, known: set[str]) -> list[str]:
    """The package's modules this file imports, relative to the package's root."""
    here = _module_name(root, path).split(".") if _module_name(root, path) else []
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                found.add(sub if sub in known else target)
    own = _module_name(root, path)
    return sorted(m for m in found if m and m != own and m in known)


def house_map(root: Path) -> str:
    files = sorted(p for p in root.rglob("*.py") if "migrations" not in p.parts)
    known = {_module_name(root, p) for p in files} - {""}
    lines: list[str] = []
    for path in sorted(files, key=lambda p: (len(p.relative_to(root).parts) > 1,
                                             p.relative_to(root).parts)):
        rel = path.relative_to(root)
        if path.name == "__init__.py" and len(rel.parts) == 1:
            continue
        tree = ast.parse(path.read_text())
        depth = len(rel.parts) - 1
        name = ("  " * depth) + (f"{rel.parts[-2]}/" if path.name == "__init__.py"
                                 else rel.parts[-1])
        if path.name == "__init__.py":
            name = ("  " * (depth - 1)) + f"{rel.parts[-2]}/"
        what = textwrap.wrap(_first_sentence(tree), WHAT - 2, max_lines=2,
                             placeholder=" ...") or [""]
        uses = textwrap.wrap(", ".join(_imports(root, path, tree, known)) or "-", 100 - NAME
                             - WHAT) or [""]
        for i in range(max(len(what), len(uses))):
            left = name if i == 0 else ""
            row = (f"{left:<{NAME}}{what[i] if i < len(what) else '':<{WHAT}}"
                   f"{uses[i] if i < len(uses) else ''}")
            lines.append(row.rstrip())
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(house_map(Path(sys.argv[1])))
