"""The generic guard of "the ask and the do cannot diverge": a differential test.

A condition tree has two readers (:mod:`rowstate.conditions`): ``render`` (the SQL of the
write, one per database) and ``evaluate`` (Python: the dry run and the diagnosis of a
refusal). Hypothesis draws random trees (guards over plain columns and over JSON paths,
null-aware lists, numbers including 0 and 1, booleans, strings, nulls, missing keys,
non-object documents, nested paths, combined with AND, OR and NOT) and random rows; for
every (tree, row) pair the SQL reader on SQLite, the SQL reader on PostgreSQL and the Python
reader (on the row as each database hands it back) must give the same verdict.

The entry writes get the same treatment: random JSON documents (including SQL NULL, JSON
null, strings, numbers and arrays, and objects whose inner levels are not objects) with
random writes to JSON paths (a reservation field such as ``__DR.flags.running``), applied by
the compiled SET on both databases, must all give the document :func:`expected_document`
states, and never an error.

The default run is short (``SHORT``); the ``slow`` variants (``make chaos``) draw
``ROWSTATE_DIFF_EXAMPLES`` (default 3000) examples each.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from rowstate import Binding, Edge, Machine
from rowstate.compiler import Compiler, Statement
from rowstate.conditions import (
    And,
    Const,
    In,
    IsNull,
    Node,
    Not,
    Or,
    Ref,
    RowView,
    Same,
    Slot,
    SqlOut,
    evaluate,
    render,
)
from rowstate.dialects import Dialect, Postgres, SQLite

_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
           HealthCheck.data_too_large]
SHORT = settings(max_examples=150, deadline=None, suppress_health_check=_HEALTH)
LONG_EXAMPLES = int(os.environ.get("ROWSTATE_DIFF_EXAMPLES", "") or 3000)
LONG = settings(max_examples=LONG_EXAMPLES, deadline=None, suppress_health_check=_HEALTH)
# pytest-timeout's limit for a long run, from its size (an example takes ~20-60 ms, more on
# a loaded machine; the default limit is 300 s)
LONG_TIMEOUT = pytest.mark.timeout(int(LONG_EXAMPLES * 0.25) + 300)

# -- what is drawn -------------------------------------------------------------------------

KEYS = ("a", "b")  # few keys, so that paths often meet what the documents hold


class _SqlNull:
    def __repr__(self) -> str:
        return "SQL_NULL"


SQL_NULL: Any = _SqlNull()  # the column is SQL NULL (not the JSON document ``null``)

# the values where the readers' rules part: 0/1 and false/true, 1 and 1.0, "1" and 1
TRICKY = [0, 1, False, True, 0.0, 1.0, "0", "1", "true", "false", "", "{}", "null"]
numbers = st.one_of(st.sampled_from([0, 1, -1, 2, 10**12]), st.integers(-3, 3),
                    st.sampled_from([0.0, 1.0, -0.0, 0.5, 2.5, -1.0]))
# strings that look like other JSON values, or like JSON text
strings = st.one_of(st.sampled_from(["", "0", "1", "1.0", "true", "false", "null", "x", "{}",
                                     "[]", '{"a": 1}', '{"a":1}', "[1]", '"x"']),
                    st.text(alphabet="ab01 é", max_size=3))
guard_scalars = st.one_of(st.sampled_from(TRICKY), st.booleans(), numbers, strings)
json_scalars = st.one_of(st.none(), guard_scalars)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(KEYS), kids,
                                                              max_size=3),
    max_leaves=8,
)
objects = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3)
documents = st.one_of(objects, objects, json_values, st.just(SQL_NULL))
paths = st.one_of(st.tuples(st.sampled_from(KEYS)),
                  st.lists(st.sampled_from(KEYS), min_size=1, max_size=3).map(tuple))

# the plain columns and the values of their types (SQLite keeps b as the integers 0/1)
PLAIN: Mapping[str, st.SearchStrategy[Any]] = {
    "n": st.one_of(st.integers(-3, 3), st.sampled_from([0.0, 1.0, 0.5])),
    "s": strings,
    "b": st.booleans(),
}
PLAIN_STORED: Mapping[str, st.SearchStrategy[Any]] = {
    "n": st.none() | st.integers(-3, 3),
    "s": st.none() | strings,
    "b": st.none() | st.booleans(),
}


@st.composite
def leaves(draw: st.DrawFn) -> Node:
    """A leaf with its values as constants (``bind`` turns them into the slots a guard
    uses): a null-aware ``In``, an ``IsNull``, or a null-safe ``Same`` on a plain column."""
    if draw(st.booleans()):
        ref = Ref("doc", draw(paths))
        values = draw(st.lists(st.sampled_from(TRICKY) | guard_scalars, max_size=3))
    else:
        column = draw(st.sampled_from(sorted(PLAIN)))
        ref = Ref(column)
        values = draw(st.lists(PLAIN[column], max_size=3))
        if draw(st.integers(0, 5)) == 0:
            return Same(ref, Const(draw(st.none() | PLAIN[column])))
    if draw(st.integers(0, 5)) == 0:
        return IsNull(ref)
    nullable = draw(st.booleans()) or not values
    return In(ref, tuple(Const(v) for v in values), nullable)


trees = st.recursive(
    leaves(),
    lambda kids: st.one_of(
        st.lists(kids, min_size=1, max_size=3).map(lambda p: And(tuple(p))),
        st.lists(kids, min_size=1, max_size=3).map(lambda p: Or(tuple(p))),
        kids.map(Not),
    ),
    max_leaves=4,
)


def _json_paths(node: Node) -> list[tuple[tuple[str, ...], tuple[Any, ...]]]:
    """The JSON paths a tree reads, each with the values it compares there."""
    match node:
        case In(ref, vals, _) if ref.path:
            return [(ref.path, tuple(v.value for v in vals if isinstance(v, Const)))]
        case IsNull(ref) if ref.path:
            return [(ref.path, ())]
        case And(parts) | Or(parts):
            return [p for part in parts for p in _json_paths(part)]
        case Not(part):
            return _json_paths(part)
    return []


def twins(value: Any) -> list[Any]:
    """Values another type's rule would call equal to ``value`` (Python's ``0 == False``,
    SQLite's 1 for true, ``1.0`` for ``1``, text that spells the value), the likelier
    first."""
    if isinstance(value, bool):
        return [int(value), int(value), float(value), json.dumps(value)]
    if isinstance(value, int | float):
        flags = [bool(value)] * 2 if value in (0, 1) else []
        return [*flags, float(value), str(value)]
    try:
        parsed = json.loads(value)
    except ValueError:
        return [value]
    return [parsed, value]


@st.composite
def cases(draw: st.DrawFn, max_rows: int) -> tuple[Node, list[dict[str, Any]]]:
    """A tree and rows for it. Most documents get a tricky value planted at one of the
    tree's paths (or a non-object on the way to it), so that guards meet what they test;
    some become a JSON string holding the text of a document (a string, not an object)."""
    tree = draw(trees)
    targets = _json_paths(tree)
    table = []
    for _ in range(draw(st.integers(1, max_rows))):
        row = {c: draw(s) for c, s in PLAIN_STORED.items()}
        doc = draw(documents)
        for _ in range(draw(st.sampled_from([0, 1, 1, 2])) if targets else 0):
            path, compared = draw(st.sampled_from(targets))
            cut = draw(st.sampled_from([len(path)] * 4 + list(range(1, len(path)))))
            near = st.sampled_from([t for v in compared for t in twins(v)] or TRICKY)
            planted = draw(st.one_of(near, near, near, st.sampled_from(TRICKY), json_values))
            doc = _put(None if doc is SQL_NULL else doc, path[:cut], planted)
        if doc is not SQL_NULL and draw(st.integers(0, 5)) == 0:
            doc = json.dumps(doc)  # a JSON string document whose text is a document
        row["doc"] = doc
        table.append(row)
    return tree, table


def bind(node: Node, values: dict[str, Any]) -> Node:
    """``node`` with each constant replaced by a slot, as the engine builds guards: a slot
    compared inside a JSON document is a JSON slot."""
    match node:
        case In(ref, vals, nullable):
            slots = []
            for v in vals:
                name = f"v{len(values)}"
                values[name] = v.value if isinstance(v, Const) else None
                slots.append(Slot(name, json=bool(ref.path)))
            return In(ref, tuple(slots), nullable)
        case Same(ref, v):
            name = f"v{len(values)}"
            values[name] = v.value if isinstance(v, Const) else None
            return Same(ref, Slot(name, json=bool(ref.path)))
        case And(parts):
            return And(tuple(bind(p, values) for p in parts))
        case Or(parts):
            return Or(tuple(bind(p, values) for p in parts))
        case Not(part):
            return Not(bind(part, values))
    return node


# -- the databases -------------------------------------------------------------------------


class Databases:
    """One SQLite and one PostgreSQL database with the same table ``t``."""

    def __init__(self, pg_conninfo: str) -> None:
        self.lite = sqlite3.connect(":memory:", isolation_level=None)
        self.lite.execute('CREATE TABLE "t" ("id" INTEGER PRIMARY KEY, "doc" TEXT, '
                          '"n" INTEGER, "s" TEXT, "b" INTEGER)')
        self.pg = psycopg.connect(pg_conninfo, autocommit=True)
        self.pg.execute('CREATE TABLE "t" ("id" BIGINT PRIMARY KEY, "doc" JSONB, '
                        '"n" BIGINT, "s" TEXT, "b" BOOLEAN)')
        self.dialects: tuple[tuple[str, Dialect], ...] = (
            ("sqlite", SQLite()), ("postgresql", Postgres()))

    def close(self) -> None:
        self.lite.close()
        self.pg.close()

    def load(self, rows: list[dict[str, Any]]) -> None:
        self.lite.execute('DELETE FROM "t"')
        self.pg.execute('DELETE FROM "t"')
        for i, row in enumerate(rows):
            doc = row["doc"]
            self.lite.execute('INSERT INTO "t" VALUES (?, ?, ?, ?, ?)', (
                i, None if doc is SQL_NULL else json.dumps(doc), row["n"], row["s"],
                row["b"]))
            self.pg.execute('INSERT INTO "t" VALUES (%s, %s, %s, %s, %s)', (
                i, None if doc is SQL_NULL else Jsonb(doc), row["n"], row["s"], row["b"]))

    def run(self, name: str, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        if name == "sqlite":
            return self.lite.execute(sql, params).fetchall()
        cur = self.pg.execute(sql, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []

    def rows(self, name: str) -> list[dict[str, Any]]:
        got = self.run(name, 'SELECT "id", "doc", "n", "s", "b" FROM "t" ORDER BY "id"', [])
        return [dict(zip(("id", "doc", "n", "s", "b"), r, strict=True)) for r in got]


@pytest.fixture
def dbs(engine_pg_schema: str) -> Iterator[Databases]:
    """A fresh schema of the session's engine database (as the engine tests get theirs):
    milliseconds, where a database per test costs ~0.4 s to create and more to drop."""
    made = Databases(engine_pg_schema)
    try:
        yield made
    finally:
        made.close()


NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def verdicts(dbs: Databases, tree: Node, values: dict[str, Any],
             rows: Mapping[str, list[dict[str, Any]]] | None = None) -> dict[str, set[int]]:
    """Which rows each reader says the tree holds for: the SQL reader on each database and
    the Python reader on the rows as that database hands them back (``rows``, read once
    per table when several trees are checked against it)."""
    out: dict[str, set[int]] = {}
    for name, d in dbs.dialects:
        sql_out = SqlOut()
        cond = render(tree, d, None, sql_out)
        stmt = Statement(f'SELECT "id" FROM "t" WHERE {cond}', tuple(sql_out.params))
        sql, params = stmt.bind(d, values)
        out[f"sql on {name}"] = {r[0] for r in dbs.run(name, sql, params)}
        read = rows[name] if rows is not None else dbs.rows(name)
        out[f"python on {name}"] = {
            r["id"] for r in read
            if evaluate(tree, RowView(r, values, NOW, d.parse_time, d.load_json))}
    return out


def subtrees(node: Node) -> Iterator[Node]:
    """The node and every node below it, leaves first: each must agree on its own (a
    disagreement at a leaf can be hidden at the root by an AND or an OR around it)."""
    match node:
        case And(parts) | Or(parts):
            for part in parts:
                yield from subtrees(part)
        case Not(part):
            yield from subtrees(part)
    yield node


def check_conditions(dbs: Databases, tree: Node, table: list[dict[str, Any]]) -> None:
    values: dict[str, Any] = {}
    bound = bind(tree, values)
    dbs.load(table)
    rows = {name: dbs.rows(name) for name, _ in dbs.dialects}
    for node in subtrees(bound):
        got = verdicts(dbs, node, values, rows)
        first = next(iter(got.values()))
        assert all(v == first for v in got.values()), (
            f"readers disagree on {node!r} with values {values!r} over rows {table!r}: "
            f"{got!r}")


Case = tuple[Node, list[dict[str, Any]]]


@SHORT
@given(case=cases(max_rows=6))
def test_both_readers_agree_on_both_databases(dbs: Databases, case: Case) -> None:
    check_conditions(dbs, *case)


@pytest.mark.slow
@LONG_TIMEOUT
@LONG
@given(case=cases(max_rows=8))
def test_both_readers_agree_on_both_databases_long(dbs: Databases, case: Case) -> None:
    check_conditions(dbs, *case)


# -- entry writes --------------------------------------------------------------------------

_M = Machine("diff", states=["A", "B"], initial="A", edges=[Edge("go", "A", "B")])
BINDING = Binding(_M, table="t", key="id", json_columns=("doc",), columns=("n", "s", "b"),
                  events=None)


def expected_document(doc: Any, writes: list[tuple[tuple[str, ...], Any]]) -> Any:
    """The rule, stated on its own: each write sets its path, and whatever is on the way
    and is not an object (SQL NULL, JSON null, a string, a number, an array, a missing
    key) becomes an object first."""
    for path, value in writes:
        doc = _put(doc, path, value)
    return doc


def _put(doc: Any, path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = dict(doc) if isinstance(doc, dict) else {}
    out[path[0]] = _put(out.get(path[0]), path[1:], value) if len(path) > 1 else value
    return out


def strict(value: Any) -> Any:
    """A value in a form whose equality is JSON's (``1`` is ``1.0``, ``True`` is not ``1``),
    for comparing documents: Python's ``{"a": 1} == {"a": True}`` is true."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(strict(v) for v in value))
    if isinstance(value, dict):
        return ("object", tuple(sorted((k, strict(v)) for k, v in value.items())))
    return ("other", value)


