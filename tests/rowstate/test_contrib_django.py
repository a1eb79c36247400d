"""The Django door (rowstate.contrib.django) where it differs from every store: units that
are savepoints of the app's ``transaction.atomic()``, publication on ``on_commit``, and a
binding over an existing model's table with no field or mixin; on an SQLite file and a real
PostgreSQL, Django configured in the test (support.contrib_stores). The engine's behaviour
on the store is the four-backend suite's (tests/rowstate/conftest.py runs it on it)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from support.contrib_stores import add_django_alias, django_configured, remove_django_alias

django_configured()  # before the models below are defined

from django.db import IntegrityError, connections, models, transaction  # noqa: E402

from rowstate import Edge, Lifecycle, Machine, Unique  # noqa: E402
from rowstate.contrib.dbapi import translate  # noqa: E402
from rowstate.contrib.django import DjangoStore, binding_for  # noqa: E402
from rowstate.errors import (  # noqa: E402
    InvariantViolation,
    StoreError,
    UnitRefusedError,
    UsageError,
)


class Customer(models.Model):
    name = models.CharField(max_length=40)

    class Meta:
        app_label = "rowstate_django_tests"
        db_table = "shop_customers"


class Order(models.Model):
    """An app's model as it is: a plain CharField holds the state; nothing of rowstate's."""

    state = models.CharField(max_length=20, default="NEW")
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE)
    total = models.IntegerField(default=0)

    class Meta:
        app_label = "rowstate_django_tests"
        db_table = "shop_orders"


class Note(models.Model):
    order_id = models.IntegerField()
    text = models.CharField(max_length=40, unique=True)

    class Meta:
        app_label = "rowstate_django_tests"
        db_table = "shop_notes"


ORDER = Machine("order", states=["NEW", "PAID", "SHIPPED", "CANCELLED"], initial="NEW",
                edges=[Edge("pay", "NEW", "PAID"), Edge("ship", "PAID", "SHIPPED"),
                       Edge("cancel", "NEW", "CANCELLED")])
# one paid, unshipped order per customer; no events table: published in process
ORDERS = binding_for(Order, ORDER, state="state", version="version",
                     columns=("customer", "total"), events=None,
                     invariants=(Unique("PAID", per=("customer_id",)),))


class Shop:
    """One test's database: a Django alias, the app's tables made by Django's schema
    editor, the engine's columns by the binding's migration SQL, and the lifecycle."""

    def __init__(self, db: str, where: str) -> None:
        self.alias = add_django_alias(db, where)
        self.store = DjangoStore(self.alias)
        with connections[self.alias].schema_editor() as editor:
            for model in (Customer, Order, Note):
                editor.create_model(model)
        existing = ("id", "state", "customer_id", "total")
        self.store.execute_script(";\n".join(
            ORDERS.migration_sql(self.store.dialect, existing=existing)))
        self.seen: list[tuple[str, str | None]] = []
        self.orders = Lifecycle(self.store, ORDERS, publishers=[self._published])
        self.orders.check_schema()
        self.ann = Customer.objects.using(self.alias).create(name="ann")

    def _published(self, event: Any) -> None:
        """The event, and the row's state as the store reads it at that moment."""
        self.seen.append((event.to_state, self.orders.state(event.key[0])))

    def order(self) -> int:
        pk: int = Order.objects.using(self.alias).create(customer=self.ann, total=5).pk
        return pk

    def notes(self) -> list[str]:
        return sorted(Note.objects.using(self.alias).values_list("text", flat=True))

    def close(self) -> None:
        self.store.close()
        remove_django_alias(self.alias)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shop(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Shop]:
    if request.param == "sqlite":
        where = f"{tmp_path}/shop.db"
    else:
        where = str(request.getfixturevalue("engine_pg_schema"))
    made = Shop(request.param, where)
    try:
        yield made
    finally:
        made.close()


def test_binding_for_reads_the_models_table_and_adds_nothing_to_the_model() -> None:
    assert ORDERS.table == "shop_orders" and ORDERS.key == ("id",)
    assert ORDERS.state == "state" and ORDERS.columns == ("customer_id", "total")
    assert ORDERS.key_kinds == ("int",)  # an AutoField key binds as an integer
    assert sorted(f.name for f in Order._meta.get_fields()) == [
        "customer", "id", "state", "total"]  # no field, mixin or manager of rowstate's


def test_a_unit_inside_the_apps_atomic_block_commits_with_it(shop: Shop) -> None:
    pk = shop.order()
    with transaction.atomic(using=shop.alias):
        Note.objects.using(shop.alias).create(order_id=pk, text="paid by card")
        with shop.orders.atomic():
            paid = shop.orders.transition(pk, "PAID", by="ann", note="card")
            assert paid.event is not None and (paid.event.by, paid.event.note) == (
                "ann", "card")
        assert shop.seen == []  # published on the outermost commit, not before
    assert shop.seen == [("PAID", "PAID")]
    assert shop.notes() == ["paid by card"]
    row = shop.orders.get(pk)
    assert row is not None and row["customer_id"] == shop.ann.pk and row["version"] == 1
    assert Order.objects.using(shop.alias).get(pk=pk).state == "PAID"  # the ORM reads it


