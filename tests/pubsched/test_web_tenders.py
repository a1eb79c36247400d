"""The tender pages of the admin in-process (Starlette's TestClient), on SQLite and
PostgreSQL: add, edit, deactivate, reactivate, revoke, invite one and all, with flashes in
words; a form that cannot be saved is drawn again with the reason and nothing written;
inactive tenders show no links; every POST passes the cross-origin check. What a person
sees (desktop and phone) is test_browser_tenders.py's."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from pubsched.mail.settings import load_mail_settings
from pubsched.people import links, tenders
from pubsched.pub import Pub
from pubsched.web.app import create_app
from support.pub_cli import snapshot
from support.pub_web import login, people, web_settings
from support.pubs import NOW, make_pub
from support.smtp_server import SmtpTestServer


@pytest.fixture
def site_pub(db_url: str, smtp: SmtpTestServer) -> Iterator[Pub]:
    mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                       PUBSCHED_SMTP_TIMEOUT="5"))
    made = make_pub(db_url, mail, web=True)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def operator(site_pub: Pub) -> Iterator[TestClient]:
    app = create_app(site_pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client:
        assert login(client).status_code == 303
        yield client


def flash(page: str) -> str:
    found = re.search(r'<div class="flash flash-(\w+)"[^>]*>\s*(.*?)\s*</div>', page, re.S)
    assert found, "no flash on the page"
    return f"{found.group(1)}: {html.unescape(found.group(2))}"


def post(client: TestClient, path: str, **data: str) -> str:
    reply = client.post(path, data=data, follow_redirects=True)
    assert reply.status_code == 200, reply.text
    return reply.text


def test_add_a_tender_with_skills(operator: TestClient, site_pub: Pub) -> None:
    page = post(operator, "/admin/tenders/add", name=" Dan ", email="dan@example.com",
                max_shifts="2", skills="Bar, cellar bar")
    assert flash(page).startswith("ok: Dan is added.")
    dan = tenders.get(site_pub, "dan@example.com")
    assert (dan.name, dan.max_shifts, dan.skills, dan.active) == ("Dan", 2, ("bar", "cellar"),
                                                                 True)
    assert "https://pub.example" + "/t/" + links.tender_token(site_pub.config, dan.id) in page
    post(operator, "/admin/tenders/add", name="Eve", email="eve@example.com", max_shifts="",
         skills="")
    eve = tenders.get(site_pub, "eve@example.com")
    assert (eve.max_shifts, eve.skills) == (None, ())


@pytest.mark.parametrize(("fields", "why", "status"), [
    ({"name": "Dan", "email": "not-an-email"}, "not an email address", 400),
    ({"name": "Lee, Dan", "email": "dan@example.com"}, "not a tender's name", 400),
    ({"name": "Dan", "email": "dan@example.com", "max_shifts": "15"}, "0 to 14", 400),
    ({"name": "Dan", "email": "dan@example.com", "max_shifts": "two"}, "whole number", 400),
    ({"name": "Dan", "email": "dan@example.com", "max_shifts": "\u00b2"}, "whole number", 400),
    ({"name": "Dan", "email": "dan@example.com", "skills": "x" * 21}, "at most 20", 400),
    ({"name": "Dan", "email": "ALICE@example.com"}, "already a tender", 409),
])
def test_a_bad_add_is_drawn_again_with_the_reason_and_writes_nothing(
        operator: TestClient, site_pub: Pub, fields: dict[str, str], why: str,
        status: int) -> None:
    before = snapshot(site_pub.config.db_url)
    reply = operator.post("/admin/tenders/add", data=fields, follow_redirects=False)
    assert reply.status_code == status
    problem = re.search(r'id="add-problem">(.*?)</div>', reply.text, re.S)
    assert problem and why in html.unescape(problem.group(1))
    assert f'value="{html.escape(fields["email"])}"' in reply.text  # what was typed stays
    assert snapshot(site_pub.config.db_url) == before


@pytest.mark.both_databases("the page's update of every field")
def test_edit_a_tender_keeps_their_links(operator: TestClient, site_pub: Pub) -> None:
    alice = people(site_pub)["Alice"]
    old_link = alice.form(site_pub)
    page = operator.get(f"/admin/tenders/{alice.id}")
    assert page.status_code == 200 and 'value="alice@example.com"' in page.text
    done = post(operator, f"/admin/tenders/{alice.id}", name="Alice Ames",
                email="Alice.Ames@example.com", max_shifts="3", skills="bar firstaid")
    assert flash(done) == "ok: Alice Ames's details are saved"
    saved = tenders.by_id(site_pub, alice.id)
    assert saved is not None
    assert (saved.name, saved.email, saved.max_shifts, saved.skills) == (
        "Alice Ames", "Alice.Ames@example.com", 3, ("bar", "firstaid"))
    assert alice.form(site_pub) == old_link
    found = links.tender_for_link(site_pub, old_link.removeprefix("/t/"))
    assert found is not None and found.id == alice.id
    # emptied fields: no maximum, no skills
    post(operator, f"/admin/tenders/{alice.id}", name="Alice Ames",
         email="Alice.Ames@example.com", max_shifts="", skills="")
    saved = tenders.by_id(site_pub, alice.id)
    assert saved is not None and (saved.max_shifts, saved.skills) == (None, ())


@pytest.mark.parametrize(("fields", "why", "status"), [
    ({"email": "bob@EXAMPLE.com"}, "another tender's email", 409),
    ({"email": "a..b@example.com"}, "not an email address", 400),
    ({"name": ""}, "not a tender's name", 400),
    ({"max_shifts": "-1"}, "whole number", 400),
    ({"skills": "x" * 30}, "at most 20", 400),
])
def test_a_bad_edit_is_drawn_again_with_the_reason_and_writes_nothing(
        operator: TestClient, site_pub: Pub, fields: dict[str, str], why: str,
        status: int) -> None:
    alice = people(site_pub)["Alice"]
    before = snapshot(site_pub.config.db_url)
    data = {"name": "Alice B", "email": "alice@example.com", "max_shifts": "2",
            "skills": "bar", **fields}
    reply = operator.post(f"/admin/tenders/{alice.id}", data=data, follow_redirects=False)
    assert reply.status_code == status
    problem = re.search(r'id="edit-problem">(.*?)</div>', reply.text, re.S)
    assert problem and why in html.unescape(problem.group(1))
    assert snapshot(site_pub.config.db_url) == before


def test_deactivate_hides_the_links_and_reactivate_brings_them_back(
        operator: TestClient, site_pub: Pub) -> None:
    bob = people(site_pub)["Bob"]
    link = "https://pub.example" + bob.form(site_pub)
    assert link in operator.get("/admin/tenders").text
    page = post(operator, f"/admin/tenders/{bob.id}/deactivate")
    assert flash(page) == ("ok: Bob is deactivated: no more shifts, and their links stop "
                           "working")
    assert link not in page and bob.form(site_pub).removeprefix("/t/") not in page
    assert 'data-tender="bob@example.com"' in page and "none while inactive" in page
    assert f'/admin/tenders/{bob.id}/invite' not in page  # no invite for an inactive one
    again = post(operator, f"/admin/tenders/{bob.id}/deactivate")
    assert flash(again).startswith("refused: bob@example.com is not active")
    page = post(operator, f"/admin/tenders/{bob.id}/activate")
    assert flash(page) == "ok: Bob is active again: their current links work again"
    assert link in page
    again = post(operator, f"/admin/tenders/{bob.id}/activate")
    assert flash(again).startswith("refused: bob@example.com is already active")


def test_invite_one_and_all_from_the_page(operator: TestClient, site_pub: Pub,
                                          smtp: SmtpTestServer) -> None:
    team = people(site_pub)
    page = post(operator, f"/admin/tenders/{team['Carol'].id}/invite")
    assert flash(page) == "ok: Invitation sent to carol@example.com"
    [mail] = smtp.accepted
    assert mail.rcpt_tos == ("carol@example.com",)
    assert "https://pub.example" + team["Carol"].form(site_pub) in mail.message.get_body(
        ("plain",)).get_content()
    tenders.deactivate(site_pub, "bob@example.com")
    smtp.clear_received()
    smtp.refuse_recipient("carol@example.com")
    page = post(operator, "/admin/tenders/invite")
    assert flash(page).startswith("failed: 1 of 2 invitation(s) not sent (carol@example.com")
    assert [m.rcpt_tos for m in smtp.accepted] == [("alice@example.com",)]
    smtp.clear_faults()
    page = post(operator, "/admin/tenders/invite")
    assert flash(page) == "ok: Invitations sent to 2 tender(s)"
    inactive = post(operator, f"/admin/tenders/{team['Bob'].id}/invite")
    assert flash(inactive).startswith("refused: bob@example.com is not active")


def test_revoke_from_the_page(operator: TestClient, site_pub: Pub) -> None:
    alice = people(site_pub)["Alice"]
    old = alice.form(site_pub)
    page = post(operator, f"/admin/tenders/{alice.id}/revoke")
    assert flash(page) == (
        "ok: revoked the links of Alice: the form link and the calendar feed they have stop "
        "working now (their calendar stops updating until they subscribe to the new one). "
        "Alice is not mailed about it: the new links are on this page, and Invite emails them")
    assert old not in page and alice.form(site_pub) in page


def test_an_unknown_tender_is_a_404_page_or_a_refusal(operator: TestClient,
                                                      site_pub: Pub) -> None:
    before = snapshot(site_pub.config.db_url)
    assert operator.get("/admin/tenders/999999").status_code == 404
    reply = operator.post("/admin/tenders/999999", data={"name": "X", "email": "x@example.com"})
    assert reply.status_code == 404
    for what in ("deactivate", "activate", "revoke", "invite"):
        assert flash(post(operator, f"/admin/tenders/999999/{what}")) == (
            "refused: no such tender")
    assert operator.get("/admin/tenders/abc").status_code == 404
    assert snapshot(site_pub.config.db_url) == before


def test_every_tender_post_is_cross_origin_checked(operator: TestClient,
                                                   site_pub: Pub) -> None:
    alice = people(site_pub)["Alice"]
    before = snapshot(site_pub.config.db_url)
    for path, data in (("/admin/tenders/add", {"name": "Eve", "email": "eve@example.com"}),
                       (f"/admin/tenders/{alice.id}", {"name": "Mallory",
                                                       "email": "alice@example.com"}),
                       (f"/admin/tenders/{alice.id}/deactivate", {}),
                       (f"/admin/tenders/{alice.id}/revoke", {}),
                       (f"/admin/tenders/{alice.id}/invite", {}),
                       ("/admin/tenders/invite", {})):
        reply = operator.post(path, data=data, headers={"origin": "https://evil.example"},
                              follow_redirects=False)
        assert reply.status_code == 403, path
    assert snapshot(site_pub.config.db_url) == before


def test_the_tender_pages_need_the_operator(site_pub: Pub) -> None:
    app = create_app(site_pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client:
        alice = people(site_pub)["Alice"]
        for path in ("/admin/tenders", f"/admin/tenders/{alice.id}"):
            reply = client.get(path, follow_redirects=False)
            assert reply.status_code == 303 and "/admin/login" in reply.headers["location"]
        reply = client.post("/admin/tenders/add", data={"name": "Eve",
                                                        "email": "eve@example.com"},
                            follow_redirects=False)
        assert reply.status_code == 303
        assert tenders.find(site_pub, "eve@example.com") is None
