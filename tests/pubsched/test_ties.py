"""pubsched's import graph as Python runs it: importing ``pubsched.covers.machine`` runs
``pubsched/covers/__init__.py`` first, so a module that imports a submodule also imports
every package on the way to it. tests/test_house.py reads the graph without those steps
(the package is not re-entered); here they count, as docs/architecture.md says they do,
and pubsched still has no circle (the pub binds the cover machine from the ground floor,
:mod:`pubsched.machine`, not from the covers package that is built on the pub)."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

from support.layout import SRC, import_graph


def _with_packages_on_the_way(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each import of ``a.b.c`` also imports ``a.b`` (not from inside ``a.b`` itself,
    whose own modules do not re-enter it)."""
    out: dict[str, set[str]] = {}
    for name, deps in graph.items():
        more = set(deps)
        for dep in deps:
            parts = dep.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent in graph and parent != name and not name.startswith(f"{parent}."):
                    more.add(parent)
        out[name] = more
    return out


def test_no_circle_through_a_package_init() -> None:
    graph = _with_packages_on_the_way(import_graph(SRC, "pubsched"))
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as found:
        raise AssertionError(f"an import circle: {' -> '.join(found.args[1])}") from None


def test_the_check_finds_the_circle_the_pub_had() -> None:
    """Before: ``pub`` imported ``covers.machine`` (in a function), whose package imports
    ``pub``; the plain graph sees no circle there, this one does."""
    graph = {"p.pub": {"p.covers.machine"}, "p.covers": {"p.covers.machine", "p.pub"},
             "p.covers.machine": set()}
    try:
        TopologicalSorter(_with_packages_on_the_way(graph)).prepare()
    except CycleError:
        return
    raise AssertionError("no circle found")