def _disjoint(writes: list[tuple[tuple[str, ...], Any]]) -> bool:
    ps = [p for p, _ in writes]
    return all(a == b or (a[: len(b)] != b and b[: len(a)] != a) for a in ps for b in ps)


write_sets = st.lists(st.tuples(paths, st.one_of(st.booleans(), json_values)), min_size=1,
                      max_size=3).filter(_disjoint)


def check_writes(dbs: Databases, docs: list[Any],
                 writes: list[tuple[tuple[str, ...], Any]]) -> None:
    dbs.load([{"doc": d, "n": None, "s": None, "b": None} for d in docs])
    entry = {".".join(("doc", *p)): v for p, v in writes}
    for name, d in dbs.dialects:
        ((column, expr, params),) = Compiler(BINDING, d).entry_sets(entry, None)
        key = d.value(Slot("k0"), SqlOut())
        stmt = Statement(f'UPDATE "t" SET "{column}" = {expr} WHERE "id" = {key}',
                         (*params, Slot("k0")))
        for i, doc in enumerate(docs):
            sql, bound = stmt.bind(d, {"k0": i})
            try:
                dbs.run(name, sql, bound)
            except (sqlite3.Error, psycopg.Error) as exc:
                pytest.fail(f"{name}: writing {entry!r} into {doc!r} raised {exc!r}")
        for i, row in enumerate(dbs.rows(name)):
            got = json.loads(row["doc"]) if name == "sqlite" else row["doc"]
            want = expected_document(None if docs[i] is SQL_NULL else docs[i], writes)
            assert strict(got) == strict(want), (
                f"{name}: writing {entry!r} into {docs[i]!r} gave {got!r}, not {want!r}")


