"""The application surface and the extension module, pinned: a name cannot slip into
``rowstate.__all__`` (what an application needs, at most 46 names: the 46th,
``OutcomeUnknown``, is an error every application on a cluster must catch, issue 30) or out of
``rowstate.ext`` (the extension protocol) unnoticed, and the apps built on the engine reach
it only through those and the documented modules."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

import rowstate
import rowstate.ext
from support.layout import SRC, python_files

APPLICATION = [
    # defining a machine and where it lives
    "Machine", "Edge", "Binding", "Guard", "Lease", "FinalizationClaim", "TimedEdge",
    "Notice", "Derived", "Unique", "NOW",
    # connecting and moving rows
    "connect", "connect_async", "Store", "AsyncStore", "Lifecycle", "AsyncLifecycle", "Unit",
    "AsyncUnit", "ActiveLease",
    # events and their delivery
    "Event", "Relay", "AsyncRelay",
    # results
    "TransitionResult", "Reason", "CheckResult", "LeaseClaim", "ActFailed", "RunResult",
    "ReleaseResult", "FinalizationClaimResult", "BulkResult", "FireReport",
    # errors
    "RowstateError", "DefinitionError", "SchemaMismatch", "ValidationError", "UsageError",
    "InvalidTransitionError", "StoreError", "ConnectError", "ConnectionLostError",
    "OutcomeUnknown", "StatementCancelled", "InvariantViolation", "UnitRefusedError",
]

EXTENSION = [
    "Core", "Op", "Batch", "Call", "Door", "drive", "adrive",
    "Compiler", "Statement", "Set", "Dialect", "SQLite", "Postgres",
    "check_ident", "check_scalar", "canonical_time",
    "Node", "And", "Or", "Not", "In", "IsNull", "Older", "Same", "Ref", "Const", "Slot",
    "Value", "Check", "SqlOut", "RowView", "render", "evaluate", "failing", "lookup",
    "set_path",
]

#: the public modules beyond the two lists (rowstate's docstring names each one's job)
DOCUMENTED = {"rowstate", "rowstate.ext", "rowstate.stores", "rowstate.results",
              "rowstate.observe", "rowstate.gauges", "rowstate.migrations", "rowstate.errors"}


def test_the_application_surface_is_pinned_and_small() -> None:
    assert rowstate.__all__ == APPLICATION
    assert len(APPLICATION) <= 46
    assert len(set(APPLICATION)) == len(APPLICATION)


def test_the_extension_module_is_pinned() -> None:
    assert sorted(rowstate.ext.__all__) == sorted(EXTENSION)
    assert not set(EXTENSION) & set(APPLICATION), "one name, one home"


@pytest.mark.parametrize("module", [rowstate, rowstate.ext], ids=["rowstate", "rowstate.ext"])
def test_every_listed_name_resolves_and_nothing_else_is_public(module: object) -> None:
    listed = module.__all__  # type: ignore[attr-defined]
    assert [n for n in listed if not hasattr(module, n)] == []
    # what `from rowstate import *` and a reader of dir() see is the list, and the
    # submodules Python binds as attributes on import
    public = {n for n in vars(module) if not n.startswith("_")}
    extra = {n for n in public - set(listed)
             if not isinstance(getattr(module, n), type(sys))}
    assert extra <= {"annotations"}, extra  # ext.py: from __future__ import annotations


def test_import_rowstate_loads_nothing_outside_the_standard_library() -> None:
    code = ("import sys\nbefore = set(sys.modules)\nimport rowstate\n"
            "print('\\n'.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          check=True, env=None)
    roots = {name.partition(".")[0] for name in done.stdout.split()}
    assert roots - set(sys.stdlib_module_names) == {"rowstate"}, sorted(roots)


def _rowstate_imports(package: str) -> set[str]:
    """Every rowstate module the package's files import (``from rowstate.x import``,
    ``import rowstate.x``), wherever the statement sits."""
    found: set[str] = set()
    for _, path in python_files(SRC):
        if f"/{package}/" not in path.as_posix():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found |= {n for n in names if n == "rowstate" or n.startswith("rowstate.")}
    return found


def test_the_app_uses_the_application_surface_only() -> None:
    """pubsched is an application: rowstate, the documented modules, never the extension
    protocol nor a private module."""
    used = _rowstate_imports("pubsched")
    assert used - (DOCUMENTED - {"rowstate.ext"}) == set(), used


def test_dataset_lifecycle_composes_through_the_extension_module() -> None:
    used = _rowstate_imports("dataset_lifecycle")
    assert "rowstate.ext" in used
    assert used - DOCUMENTED == set(), used
