"""One rule per value kind, the same on SQLite and PostgreSQL (docs/values.md).

A value that either database would refuse (or store differently) is refused as a
:class:`~rowstate.ValidationError` before any statement runs: above all before run()'s
claim, so that an act is never performed for a move whose finalize could not land. Every
value the rules accept is stored on both databases, and reads back the same.

The rules are pure functions of a value (rowstate.values), checked by the core both twins
drive: the doomed values are ``@refused_before_io``, on one backend inside ``no_io()``,
which proves that no statement was handed to the store. The contrib stores run one test by
default (``@conformance``): test_every_accepted_kind_is_stored_on_both_databases, every
kind of value bound and read back by the store's driver.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from rowstate import ActiveLease, Binding, Edge, Lease, Machine, ValidationError
from support.engine import Backend, as_dict, conformance, refused_before_io

VAL = Machine("vals", states=["READY", "SHIPPED", "DONE"], initial="READY",
              edges=[Edge("ship", "READY", "SHIPPED", lease="ship"),
                     Edge("finish", "READY", "DONE")])
PAYLOAD = ("txt", "num", "real", "amount", "at", "day", "clock", "span", "uid", "blob", "doc",
           "count")
VALS = Binding(
    VAL, table="vals", key=("id",), version="version",
    lease=Lease(at="lease_at", kind="lease_kind", token="lease_token", error="last_error"),
    payload=PAYLOAD, json_columns=("doc",),
    column_types={"num": "BIGINT", "real": "DOUBLE PRECISION", "amount": "NUMERIC",
                  "at": "TIMESTAMPTZ", "day": "DATE", "clock": "TIME", "span": "INTERVAL",
                  "uid": "UUID", "blob": "BYTEA", "count": "INTEGER"},
)


def nested(depth: int, leaf: Any = 1) -> Any:
    """A JSON document ``depth`` containers deep (arrays and objects in turn)."""
    doc = leaf
    for i in range(depth):
        doc = [doc] if i % 2 else {"k": doc}
    return doc


BIG = 1_000_001
# (call parts, what makes them doomed): each alone is a ValidationError before any I/O
DOOMED: list[tuple[str, dict[str, Any]]] = [
    ("text with NUL", {"payload": {"txt": "a\x00b"}}),
    ("text with a lone surrogate", {"payload": {"txt": "a\ud800"}}),
    ("text over 1 MB", {"payload": {"txt": "x" * BIG}}),
    ("int >= 2**63", {"payload": {"num": 2**63}}),
    ("int < -2**63", {"payload": {"num": -(2**63) - 1}}),
    ("NaN", {"payload": {"real": math.nan}}),
    ("inf", {"payload": {"real": math.inf}}),
    ("-inf", {"payload": {"real": -math.inf}}),
    ("Decimal NaN", {"payload": {"amount": Decimal("NaN")}}),
    ("Decimal Infinity", {"payload": {"amount": Decimal("-Infinity")}}),
    ("Decimal beyond numeric", {"payload": {"amount": Decimal("1E+200000")}}),
    ("naive datetime", {"payload": {"at": datetime(2026, 1, 1, 12, 0)}}),
    ("datetime outside years 1-9999 in UTC",
     {"payload": {"at": datetime(1, 1, 1, 1, tzinfo=timezone(timedelta(hours=5)))}}),
    ("bytes over 1 MB", {"payload": {"blob": b"x" * BIG}}),
    ("a set", {"payload": {"txt": {"a"}}}),
    ("JSON payload: NUL nested", {"payload": {"doc": {"a": ["x\x00"]}}}),
    ("JSON payload: NUL in a key", {"payload": {"doc": {"a\x00": 1}}}),
    ("JSON payload: lone surrogate", {"payload": {"doc": {"a": "\udc80"}}}),
    ("JSON payload: int beyond 64-bit", {"payload": {"doc": {"a": 2**64}}}),
    ("JSON payload: inf", {"payload": {"doc": [math.inf]}}),
    ("JSON payload: a non-string key", {"payload": {"doc": {1: "a"}}}),
    ("JSON payload: 65 levels", {"payload": {"doc": nested(65)}}),
    ("JSON payload: 5000 levels", {"payload": {"doc": nested(5000)}}),
    ("JSON payload: over 1 MB", {"payload": {"doc": {"a": "x" * BIG}}}),
    ("BIGINT column: a bool", {"payload": {"num": True}}),
    ("BIGINT column: a float", {"payload": {"num": 1.5}}),
    ("BIGINT column: text that is not an integer", {"payload": {"num": "x"}}),
    ("BIGINT column: decimal text beyond 64-bit", {"payload": {"num": "9" * 19}}),
    ("INTEGER column: beyond 32-bit", {"payload": {"count": 2**31}}),
    ("DOUBLE column: a bool", {"payload": {"real": False}}),
    ("TIMESTAMPTZ column: text", {"payload": {"at": "2026-01-01"}}),
    ("DATE column: a datetime", {"payload": {"day": datetime(2026, 1, 1, tzinfo=UTC)}}),
    ("UUID column: text", {"payload": {"uid": "not-a-uuid"}}),
    ("BYTEA column: text", {"payload": {"blob": "text"}}),
    ("INTERVAL column: a number", {"payload": {"span": 5}}),
    ("JSON column: a number", {"payload": {"doc": 5}}),
    ("JSON column: a boolean", {"payload": {"doc": True}}),
    ("JSON column: text that is not JSON", {"payload": {"doc": "x"}}),
    ("JSON column: JSON text with a NUL escape", {"payload": {"doc": '{"a": "\\u0000"}'}}),
    ("JSON column: JSON text with NaN", {"payload": {"doc": "[NaN]"}}),
    ("JSON column: JSON text with a duplicate key", {"payload": {"doc": '{"a": 1, "a": 2}'}}),
    ("JSON column: JSON text 5000 deep", {"payload": {"doc": "[" * 5000 + "]" * 5000}}),
    ("data: NUL nested", {"data": {"a": {"b": "\x00"}}}),
    ("data: lone surrogate", {"data": {"s": "\ud800"}}),
    ("data: int beyond 64-bit", {"data": {"n": -(2**63) - 1}}),
    ("data: NaN", {"data": {"f": math.nan}}),
    ("data: 65 levels", {"data": nested(65)}),
    ("data: 5000 levels", {"data": nested(5000)}),
    ("data: over 1 MB", {"data": ["x" * BIG]}),
    ("data: not JSON", {"data": {"at": datetime(2026, 1, 1, tzinfo=UTC)}}),
    ("guard: inf", {"guards": {"txt": math.inf}}),
    ("guard on a JSON path: inf", {"guards": {"doc.a": -math.inf}}),
    ("guard: lone surrogate", {"guards": {"txt": "\ud800"}}),
    ("guard on a JSON path: int beyond 64-bit", {"guards": {"doc.a": 2**63}}),
    ("holder: lone surrogate", {"holder": "w\udfff"}),
]
IDS = [name for name, _ in DOOMED]


def _seeded(backend: Backend) -> Any:
    vals = backend.make(VALS)
    backend.seed(VALS, id="v1", state="READY")
    return vals


def _untouched(backend: Backend, before: list[tuple[Any, ...]]) -> None:
    assert backend.rows(VALS) == before
    assert backend.count("rowstate_events") == 0


@refused_before_io
@pytest.mark.parametrize(("name", "parts"), DOOMED, ids=IDS)
def test_run_never_acts_for_a_doomed_value(backend: Backend, name: str,
                                           parts: dict[str, Any]) -> None:
    vals = _seeded(backend)
    before = backend.rows(VALS)
    acts: list[ActiveLease] = []

    def act(lease: ActiveLease) -> bool:
        acts.append(lease)
        return True

    with backend.no_io(), pytest.raises(ValidationError):
        vals.run("v1", "ship", act, **parts)
    assert acts == [], f"the act ran for a doomed {name}"
    _untouched(backend, before)


@refused_before_io
@pytest.mark.parametrize(("name", "parts"), [d for d in DOOMED if "holder" not in d[1]],
                         ids=[n for n, p in DOOMED if "holder" not in p])
def test_transition_refuses_a_doomed_value_before_any_statement(
        backend: Backend, name: str, parts: dict[str, Any]) -> None:
    vals = _seeded(backend)
    before = backend.rows(VALS)
    with backend.no_io(), pytest.raises(ValidationError):
        vals.transition("v1", "DONE", **parts)
    _untouched(backend, before)


@refused_before_io
@pytest.mark.parametrize("key", ["v\ud800", "v\x00", 2**63, 1.5, None, True],
                         ids=["surrogate", "NUL", "int64+", "float", "None", "bool"])
def test_a_doomed_key_is_refused_before_any_statement(backend: Backend, key: Any) -> None:
    vals = _seeded(backend)
    before = backend.rows(VALS)
    with backend.no_io():
        with pytest.raises(ValidationError):
            vals.run(key, "ship", lambda lease: pytest.fail("acted"))
        with pytest.raises(ValidationError):
            vals.get(key)
    _untouched(backend, before)


ACCEPTED: dict[str, Any] = {
    "txt": "é \u2603 \U0001f600 " + "x" * 1000,
    "num": -(2**63),
    "real": -0.5,
    "amount": Decimal("1234.125"),  # exact in a float: SQLite NUMERIC affinity converts
    "at": datetime(2026, 3, 1, 12, 30, 15, 250000, tzinfo=timezone(timedelta(hours=2))),
    "day": date(2026, 3, 1),
    "clock": time(12, 30, 15),
    "span": timedelta(days=2, seconds=5),
    "uid": UUID("12345678-1234-5678-1234-567812345678"),
    "blob": b"\x00\xff binary",
    "doc": {"deep": nested(62, "leaf"), "n": 2**63 - 1, "f": 1.5, "none": None,
            "list": [True, False, "\u2603"]},
}


@conformance
def test_every_accepted_kind_is_stored_on_both_databases(backend: Backend) -> None:
    vals = _seeded(backend)
    data = {"depth": nested(63), "n": -(2**63), "s": "\u2603"}
    res = vals.run("v1", "ship", lambda lease: True, payload=ACCEPTED, data=data)
    assert res.applied, res
    row = vals.get("v1")
    assert row is not None
    assert row["txt"] == ACCEPTED["txt"] and row["num"] == ACCEPTED["num"]
    assert row["real"] == ACCEPTED["real"]
    assert Decimal(str(row["amount"])) == ACCEPTED["amount"]
    assert backend.json(row["doc"]) == ACCEPTED["doc"]
    assert bytes(row["blob"]) == ACCEPTED["blob"]
    assert str(row["uid"]) == str(ACCEPTED["uid"])
    assert backend.time(row["at"]) == ACCEPTED["at"]
    [event] = vals.history("v1")
    assert event.data == data


def test_json_text_for_a_json_column_is_the_same_document_on_both(backend: Backend) -> None:
    vals = _seeded(backend)
    assert vals.transition("v1", "DONE", payload={"doc": '{"a": [1, "\u2603"]}'}).applied
    assert backend.json(as_dict(vals.get("v1"))["doc"]) == {"a": [1, "\u2603"]}


def test_decimal_text_for_an_integer_column_is_stored_as_the_integer(backend: Backend) -> None:
    vals = _seeded(backend)
    assert vals.transition("v1", "DONE", payload={"num": "-42", "count": 2**31 - 1}).applied
    row = as_dict(vals.get("v1"))
    assert (row["num"], row["count"]) == (-42, 2**31 - 1)


class ActError(Exception):
    pass


def test_an_acts_error_text_with_nul_still_releases_the_lease(backend: Backend) -> None:
    """The release stamps the act's exception text as ``last_error``: text the engine
    writes itself is escaped, never refused, or the release would fail (on PostgreSQL) and
    the lease stay held for its TTL."""
    vals = _seeded(backend)

    def act(lease: ActiveLease) -> bool:
        raise ActError("bad\x00 byte, lone \ud800")

    with pytest.raises(ActError):
        vals.run("v1", "ship", act)
    row = as_dict(vals.get("v1"))
    assert (row["state"], row["lease_at"], row["lease_kind"]) == ("READY", None, None)
    assert row["last_error"] == "ActError: bad\\x00 byte, lone \\ud800"
