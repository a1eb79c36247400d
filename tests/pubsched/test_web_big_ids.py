"""A number too big for any row (20 digits: beyond a 64-bit integer) in an admin URL or a
form's id field is "no such thing", never a 500 with a traceback (issue 29, item 21), on
both databases: Python's sqlite3 cannot even bind it, PostgreSQL refuses it as a bigint."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from pubsched.cli.dispatch import run as cli_run
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.web.ids import RowIdConvertor
from support.pub_web import login, people, web_settings
from support.pubs import NOW, WEEK

pytestmark = [pytest.mark.pub_setup("web"),
              pytest.mark.both_databases("PostgreSQL refuses an out-of-range bigint, "
                                         "SQLite's driver cannot bind it")]

BIG = "99999999999999999999"  # 20 digits: more than 2**63 - 1

# every admin route that names a row by its number, with the method it answers
ADMIN = [("GET", f"/admin/tenders/{BIG}"), ("POST", f"/admin/tenders/{BIG}"),
         *[("POST", f"/admin/tenders/{BIG}/{act}")
           for act in ("deactivate", "activate", "revoke", "invite", "away", "back")],
         ("POST", f"/admin/template/{BIG}/edit"), ("POST", f"/admin/template/{BIG}/remove"),
         ("POST", f"/admin/weeks/{WEEK}/shifts/{BIG}/remove"),
         ("POST", f"/admin/operators/{BIG}/remove"), ("POST", f"/admin/covers/{BIG}/cancel"),
         ("POST", f"/admin/mail/{BIG}/resend")]


def _routes(routes: list[Any]) -> Iterator[Any]:
    """Every route, through mounts and the middleware they mount (the operator gate)."""
    for route in routes:
        yield route
        inner = getattr(route, "app", None)
        while inner is not None and not hasattr(inner, "routes"):
            inner = getattr(inner, "app", None)
        yield from _routes(getattr(inner, "routes", []))


def test_every_route_naming_a_row_takes_only_a_number_a_row_can_have(pub: Pub) -> None:
    """A route added later cannot forget the bound: every path parameter that names a row
    (``..._id``) uses the ``{name:id}`` convertor."""
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    loose = [f"{route.path} {name}" for route in _routes(app.routes)
             for name, convertor in getattr(route, "param_convertors", {}).items()
             if name.endswith("_id") and not isinstance(convertor, RowIdConvertor)]
    assert loose == []


@pytest.fixture
def client(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver",
                    raise_server_exceptions=False) as c:
        assert login(c).status_code == 303
        yield c


def test_a_20_digit_id_in_an_admin_url_is_not_found(client: TestClient,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    answers = {f"{method} {path}": client.request(method, path, data={"label": "x"},
                                                  follow_redirects=False)
               for method, path in ADMIN}
    wrong = {k: r.status_code for k, r in answers.items() if r.status_code != 404}
    assert wrong == {}
    assert all("No such page" in r.text and "Traceback" not in r.text
               for r in answers.values())
    assert "unexpected error" not in caplog.text


def test_a_20_digit_id_in_a_form_is_refused_in_words(client: TestClient, pub: Pub) -> None:
    client.post("/admin/create", data={"week": WEEK})
    email = next(iter(people(pub).values())).email
    for action in ("assign", "unassign"):
        reply = client.post(f"/admin/weeks/{WEEK}/roster/{action}",
                            data={"shift": BIG, "email": email})
        assert reply.status_code == 200 and "not a shift" in reply.text, action
    for name in ("rehearsal/next", "rehearsal/stop"):
        reply = client.post(f"/admin/cutover/{name}", data={"rehearsal": BIG, "step": "1"})
        assert reply.status_code == 200 and "is not a number" in reply.text, name


def test_a_20_digit_id_on_a_tenders_link_is_not_found(client: TestClient, pub: Pub) -> None:
    alice = people(pub)["Alice"]
    form = alice.form(pub)
    for act in ("cancel", "take"):
        reply = client.post(f"{form}/covers/{BIG}/{act}")
        assert reply.status_code == 404 and "Something went wrong" not in reply.text, act
    reply = client.post(f"{form}/covers/ask", data={"week": WEEK, "shift_id": BIG})
    assert reply.status_code in (400, 409) and "Something went wrong" not in reply.text


@pytest.mark.parametrize("argv", [["cover", "cancel", BIG], ["cover", "take", BIG, "a@b.example"],
                                  ["shift", "edit", BIG, "--slots", "2"],
                                  ["cover", "ask", WEEK, BIG, "a@b.example"]])
def test_a_20_digit_id_on_the_command_line_is_bad_usage(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_run(["--db", f"sqlite:///{tmp_path}/pub.db", *argv], stdout=io.StringIO())
    assert code == 2 and "too big to name anything" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # refused before the database was opened
