"""docs/extending.md's promise: an application outside this repository composes its own
operation from the engine's and drives it with ``rowstate.ext.drive``/``rowstate.ext.adrive``,
using only names ``rowstate`` and its extension module ``rowstate.ext`` export."""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import rowstate
import rowstate.ext

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "extending.md"


def _blocks() -> list[str]:
    return re.findall(r"```(\w*)\n(.*?)```", DOC.read_text(), flags=re.S)  # type: ignore[return-value]


def _example() -> tuple[str, str]:
    """(the example module, the output the page says it prints)."""
    blocks = _blocks()
    code = next(body for lang, body in blocks if lang == "python" and "def advance" in body)
    printed = next(body for lang, body in blocks if lang == "text" and "sync:" in body)
    return code, printed


def test_the_example_uses_only_names_rowstate_and_its_extension_module_export() -> None:
    code, _ = _example()
    tree = ast.parse(code)
    exported = {"rowstate": rowstate.__all__, "rowstate.ext": rowstate.ext.__all__}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rowstate"):
            assert node.module in exported, f"imports a private module: {node.module}"
            for alias in node.names:
                assert alias.name in exported[node.module], alias.name
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "rowstate"):
            assert node.attr in rowstate.__all__, node.attr
    for name in ("Op", "Batch", "Call", "Core", "drive", "adrive"):
        assert name in rowstate.ext.__all__, name


def test_an_app_outside_the_repository_drives_its_own_operation(tmp_path: Path) -> None:
    code, printed = _example()
    app = tmp_path / "outside" / "advance_app"
    app.mkdir(parents=True)
    (app / "__init__.py").write_text(code)
    (app / "__main__.py").write_text(
        "from advance_app import main_async, main_sync\n"
        "import asyncio\n\n"
        "main_sync()\n"
        "asyncio.run(main_async())\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "advance_app"], cwd=app.parent, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed
    # the rowstate it ran is the installed one, not a file next to the app
    where = subprocess.run([sys.executable, "-c", "import rowstate; print(rowstate.__file__)"],
                           cwd=app.parent, env=env, capture_output=True, text=True,
                           timeout=60, check=True).stdout.strip()
    assert not Path(where).is_relative_to(tmp_path)


# the core operations docs/extending.md lists as stable, with the parameters it names
STABLE = {
    "get": ["key"],
    # by, note: who and why (issue 21), keyword-only and last, so older calls still fit
    "transition": ["key", "to", "from_", "owner", "payload", "guards", "data", "returning",
                   "by", "note"],
    "can_transition": ["key", "to", "from_", "owner", "guards"],
    "enabled_edges": ["key", "owner"],
    "create": ["key", "state", "columns", "data", "by", "note"],  # the birth event's
    "ensure": ["key", "state", "columns", "data", "by", "note"],
    "claim_finalization": ["key", "holder", "scope", "returning"],
    "release_finalization": ["key", "holder", "scope"],
    "transition_checks": ["key", "to", "from_", "owner", "guards"],
    "finalization_checks": ["key", "holder", "scope"],
}


def test_the_core_operations_the_page_calls_stable_are_there() -> None:
    doc = DOC.read_text()
    machine = rowstate.Machine("t", states=["A", "B"], initial="A",
                               edges=[rowstate.Edge("go", "A", "B")])
    store = rowstate.connect("sqlite://")
    try:
        core = rowstate.Lifecycle(store, rowstate.Binding(machine, table="t", key=("id",),
                                                          state="state")).core
        for name, params in STABLE.items():
            assert f"`{name}(" in doc, name
            assert list(inspect.signature(getattr(core, name)).parameters) == params, name
        assert core.clock is None
    finally:
        store.close()