@SHORT
@given(docs=st.lists(documents, min_size=1, max_size=4), writes=write_sets)
def test_entry_writes_agree_on_both_databases(dbs: Databases, docs: list[Any],
                                              writes: list[tuple[tuple[str, ...], Any]],
                                              ) -> None:
    check_writes(dbs, docs, writes)


@pytest.mark.slow
@LONG_TIMEOUT
@LONG
@given(docs=st.lists(documents, min_size=1, max_size=6), writes=write_sets)
def test_entry_writes_agree_on_both_databases_long(dbs: Databases, docs: list[Any],
                                                   writes: list[tuple[tuple[str, ...], Any]],
                                                   ) -> None:
    check_writes(dbs, docs, writes)


# -- the counter-examples the differential test found, kept as plain regressions -----------


@pytest.mark.parametrize(("tree", "values", "doc"), [
    # a JSON number is not a boolean: PostgreSQL said no, SQLite and Python said yes
    (In(Ref("doc", ("a",)), (Slot("v", json=True),)), {"v": False}, {"a": 0}),
    (In(Ref("doc", ("a",)), (Slot("v", json=True),)), {"v": True}, {"a": 1}),
    (In(Ref("doc", ("a",)), (Slot("v", json=True),)), {"v": 0}, {"a": False}),
    # an object is not the string of its text (SQLite's json_extract returns the text)
    (In(Ref("doc", ("a",)), (Slot("v", json=True),)), {"v": "{}"}, {"a": {}}),
    # NOT of a comparison with a missing key: SQL's unknown was read as false
    (Not(In(Ref("doc", ("a",)), (Slot("v", json=True),))), {"v": False}, {}),
    # a JSON string document holding JSON text has no keys (PostgreSQL's row is a str)
    (IsNull(Ref("doc", ("a",))), {}, json.dumps({"a": 0})),
])
def test_the_found_disagreements(dbs: Databases, tree: Node, values: dict[str, Any],
                                 doc: Any) -> None:
    dbs.load([{"doc": doc, "n": None, "s": None, "b": None}])
    got = verdicts(dbs, tree, values)
    assert len({frozenset(v) for v in got.values()}) == 1, got
