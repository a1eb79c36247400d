"""A small Django project written to a folder, as an adopter has one: a settings module
(``shopsite.settings``, its database an SQLite file or a real PostgreSQL database), an app
with a model (``orders.Order``: a plain ``CharField`` for the state) and a binding on the
model's table through ``rowstate.contrib.django`` (``orders.flows:ORDERS``), its events kept
as history (no relay). :func:`seed` makes the table with Django's schema editor and the
engine's columns with the binding's migration SQL, in a process of its own with
``DJANGO_SETTINGS_MODULE`` set (the test process has its own Django settings), and leaves:

====  ==================================================================================
1     NEW, its ``pack`` lease claimed an hour ago by ``packer-7``: EXPIRED (ttl 60 s)
2     NEW, untouched: nothing stuck
====  ==================================================================================
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.contrib_stores import django_settings

SETTINGS = '''\
SECRET_KEY = "not a secret: a test project"
INSTALLED_APPS = ["orders"]
DATABASES = {{"default": {database!r}}}
USE_TZ = True
TIME_ZONE = {zone!r}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
'''

MODELS = '''\
from django.db import models


class Order(models.Model):
    state = models.CharField(max_length=20, default="NEW")
    total = models.IntegerField(default=0)
'''

FLOWS = '''\
"""The shop's order lifecycle on the app's own model (what `rowstate stuck` imports)."""

from rowstate import Edge, Lease, Machine
from rowstate.contrib.django import binding_for

from orders.models import Order

ORDER = Machine("order", states=["NEW", "PACKED", "SHIPPED"], initial="NEW",
                edges=[Edge("pack", "NEW", "PACKED", lease="pack"),
                       Edge("ship", "PACKED", "SHIPPED")])
ORDERS = binding_for(Order, ORDER, version="version",
                     lease=Lease(at="lease_at", kind="lease_kind", token="lease_token",
                                 holder="lease_holder", ttl=60))
'''

SEED = '''\
from datetime import UTC, datetime, timedelta

import django

django.setup()

from django.db import connection  # noqa: E402

from orders.flows import ORDERS  # noqa: E402
from orders.models import Order  # noqa: E402
from rowstate import Lifecycle  # noqa: E402
from rowstate.contrib.django import DjangoStore  # noqa: E402

with connection.schema_editor() as editor:
    editor.create_model(Order)
store = DjangoStore()
store.execute_script(";\\n".join(
    ORDERS.migration_sql(store.dialect, existing=("id", "state", "total"))))
past = datetime.now(UTC) - timedelta(hours=1)
then = Lifecycle(store, ORDERS, clock=lambda: past)
first = Order.objects.create(total=10)  # the app's own inserts, through the ORM
Order.objects.create(total=20)
assert then.claim(first.pk, "pack", holder="packer-7").claimed
store.close()
'''


def write_project(folder: Path, db: str, where: str, *, zone: str = "Europe/Amsterdam",
                  ) -> None:
    """The project in ``folder`` (see the module); ``db`` is ``sqlite`` (``where`` the
    file) or ``postgres`` (``where`` a conninfo)."""
    (folder / "shopsite").mkdir()
    (folder / "shopsite" / "__init__.py").write_text("")
    (folder / "shopsite" / "settings.py").write_text(
        SETTINGS.format(database=django_settings(db, where), zone=zone))
    (folder / "orders").mkdir()
    (folder / "orders" / "__init__.py").write_text("")
    (folder / "orders" / "models.py").write_text(MODELS)
    (folder / "orders" / "flows.py").write_text(FLOWS)
    (folder / "seed_orders.py").write_text(SEED)


def environment(settings: str | None = "shopsite.settings") -> dict[str, str]:
    """This process's environment (its PYTHONPATH too), ``DJANGO_SETTINGS_MODULE`` set to
    ``settings`` or taken out."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    if settings is not None:
        env["DJANGO_SETTINGS_MODULE"] = settings
    return env


def seed(folder: Path) -> None:
    subprocess.run([sys.executable, "seed_orders.py"], cwd=folder, env=environment(),
                   capture_output=True, text=True, timeout=120, check=True)
