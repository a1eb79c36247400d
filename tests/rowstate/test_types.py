"""One set of Python types on both databases: times come back as aware datetimes and JSON
documents decoded (SQLite stores both as text), a key in the type it went in (its column
declared by ``column_types``; a key of another type is refused at birth, nothing written),
and ``check_schema`` names a NOT NULL column that ``create`` would leave out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from rowstate import (
    NOW,
    Binding,
    Edge,
    Lease,
    Machine,
    SchemaMismatch,
    ValidationError,
)
from support.engine import JOBS, Backend, on

ORDER = Machine("typed_order", states=["NEW", "PAID"], initial="NEW",
                edges=[Edge("pay", "NEW", "PAID", lease="charge"),
                       Edge("refund", "PAID", "NEW")])
ORDERS = Binding(ORDER, table="typed_orders", key=("id",), lease=Lease(),
                 on_enter={"PAID": {"paid_at": NOW}}, json_columns=("meta",),
                 payload=("meta",), column_types={"id": "BIGINT"})
NOTES = Binding(ORDER, table="typed_notes", key=("ref",), lease=Lease())


def _aware(value: Any) -> bool:
    return isinstance(value, datetime) and value.utcoffset() is not None


def test_every_row_a_caller_is_handed_has_aware_times_and_decoded_json(
        backend: Backend) -> None:
    orders = backend.make(ORDERS)
    made = orders.create(1)
    assert made.row is not None and made.row["id"] == 1 and type(made.row["id"]) is int
    claim = orders.claim(1, "pay")
    assert claim.claimed and claim.row is not None and _aware(claim.row["acting_at"])
    done = orders.finalize(1, claim, payload={"meta": {"paid": [1, 2]}})
    assert done.applied and done.row is not None
    assert _aware(done.row["paid_at"]) and done.row["meta"] == {"paid": [1, 2]}
    got = orders.get(1)
    assert got is not None and got == dict(done.row)
    assert abs(got["paid_at"] - datetime.now(UTC)).total_seconds() < 60
    (found,) = orders.find(state="PAID")
    assert found == got
    late = orders.claim(1, "pay")  # refused: the row as it is now
    assert not late.claimed and late.row is not None and _aware(late.row["paid_at"])
    back = orders.transition(1, "NEW")
    assert back.applied and back.row is not None and _aware(back.row["paid_at"])
    again = orders.transition(1, "NEW")
    assert not again.applied and again.row is not None and _aware(again.row["paid_at"])


@on("sync")
def test_a_lease_without_a_token_still_fences_by_its_claim_time(backend: Backend) -> None:
    # the claim time a caller sees is a datetime; the fence compares the stored one
    notes = backend.make(NOTES)
    notes.create("n1")
    seen: list[Any] = []

    def act(lease: Any) -> str:
        seen.append(lease.row["acting_at"])
        with lease.atomic() as tx:
            assert not tx.refused
        return "ok"

    result = notes.run("n1", "pay", act)
    assert result.applied and _aware(seen[0])


@on("sync")
def test_a_key_of_another_type_than_its_column_is_refused_at_birth(backend: Backend) -> None:
    orders, jobs = backend.make(ORDERS), backend.make(JOBS)
    with pytest.raises(ValidationError, match=r"column_types=\{'id': 'BIGINT'\}"):
        jobs.create(7)  # undeclared: a TEXT column, so 7 would come back as '7'
    with pytest.raises(ValidationError, match="holds integers"):
        orders.create("7")
    assert backend.count("jobs") == 0 and backend.count("typed_orders") == 0
    assert jobs.create("7").applied and orders.create(7).applied
    # lookups still take either spelling of one key
    assert jobs.get(7) is not None and orders.get("7") is not None
    assert orders.get(7)["id"] == 7 and jobs.get("7")["id"] == "7"  # type: ignore[index]


@on("sync")
def test_check_schema_names_a_not_null_column_create_would_leave_out(
        backend: Backend) -> None:
    serial = "BIGSERIAL" if backend.is_pg else "INTEGER NOT NULL DEFAULT 0"
    stmts = NOTES.migration_sql(backend.dialect)
    backend.execute(f"CREATE TABLE typed_notes (ref TEXT PRIMARY KEY, n {serial} NOT NULL, "
                    "note TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'x')")
    for statement in stmts:
        backend.execute(statement)
    with pytest.raises(SchemaMismatch) as caught:
        NOTES.check_schema(backend.store)
    (problem,) = caught.value.problems
    assert problem.startswith("typed_notes.note: NOT NULL without a default")
    assert "the binding does not name it" in problem
    notes = backend.make(NOTES)
    with pytest.raises(Exception, match="note"):  # what create does meanwhile
        notes.create("n1")
    backend.execute("ALTER TABLE typed_notes DROP COLUMN note")
    NOTES.check_schema(backend.store)
    assert notes.create("n1").applied


@on("postgres-sync")
def test_check_schema_names_an_engine_column_made_not_null(backend: Backend) -> None:
    backend.make(NOTES)
    backend.execute('ALTER TABLE typed_notes ALTER COLUMN "acting_at" SET NOT NULL')
    with pytest.raises(SchemaMismatch, match="acting_at: NOT NULL without a default, and "
                                             "create leaves it out"):
        NOTES.check_schema(backend.store)
