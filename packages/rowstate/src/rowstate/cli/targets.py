"""What the command line names: a ``MODULE:ATTR`` target, a database URL, a row's key.

Each is read here, before any I/O, and a bad one is a :class:`BadInput` (exit 2) whose
message says what was expected.

A Django project's binding module imports its models, which Django allows only once it is
set up (``AppRegistryNotReady`` otherwise): when ``--django-settings`` names a settings
module, or ``DJANGO_SETTINGS_MODULE`` is set, ``django.setup()`` runs before the import,
as ``manage.py`` does.

A key is read by the binding's key columns: one column takes the text as given, converted
by the column's declared type (an ``INTEGER`` key from ``42``); a key of several columns is
a JSON array with one value per column, in the binding's order (``'["v1", 3]'``), each a
string or an integer, converted alike.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..binding import Binding
from ..errors import ValidationError
from ..lifecycle import Lifecycle
from ..machine import Machine
from ..protocol import Op

if TYPE_CHECKING:  # types only: a SQLite URL loads no PostgreSQL driver
    from ..stores import Store


class BadInput(Exception):
    """Bad input found after parsing: exit 2, the database untouched."""


def load(target: str, *, django_settings: str | None = None) -> Machine | Binding:
    """The Machine or Binding that ``MODULE:ATTR`` names (the current directory is
    importable, as with ``python -m``), Django set up first where the app is Django's
    (:func:`setup_django`)."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise BadInput(f"expected MODULE:ATTR, got {target!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")
    setup_django(django_settings)
    try:
        obj: object = importlib.import_module(module_name)
    except Exception as exc:  # the app's module may fail any way: one line, no traceback
        raise BadInput(f"cannot import {module_name!r}: {type(exc).__name__}: "
                       f"{_one_line(exc)}{_django_hint(exc)}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise BadInput(f"{target}: {module_name} has no {attr!r}") from None
    if not isinstance(obj, Machine | Binding):
        raise BadInput(f"{target} is a {type(obj).__name__}, not a Machine or Binding")
    return obj


def setup_django(settings: str | None) -> None:
    """``django.setup()``, once, when the app is Django's: ``settings`` names its settings
    module (it wins over the environment, as ``manage.py --settings`` does), else
    ``DJANGO_SETTINGS_MODULE`` when set. Without either, or when that variable is set but
    Django is not installed (it is there for another program), nothing happens."""
    if settings is not None:
        if not settings.strip():
            raise BadInput("--django-settings: expected a module name, got ''")
        os.environ["DJANGO_SETTINGS_MODULE"] = settings
    name = os.environ.get("DJANGO_SETTINGS_MODULE", "").strip()
    if not name:
        return
    try:
        import django
        from django.apps import apps
    except ImportError:
        if settings is None:
            return
        raise BadInput("--django-settings: Django is not installed") from None
    if apps.ready:
        return
    try:
        django.setup()
    except Exception as exc:  # a missing or broken settings module: one line, no traceback
        raise BadInput(f"cannot set Django up with the settings {name!r}: "
                       f"{type(exc).__name__}: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _django_hint(exc: BaseException) -> str:
    """What to do when a module needed Django set up and nothing said which settings (read
    by the error's name: Django itself need not be installed)."""
    if type(exc).__name__ not in ("AppRegistryNotReady", "ImproperlyConfigured"):
        return ""
    if os.environ.get("DJANGO_SETTINGS_MODULE", "").strip():
        return ""
    return (" (a Django project's module: set DJANGO_SETTINGS_MODULE or pass "
            "--django-settings MODULE)")


def load_binding(target: str, *, django_settings: str | None = None) -> Binding:
    got = load(target, django_settings=django_settings)
    if not isinstance(got, Binding):
        raise BadInput(f"{target} is a Machine; inspect and stuck need its Binding (the "
                       "table it lives in)")
    return got


def parse_key(binding: Binding, text: str) -> tuple[Any, ...]:
    """The key ``text`` names, as the binding's key columns hold it (see the module)."""
    columns = binding.key
    if len(columns) == 1:
        return binding.key_values(text)
    example = json.dumps(["text" if k != "int" else 1 for k in binding.key_kinds])
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, list) or len(value) != len(columns):
        raise BadInput(f"{binding.table} has a key of {len(columns)} columns "
                       f"({', '.join(columns)}): give it as a JSON array, e.g. '{example}', "
                       f"got {text!r}")
    if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in value):
        raise BadInput(f"{binding.table}: key values are strings or integers, got {text}")
    return binding.key_values(value)


def open_store(url: str) -> Store:
    """The store for ``url`` (what :func:`rowstate.connect` accepts); a SQLite file must
    exist (a typo would otherwise create an empty database)."""
    from ..stores import connect, postgres_url
    from ..stores.urls import _sqlite_path

    try:
        # looked for before connecting: a SQLite store opens (creates) its file when built
        path = _sqlite_path(url) if url.startswith("sqlite:") else None
        if path is not None and not os.path.isfile(path):
            raise BadInput(f"no SQLite database at {path!r}")
        # PostgreSQL: one connection of its own, no pool: an unreachable
        # server fails the command now instead of after the pool's 30 s of retries
        pg = postgres_url(url) is not None
        return connect(url, per_thread=True) if pg else connect(url)
    except ValidationError as exc:
        raise BadInput(str(exc)) from None


R = TypeVar("R")


def read_once(url: str, binding: Binding, op_of: Callable[[Lifecycle], Op[R]]) -> R:
    """Open the database, run one read-only operation of the binding's core in a read-only
    unit (nothing written, no write lock waited for), close it: what each command reads."""
    store = open_store(url)
    try:
        lc = Lifecycle(store, binding)
        with store.atomic(read_only=True, door=lc):
            return lc.do(op_of(lc))
    finally:
        store.close()