def test_a_rollback_undoes_both_and_publishes_nothing(shop: Shop) -> None:
    pk = shop.order()
    with pytest.raises(RuntimeError), transaction.atomic(using=shop.alias):
        Note.objects.using(shop.alias).create(order_id=pk, text="a")
        with shop.orders.atomic():
            assert shop.orders.transition(pk, "PAID").applied
        raise RuntimeError("the view fails after the move")
    assert shop.orders.state(pk) == "NEW" and shop.notes() == [] and shop.seen == []

    # a Django savepoint around the unit rolls back alone, and its callbacks with it
    with transaction.atomic(using=shop.alias):
        Note.objects.using(shop.alias).create(order_id=pk, text="kept")
        with pytest.raises(KeyError), transaction.atomic(using=shop.alias):
            with shop.orders.atomic():
                assert shop.orders.transition(pk, "PAID").applied
            raise KeyError("inner only")
    assert shop.orders.state(pk) == "NEW" and shop.notes() == ["kept"] and shop.seen == []

    # a bare move inside the block joins the app's transaction too
    with pytest.raises(RuntimeError), transaction.atomic(using=shop.alias):
        assert shop.orders.transition(pk, "CANCELLED").applied
        raise RuntimeError("undone")
    assert shop.orders.state(pk) == "NEW"


def test_a_refusal_inside_does_not_poison_the_apps_transaction(shop: Shop) -> None:
    first, second = shop.order(), shop.order()
    assert shop.orders.transition(first, "PAID").applied
    with transaction.atomic(using=shop.alias):
        Note.objects.using(shop.alias).create(order_id=second, text="ann")
        with shop.orders.atomic():
            # one paid order per customer: a refused UNIQUE invariant, which on PostgreSQL
            # would abort the app's transaction but for the unit's savepoint
            assert shop.orders.transition(second, "PAID").reason == "INVARIANT"
        with shop.orders.atomic() as tx:
            tx.execute("INSERT INTO shop_notes (order_id, text) VALUES (%s, %s)",
                       [second, "bob"])
            assert tx.hold(second, "PAID").reason == "STATE_MISMATCH"
            with pytest.raises(UnitRefusedError):
                tx.execute("SELECT 1")
        Note.objects.using(shop.alias).create(order_id=second, text="cy")
    assert shop.notes() == ["ann", "cy"]  # bob went with the refused unit
    assert shop.orders.state(second) == "NEW"


def test_database_errors_arrive_translated(shop: Shop) -> None:
    pk = shop.order()
    with transaction.atomic(using=shop.alias):
        Note.objects.using(shop.alias).create(order_id=pk, text="one")
        with pytest.raises(InvariantViolation), shop.orders.atomic() as tx:
            assert shop.orders.transition(pk, "PAID").applied
            tx.execute("INSERT INTO shop_notes (order_id, text) VALUES (%s, 'one')", [pk])
        Note.objects.using(shop.alias).create(order_id=pk, text="two")
    assert shop.notes() == ["one", "two"] and shop.orders.state(pk) == "NEW"
    # Django's own IntegrityError, read through the driver error it carries (__cause__)
    with pytest.raises(IntegrityError) as caught, transaction.atomic(using=shop.alias):
        Note.objects.using(shop.alias).create(order_id=pk, text="one")
    assert isinstance(translate(caught.value), InvariantViolation)


def test_threads_each_on_their_own_django_connection_move_the_row_once(shop: Shop) -> None:
    pk = shop.order()
    barrier = threading.Barrier(8)

    def one(i: int) -> bool:
        barrier.wait(timeout=30)
        with transaction.atomic(using=shop.alias):
            Note.objects.using(shop.alias).create(order_id=pk, text=f"t{i}")
            with shop.orders.atomic():
                return shop.orders.transition(pk, "PAID", from_="NEW").applied

    with ThreadPoolExecutor(8) as pool:
        applied = list(pool.map(one, range(8)))
    assert applied.count(True) == 1 and len(shop.notes()) == 8
    assert shop.seen == [("PAID", "PAID")]


def test_the_store_refuses_what_it_cannot_do(shop: Shop) -> None:
    with pytest.raises(UsageError, match="no database"):
        DjangoStore("nowhere")
    with transaction.atomic(using=shop.alias):
        with pytest.raises(UsageError, match="execute_script"):
            shop.store.execute_script("SELECT 1")
        with pytest.raises(UsageError, match="read-only"), shop.store.atomic(read_only=True):
            pass
    with shop.store.atomic(read_only=True) as tx:  # its own block: a snapshot
        assert tx.execute("SELECT count(*) AS n FROM shop_orders") == [{"n": 0}]


SQLITE_ONLY = """
import sys
import django
from django.conf import settings
settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                                          "NAME": sys.argv[1]}}, USE_TZ=True)
django.setup()
import rowstate
import rowstate.ext
from rowstate.contrib.django import DjangoStore
store = DjangoStore()
assert store.run(rowstate.ext.Batch((("SELECT 1", []),))) == [[(1,)]]
with store.atomic() as tx:
    assert tx.execute("SELECT 2 AS n") == [{"n": 2}]
print(",".join(sorted(m for m in ("psycopg", "psycopg_pool") if m in sys.modules)))
"""


def test_a_sqlite_database_loads_no_postgresql_driver(tmp_path: Any) -> None:
    out = subprocess.run([sys.executable, "-c", SQLITE_ONLY, f"{tmp_path}/only.db"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_locked_sqlite_file_is_a_store_error(tmp_path: Any) -> None:
    """Django's own BEGIN (or connect) failing reaches the caller as the engine's error."""
    where = f"{tmp_path}/locked.db"
    sqlite3.connect(where).close()
    alias = add_django_alias("sqlite", where)
    connections.settings[alias]["OPTIONS"]["timeout"] = 0.1
    blocker = sqlite3.connect(where, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    store = DjangoStore(alias)
    try:
        with pytest.raises(StoreError, match="locked") as caught, store.atomic():
            pass
        assert caught.value.__cause__ is not None
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        store.close()
        remove_django_alias(alias)
