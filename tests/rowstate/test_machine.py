"""Machines as data: validation when built, the edge table, the Mermaid diagram, and edges the
machine lacks refused before any I/O."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rowstate import DefinitionError, Edge, InvalidTransitionError, Machine, ValidationError
from support.engine import JOB, JOBS, ROOT, RUN, RUNS, Backend, refused_before_io

# -- validation at construction --------------------------------------------------------------


def test_a_well_formed_machine_is_built_and_frozen() -> None:
    m = Machine("m", states=["A", "B"], initial="A", edges=[("go", "A", "B")])
    assert m.edges == (Edge("go", "A", "B"),)
    assert m.final == frozenset({"B"})
    with pytest.raises(AttributeError):
        m.initial = "B"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("states", "edges", "initial", "needle"),
    [
        (["A", "B"], [("go", "A", "C")], "A", "unknown state 'C'"),
        (["A", "B"], [("go", "X", "B")], "A", "unknown state 'X'"),
        (["A", "B"], [("go", "A", "B"), ("go", "B", "A")], "A", "duplicate edge name 'go'"),
        (["A", "B", "C"], [("go", "A", "B")], "A", "unreachable from 'A': C"),
        (["A", "B", "C"], [("go", "A", "B"), ("back", "C", "A")], "A", "unreachable"),
        (["A", "B"], [("go", "A", "B")], "Z", "initial state 'Z'"),
        (["A", "A"], [], "A", "declared twice"),
        (["A", ""], [], "A", "non-empty"),
    ],
    ids=["unknown-dst", "unknown-src", "duplicate-edge", "unreachable", "only-leaves",
         "bad-initial", "twice", "empty-name"],
)
def test_a_malformed_machine_is_refused_when_built(
    states: list[str], edges: list[tuple[str, str, str]], initial: str, needle: str
) -> None:
    with pytest.raises(DefinitionError, match=needle):
        Machine("bad", states=states, edges=edges, initial=initial)


def test_an_unknown_active_state_is_refused() -> None:
    with pytest.raises(DefinitionError, match="active state 'GONE'"):
        Machine("m", states=["A", "B"], initial="A", edges=[("go", "A", "B")], active=["GONE"])


def test_a_binding_refuses_rules_about_states_the_machine_lacks() -> None:
    from rowstate import Binding, Unique

    with pytest.raises(DefinitionError, match="unknown state 'NOPE'"):
        Binding(JOB, table="jobs", key=("id",), on_enter={"NOPE": {"status": "x"}})
    with pytest.raises(DefinitionError, match="unknown state 'NOPE'"):
        Binding(JOB, table="jobs", key=("id",), invariants=(Unique("NOPE"),),
                lease=JOBS.lease)
    with pytest.raises(DefinitionError, match="need a Lease"):
        Binding(JOB, table="jobs", key=("id",))  # JOB has side-effecting edges
    with pytest.raises(DefinitionError, match="not a plain identifier"):
        Binding(JOB, table="jobs; DROP TABLE x", key=("id",), lease=JOBS.lease)


# -- reading the edge table ----------------------------------------------------------------


def test_resolve_reads_the_edge_table() -> None:
    assert JOB.resolve("FAILED", None) == ("READY", "RUNNING")  # every state with an edge in
    assert JOB.resolve("FAILED", "RUNNING") == ("RUNNING",)
    assert JOB.resolve("FAILED", ["RUNNING", "READY", "RUNNING"]) == ("RUNNING", "READY")
    assert JOB.sources("READY") == ("NEW", "READY", "FAILED")
    assert JOB.edge("ping").lease == "ping"
    assert JOB.final == frozenset({"DONE"})
    assert [e.name for e in JOB.edges_between("READY", "READY")] == ["ping"]


@pytest.mark.parametrize(
    ("to", "from_", "needle"),
    [
        ("DONE", "READY", "no edge READY -> DONE"),
        ("DONE", ["RUNNING", "NEW"], "no edge NEW -> DONE"),
        ("NEW", None, "no edge leads into 'NEW'"),
        ("NOPE", None, "unknown state 'NOPE'"),
        ("DONE", "NOPE", "unknown state 'NOPE'"),
        ("DONE", [], "empty from-set"),
        (3, None, "unknown state 3"),
    ],
)
def test_resolve_refuses_what_the_machine_lacks(to: object, from_: object, needle: str) -> None:
    with pytest.raises(InvalidTransitionError, match=needle):
        JOB.resolve(to, from_)  # type: ignore[arg-type]


def test_an_unknown_edge_name_is_an_invalid_transition() -> None:
    with pytest.raises(InvalidTransitionError, match="no edge named 'fly'"):
        JOB.edge("fly")
    assert issubclass(InvalidTransitionError, ValidationError)


# -- the diagram ---------------------------------------------------------------------------

# the edges of the pub scheduler's design page (shared/seeds/pub-scheduler-v2.md)
SEED_EDGES = {
    ("DRAFT", "COLLECTING"), ("COLLECTING", "COLLECTING"), ("COLLECTING", "CLOSED"),
    ("CLOSED", "COLLECTING"), ("CLOSED", "ASSIGNED"), ("ASSIGNED", "ASSIGNED"),
    ("ASSIGNED", "COLLECTING"), ("ASSIGNED", "APPROVED"), ("APPROVED", "ASSIGNED"),
    ("APPROVED", "SENT"),
}


def test_mermaid_draws_the_pub_run_like_its_design_page() -> None:
    text = RUN.mermaid()
    lines = text.splitlines()
    assert lines[0] == "stateDiagram-v2"
    assert lines[1] == "    [*] --> DRAFT"
    arrows = [ln.strip() for ln in lines if "-->" in ln and "[*]" not in ln]
    assert {tuple(a.split(":")[0].split(" --> ")) for a in arrows} == SEED_EDGES
    assert len(arrows) == len(RUN.edges)
    assert "    COLLECTING --> CLOSED: close form<br/>(lease: close)" in lines
    assert "    ASSIGNED --> ASSIGNED: regenerate in place<br/>(lease: generate)" in lines
    assert "    ASSIGNED --> APPROVED: operator approves" in lines
    assert "    SENT --> [*]" in lines
    assert [ln for ln in lines if ln.strip().endswith("--> [*]")] == ["    SENT --> [*]"]
    note = lines.index("    note right of SENT")
    assert lines[note + 1] == "        terminal: never re-sends."
    assert lines[-1] == "    end note"
    assert text.endswith("\n")


def test_mermaid_labels_default_to_edge_names() -> None:
    m = Machine("tiny", states=["A", "B"], initial="A", edges=[Edge("go", "A", "B")])
    assert m.mermaid() == "stateDiagram-v2\n    [*] --> A\n    A --> B: go\n    B --> [*]\n"


def _rowstate_script() -> str:
    script = Path(sys.executable).with_name("rowstate")
    assert script.exists(), f"console script not installed next to {sys.executable}"
    return str(script)


def test_console_script_prints_the_diagram() -> None:
    from pubsched.machine import RUNS as PUB_RUNS

    done = subprocess.run([_rowstate_script(), "diagram", "pubsched.machine:RUNS"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == PUB_RUNS.machine.mermaid()
    bad = subprocess.run([_rowstate_script(), "diagram", "pubsched.machine"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode != 0
    assert "MODULE:ATTR" in bad.stderr


# -- refused before any I/O ----------------------------------------------------------------


@refused_before_io
def test_edges_the_machine_lacks_raise_before_any_io(backend: Backend) -> None:
    runs = backend.make(RUNS)
    jobs = backend.make(JOBS)
    backend.seed(RUNS, week_of="w1")
    backend.seed(JOBS, id="j1", state="READY")
    before = backend.rows(RUNS) + backend.rows(JOBS)

    with backend.no_io():
        with pytest.raises(InvalidTransitionError, match="no edge DRAFT -> SENT"):
            runs.transition("w1", "SENT", from_="DRAFT")
        with pytest.raises(InvalidTransitionError, match="unknown state 'LIMBO'"):
            runs.transition("w1", "LIMBO")
        with pytest.raises(InvalidTransitionError, match="unknown state"):
            runs.can_transition("w1", "LIMBO")
        with pytest.raises(InvalidTransitionError, match="side-effecting; use run"):
            jobs.transition("j1", "RUNNING")  # the only edge into RUNNING runs under a lease
        with pytest.raises(InvalidTransitionError, match="side-effecting; use run"):
            runs.transition("w1", "CLOSED", from_="COLLECTING")
        with pytest.raises(InvalidTransitionError, match="has no side effect"):
            jobs.run("j1", "cancel", lambda lease: True)
        with pytest.raises(InvalidTransitionError, match="no edge named"):
            jobs.claim("j1", "fly")
        with pytest.raises(InvalidTransitionError):
            jobs.transition("j1", "DONE", from_="NEW")

    assert backend.rows(RUNS) + backend.rows(JOBS) == before
