"""Operator accounts on the web (issue 18), in-process on SQLite (PostgreSQL where marked):
the login by email and password beside the quick start's ``admin``, the throttle seeing both
alike, a removed operator's session ending at its next request, and the operators page
(list, add with the password twice, remove; bad input saves nothing). What a person sees is
test_browser_login.py's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from pubsched.people import operators
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.web.auth import AdminPassword, LoginThrottle
from pubsched.web.settings import WebSettings
from support.pub_web import FAST_HASH, login, web_settings
from support.pubs import NOW

pytestmark = pytest.mark.pub_setup("web")
GOOD = "correct horse battery"
ANN = "ann@pub.example"


@pytest.fixture
def client(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as c:
        yield c


def add(pub: Pub, email: str = ANN) -> int:
    verdict = operators.add(pub, email, GOOD, hasher=FAST_HASH, now=NOW)
    assert verdict
    return int(verdict.detail["id"])


def accounts(pub: Pub) -> list[str]:
    return [o.email for o in operators.all_operators(pub)]


def flash_of(reply: Any) -> str:
    assert reply.status_code == 200
    text: str = reply.text
    start = text.index('class="flash')
    return text[start:text.index("</div>", start)]


# -- the login ------------------------------------------------------------------------------


@pytest.mark.both_databases("the login's lookup and stamp")
def test_an_operator_logs_in_by_email_in_any_case(client: TestClient, pub: Pub) -> None:
    add(pub)
    reply = login(client, GOOD, "  ANN@pub.example ")
    assert reply.status_code == 303 and "pubsched_admin=" in reply.headers["set-cookie"]
    page = client.get("/admin/")
    assert page.status_code == 200 and ANN in page.text  # the header names who is in
    (row,) = pub.query("SELECT last_login_at FROM pub_operators")
    assert row["last_login_at"] is not None


def test_a_wrong_password_and_an_unknown_email_get_the_same_answer(
        client: TestClient, pub: Pub) -> None:
    add(pub)
    wrong = login(client, "not the password", ANN)
    unknown = login(client, GOOD, "nobody@pub.example")
    for reply in (wrong, unknown):
        assert reply.status_code == 401 and "Wrong email or password." in reply.text
        assert "set-cookie" not in reply.headers
    assert client.get("/admin/", follow_redirects=False).status_code == 303
    # the quick start's admin still logs in (which forgets the two failures), and an
    # operator's password does not open it
    assert login(client).status_code == 303
    client.post("/admin/logout")
    assert login(client, GOOD).status_code == 401


def test_the_throttle_counts_operator_failures_per_client(pub: Pub) -> None:
    add(pub)
    clock = [1000.0]
    throttle = LoginThrottle(free=3, base=2.0, cap=60.0, clock=lambda: clock[0])
    app = create_app(pub, web_settings(throttle=throttle), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as c:
        for email in (ANN, "nobody@pub.example", "admin"):
            assert login(c, "a wrong guess!", email).status_code == 401
        slowed = login(c, GOOD, ANN)  # the right password waits too, unchecked
        assert slowed.status_code == 429 and "set-cookie" not in slowed.headers
        clock[0] += 2.1
        assert login(c, GOOD, ANN).status_code == 303
        assert throttle.wait("testclient") == 0.0


def test_without_an_admin_password_only_operator_accounts_log_in(pub: Pub) -> None:
    closed = WebSettings(AdminPassword(None, FAST_HASH))
    app = create_app(pub, closed, clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as c:
        page = c.get("/admin/login").text
        assert "The admin is closed" in page and 'name="password"' not in page
        add(pub)
        assert 'name="email"' in c.get("/admin/login").text
        refused = login(c, "anything at all")
        assert refused.status_code == 401 and "no admin account here" in refused.text
        assert login(c, GOOD, ANN).status_code == 303


def test_a_removed_operators_session_ends_at_the_next_request(
        client: TestClient, pub: Pub) -> None:
    add(pub)
    assert login(client, GOOD, ANN).status_code == 303
    assert client.get("/admin/", follow_redirects=False).status_code == 200
    assert operators.remove(pub, ANN)  # from the CLI, say
    reply = client.get("/admin/", follow_redirects=False)
    assert reply.status_code == 303 and "/admin/login" in reply.headers["location"]
    # added again, the old cookie still does not come back: it named the old account
    add(pub)
    assert client.get("/admin/", follow_redirects=False).status_code == 303


def test_a_session_cookie_cannot_be_bent_to_another_account(pub: Pub) -> None:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    sessions = app.state.web.sessions
    ann = add(pub)
    assert sessions.session(sessions.issue(ANN, ann, "stamp")).who == ANN
    signer = sessions._signer
    for data in ({"sid": "s", "who": "admin", "op": ann}, {"sid": "s", "who": ANN},
                 {"sid": "s", "who": ANN, "op": True}, {"sid": "s", "who": 3, "op": None},
                 {"sid": "s", "who": ANN, "op": ann},  # no password stamp
                 {"sid": "s", "who": ANN, "op": ann, "pw": 7},
                 {"sid": "s", "who": "admin", "op": None, "pw": "stamp"}):
        assert sessions.session(signer.dumps(data)) is None, data


# -- the operators page ----------------------------------------------------------------------


@pytest.mark.both_databases("the session's account lookup")
def test_the_page_lists_adds_and_removes(client: TestClient, pub: Pub) -> None:
    assert login(client).status_code == 303
    page = client.get("/admin/operators").text
    assert "No operator accounts yet" in page
    reply = client.post("/admin/operators/add", data={
        "email": "Bob@Pub.example", "password": GOOD, "password_again": GOOD},
        follow_redirects=True)
    assert "added operator Bob@Pub.example" in flash_of(reply)
    assert "Bob@Pub.example" in reply.text and "never" in reply.text
    # the new account logs in with what was typed
    (bob,) = operators.all_operators(pub)
    assert operators.verify(pub, "bob@pub.example", GOOD) is not None
    reply = client.post(f"/admin/operators/{bob.id}/remove", follow_redirects=True)
    assert "removed operator Bob@Pub.example" in flash_of(reply)
    assert accounts(pub) == []


@pytest.mark.parametrize(("email", "password", "again", "said"), [
    (ANN, GOOD, GOOD + "!", "the two passwords differ"),
    (ANN, "too short", "too short", "at least 12 characters"),
    ("not an address", GOOD, GOOD, "not an email address"),
    ("admin", GOOD, GOOD, "quick start"),
    ("", GOOD, GOOD, "not an email address"),
])
def test_bad_input_on_the_page_saves_nothing(client: TestClient, pub: Pub, email: str,
                                              password: str, again: str, said: str) -> None:
    assert login(client).status_code == 303
    reply = client.post("/admin/operators/add", data={
        "email": email, "password": password, "password_again": again},
        follow_redirects=True)
    assert said in flash_of(reply) and "flash-refused" in flash_of(reply)
    assert accounts(pub) == []


def test_a_duplicate_is_refused_and_an_unknown_removal_too(client: TestClient,
                                                           pub: Pub) -> None:
    ann = add(pub)
    assert login(client).status_code == 303
    reply = client.post("/admin/operators/add", data={
        "email": "ANN@pub.example", "password": GOOD, "password_again": GOOD},
        follow_redirects=True)
    assert "already has an operator account" in flash_of(reply)
    reply = client.post(f"/admin/operators/{ann + 99}/remove", follow_redirects=True)
    assert "no such operator account" in flash_of(reply)
    assert client.post("/admin/operators/x/remove").status_code == 404  # no such page

    assert accounts(pub) == [ANN]


def test_the_last_account_stays_unless_the_admin_password_opens_the_admin(
        pub: Pub) -> None:
    ann = add(pub)
    closed = WebSettings(AdminPassword(None, FAST_HASH))
    with TestClient(create_app(pub, closed, clock=lambda: NOW),
                    base_url="https://testserver") as c:
        assert login(c, GOOD, ANN).status_code == 303
        reply = c.post(f"/admin/operators/{ann}/remove", follow_redirects=True)
        assert "last operator account" in flash_of(reply)
        assert accounts(pub) == [ANN]
    with TestClient(create_app(pub, web_settings(), clock=lambda: NOW),
                    base_url="https://testserver") as c:
        assert login(c, GOOD, ANN).status_code == 303
        c.post(f"/admin/operators/{ann}/remove")  # admin opens the web: allowed
        assert accounts(pub) == []
        # and the operator who removed themselves is out at once
        assert c.get("/admin/", follow_redirects=False).status_code == 303


def test_the_page_needs_a_login(client: TestClient, pub: Pub) -> None:
    for method, path in (("GET", "/admin/operators"), ("POST", "/admin/operators/add")):
        reply = client.request(method, path, follow_redirects=False)
        assert reply.status_code == 303 and "/admin/login" in reply.headers["location"]
    assert accounts(pub) == []


# -- changing one's own password ------------------------------------------------------------

NEW = "a brand new passphrase"


def change(client: TestClient, current: str, new: str, again: str | None = None) -> Any:
    return client.post("/admin/operators/password", follow_redirects=True, data={
        "current": current, "password": new, "password_again": new if again is None else again})


def test_a_new_password_logs_out_every_other_session_and_keeps_this_one(
        pub: Pub, client: TestClient) -> None:
    add(pub)
    app = client.app
    with TestClient(app, base_url="https://testserver") as elsewhere:
        assert login(elsewhere, GOOD, ANN).status_code == 303
        assert login(client, GOOD, ANN).status_code == 303
        assert elsewhere.get("/admin/", follow_redirects=False).status_code == 200
        said = flash_of(change(client, GOOD, NEW))
        assert "Your password is changed" in said
        assert client.get("/admin/", follow_redirects=False).status_code == 200  # still in
        assert elsewhere.get("/admin/", follow_redirects=False).status_code == 303  # out
    client.post("/admin/logout")
    assert login(client, GOOD, ANN).status_code == 401
    assert login(client, NEW, ANN).status_code == 303


@pytest.mark.parametrize(("current", "new", "again", "said"), [
    ("not my password", NEW, None, "not your current password"),
    (GOOD, NEW, NEW + "!", "differ"),
    (GOOD, "short", None, "at least 12 characters"),
])
def test_a_refused_change_says_why_and_keeps_the_password(
        pub: Pub, client: TestClient, current: str, new: str, again: str | None,
        said: str) -> None:
    add(pub)
    assert login(client, GOOD, ANN).status_code == 303
    before = pub.query("SELECT password_hash FROM pub_operators")
    assert said in flash_of(change(client, current, new, again))
    assert pub.query("SELECT password_hash FROM pub_operators") == before
    assert client.get("/admin/", follow_redirects=False).status_code == 200


def test_the_admin_account_cannot_change_its_password_here(
        pub: Pub, client: TestClient) -> None:
    assert login(client).status_code == 303
    page = client.get("/admin/operators")
    assert "Change your password" not in page.text
    assert "PUBSCHED_ADMIN_PASSWORD" in flash_of(change(client, "whatever", NEW))
