"""The engine's rules for JSON paths, on both databases and both front ends (issue 10).

* A guard over a JSON path follows JSON's equality: a number is not a boolean (``0`` is not
  ``false``), so the dry run, the write and the explanation of a refusal agree.
* An entry write to a JSON path always lands: missing objects on its path are created and
  anything that is not an object (JSON null, SQL NULL, a string, a number, an array) is
  replaced by one, so a terminal move is never blocked by its reservation write.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rowstate import Binding, DefinitionError, Edge, Guard, Machine
from support.engine import JOBS, Backend, as_dict

IDLE = {"meta.__DR.isJobRunning": Guard((None, False), "JOB_RUNNING")}


def set_json(backend: Backend, table: str, key: str, doc: Any) -> None:
    """Write a JSON document (any JSON value) directly, as another service would."""
    mark = "?::jsonb" if backend.is_pg else "?"
    backend.execute(f'UPDATE "{table}" SET "meta" = {mark} WHERE "id" = ?', json.dumps(doc), key)


# -- guards --------------------------------------------------------------------------------


@pytest.mark.parametrize(("flag", "idle"), [(False, True), (None, True), (0, False),
                                            (1, False), (0.0, False), (True, False),
                                            ("false", False)])
def test_a_json_number_is_not_a_boolean(backend: Backend, flag: Any, idle: bool) -> None:
    """``{"isJobRunning": 0}`` under the guard ``[None, False]``: the dry run said allowed
    (Python's ``0 == False``) while PostgreSQL refused the write, as STATE_MISMATCH."""
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY", meta={"__DR": {"isJobRunning": flag}})

    dry = jobs.can_transition("j1", "FAILED", guards=IDLE)
    res = jobs.transition("j1", "FAILED", guards=IDLE)

    assert (dry.allowed, res.applied) == (idle, idle)
    if not idle:
        assert dry.reasons == ("JOB_RUNNING",)
        assert (res.reason, res.reasons) == ("GUARD_FAILED", ("JOB_RUNNING",))


@pytest.mark.parametrize(("flag", "passes"), [(0, True), (0.0, True), (False, False),
                                              ("0", False)])
def test_a_number_guard_matches_numbers_only(backend: Backend, flag: Any,
                                             passes: bool) -> None:
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY", meta={"__DR": {"isJobRunning": flag}})
    guard = {"meta.__DR.isJobRunning": 0}
    assert jobs.can_transition("j1", "FAILED", guards=guard).allowed is passes
    assert jobs.transition("j1", "FAILED", guards=guard).applied is passes


def test_a_json_string_document_is_not_read_as_its_text(backend: Backend) -> None:
    """A document that is a JSON *string* holding JSON text has no keys: jsonb says so, and
    the Python reader on PostgreSQL's decoded row (a ``str``) must not parse it again."""
    jobs = backend.make(JOBS)
    backend.seed(JOBS, id="j1", state="READY")
    set_json(backend, "jobs", "j1", json.dumps({"__DR": {"isJobRunning": True}}))
    dry = jobs.can_transition("j1", "FAILED", guards=IDLE)
    res = jobs.transition("j1", "FAILED", guards=IDLE)
    assert (dry.allowed, res.applied) == (True, True)


# -- entry writes --------------------------------------------------------------------------

TASK = Machine("task", states=["OPEN", "DONE"], initial="OPEN",
               edges=[Edge("close", "OPEN", "DONE")])
TASKS = Binding(TASK, table="tasks", key="id", json_columns=("meta",),
                on_enter={"DONE": {"meta.flags.running": False}})

NESTED = {
    "other key": ({"other": 1}, {"other": 1, "flags": {"running": False}}),
    "flags kept": ({"flags": {"running": True, "keep": 1}},
                   {"flags": {"running": False, "keep": 1}}),
    "flags null": ({"flags": None}, {"flags": {"running": False}}),
    "flags text": ({"flags": "x", "a": 2}, {"flags": {"running": False}, "a": 2}),
    "flags array": ({"flags": [1]}, {"flags": {"running": False}}),
    "flags number": ({"flags": 5}, {"flags": {"running": False}}),
}


@pytest.mark.parametrize("case", sorted(NESTED))
def test_an_entry_write_creates_the_objects_on_its_path(backend: Backend, case: str) -> None:
    """``meta.flags.running`` on ``{"other": 1}``: PostgreSQL's ``jsonb_set`` creates only
    the last key, so the move applied and left ``meta`` unchanged."""
    before, after = NESTED[case]
    tasks = backend.make(TASKS)
    backend.seed(TASKS, id="t1", state="OPEN")
    set_json(backend, "tasks", "t1", before)

    res = tasks.transition("t1", "DONE")

    assert res.applied
    assert backend.json(as_dict(tasks.get("t1"))["meta"]) == after


NOT_OBJECTS = {"sql null": None, "json null": "null", "string": '"x"', "array": "[1]",
               "number": "5", "true": "true"}


@pytest.mark.parametrize("case", sorted(NOT_OBJECTS))
def test_an_entry_write_replaces_a_document_that_is_not_an_object(backend: Backend,
                                                                  case: str) -> None:
    """On PostgreSQL the move raised ("cannot set path in scalar", "path element ... is
    not an integer") and the row stayed; SQLite applied it and never wrote the flag."""
    tasks = backend.make(TASKS)
    backend.seed(TASKS, id="t1", state="OPEN")
    text = NOT_OBJECTS[case]
    if text is not None:
        mark = "?::jsonb" if backend.is_pg else "?"
        backend.execute(f'UPDATE "tasks" SET "meta" = {mark} WHERE "id" = ?', text, "t1")

    res = tasks.transition("t1", "DONE")

    assert res.applied
    assert backend.json(as_dict(tasks.get("t1"))["meta"]) == {"flags": {"running": False}}


def test_overlapping_entry_writes_are_a_definition_error() -> None:
    """``meta.flags`` and ``meta.flags.running`` in one entry: which lands depends on their
    order, so the binding refuses them when it is built, not on the first move."""
    with pytest.raises(DefinitionError, match="overlap"):
        Binding(TASK, table="tasks", key="id", json_columns=("meta",),
                on_enter={"DONE": {"meta.flags": {}, "meta.flags.running": False}})
