"""The web front end in-process (Starlette's TestClient), on SQLite (PostgreSQL where marked): the
login and its cookie, the cross-origin check, the buttons, refusals, double clicks, the
tender's signed links and the calendar feed. What a person sees is test_browser.py's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from icalendar import Calendar
from starlette.testclient import TestClient

from pubsched.engines import flags, v2
from pubsched.mail.settings import load_mail_settings
from pubsched.people import links, tenders
from pubsched.pub import Pub
from pubsched.rehearsal import record
from pubsched.web.app import create_app
from pubsched.web.auth import LoginThrottle
from pubsched.web.buttons import fingerprint
from pubsched.week import runs as weeks
from pubsched.week.view import week_show
from support.pub_web import PASSWORD, Tender, buttons, login, people, seen, web_settings
from support.pubs import NOW, WEEK, make_pub
from support.smtp_server import SmtpTestServer

EVIL = "https://evil.example"


pytestmark = pytest.mark.pub_setup("web")


@pytest.fixture
def client(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as c:
        yield c


@pytest.fixture
def operator(client: TestClient) -> TestClient:
    assert login(client).status_code == 303
    return client


def who(pub: Pub) -> dict[str, Tender]:
    return people(pub)


def press(client: TestClient, action: str, **data: str) -> str:
    """Click one button of the week page as drawn now; the flash it leads to."""
    page = client.get(f"/admin/weeks/{WEEK}").text
    reply = client.post(f"/admin/weeks/{WEEK}/do/{action}", data={"seen": seen(page), **data},
                        follow_redirects=True)
    assert reply.status_code == 200
    return reply.text


# -- health and the admin gate ---------------------------------------------------------


def test_an_unexpected_error_is_a_short_page_without_a_trace(
        pub: Pub, monkeypatch: pytest.MonkeyPatch) -> None:
    import pubsched.week.view

    def broken(pub: Pub) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(pubsched.week.view, "weeks_list", broken)
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver", raise_server_exceptions=False) as c:
        login(c)
        reply = c.get("/admin/")
    assert reply.status_code == 500 and "Something went wrong" in reply.text
    assert "secret internals" not in reply.text and "Traceback" not in reply.text


def test_healthz_says_when_the_database_is_down(pub: Pub,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def down(*args: object) -> None:
        raise OSError("connection refused")

    app = create_app(pub, web_settings(), clock=lambda: NOW)
    monkeypatch.setattr(pub, "query", down)
    with TestClient(app) as c:
        reply = c.get("/healthz")
    assert reply.status_code == 503 and reply.json()["ok"] is False


def test_healthz_answers_without_login(client: TestClient) -> None:
    reply = client.get("/healthz")
    assert reply.status_code == 200 and reply.json() == {"ok": True, "database": "ok"}


@pytest.mark.parametrize("path", ["/admin/", f"/admin/weeks/{WEEK}", "/admin/tenders",
                                  "/admin/cutover"])
def test_every_admin_page_needs_the_login(client: TestClient, path: str) -> None:
    reply = client.get(path, follow_redirects=False)
    assert reply.status_code == 303
    assert reply.headers["location"].startswith("/admin/login?next=")


def test_an_unauthenticated_post_does_nothing(client: TestClient, pub: Pub) -> None:
    reply = client.post("/admin/open", data={"week": WEEK}, follow_redirects=False)
    assert reply.status_code == 303 and "/admin/login" in reply.headers["location"]
    assert pub.runs.get(WEEK) is None


def test_a_tender_link_on_an_admin_url_meets_the_login(client: TestClient, pub: Pub) -> None:
    alice = who(pub)["Alice"]
    token = alice.form(pub).removeprefix("/t/")
    for path in (f"/admin/{token}", f"/admin/?token={token}", f"/admin/t/{token}"):
        reply = client.get(path, follow_redirects=False)
        assert reply.status_code == 303 and "/admin/login" in reply.headers["location"]
    # nor does the tender's own page hand out anything the admin would accept
    page = client.get(alice.form(pub))
    assert page.status_code == 200 and "set-cookie" not in page.headers
    assert client.get("/admin/", follow_redirects=False).status_code == 303


# -- login, cookie, logout, throttle ---------------------------------------------------


def test_login_sets_a_strict_short_cookie(client: TestClient) -> None:
    reply = login(client)
    assert reply.status_code == 303 and reply.headers["location"] == "/admin/"
    cookie = reply.headers["set-cookie"]
    assert cookie.startswith("pubsched_admin=")
    lowered = cookie.lower()
    for part in ("httponly", "samesite=lax", "secure", "path=/admin", "max-age=7200"):
        assert part in lowered, cookie
    assert client.get("/admin/").status_code == 200


def test_insecure_cookies_only_when_asked(pub: Pub) -> None:
    app = create_app(pub, web_settings(insecure=True), clock=lambda: NOW)
    with TestClient(app) as c:
        cookie = login(c).headers["set-cookie"].lower()
        assert "secure" not in cookie and "httponly" in cookie
        assert c.get("/admin/").status_code == 200


def test_a_wrong_password_is_refused(client: TestClient) -> None:
    reply = login(client, "wrong")
    assert reply.status_code == 401 and "Wrong password" in reply.text
    assert "set-cookie" not in reply.headers
    assert client.get("/admin/", follow_redirects=False).status_code == 303


def test_each_login_gets_a_new_session_and_logout_ends_it(client: TestClient) -> None:
    first = login(client).cookies["pubsched_admin"]
    second = login(client).cookies["pubsched_admin"]
    assert first != second
    assert client.post("/admin/logout", follow_redirects=False).status_code == 303
    assert client.get("/admin/", follow_redirects=False).status_code == 303
    client.cookies.set("pubsched_admin", second, path="/admin")  # the ended session, replayed
    assert client.get("/admin/", follow_redirects=False).status_code == 303


def test_a_forged_or_expired_session_is_refused(pub: Pub) -> None:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as c:
        c.cookies.set("pubsched_admin", "eyJzaWQiOiJ4In0.forged.sig", path="/admin")
        assert c.get("/admin/", follow_redirects=False).status_code == 303
    web = app.state.web
    expired = web.sessions._signer.dumps({"sid": "old"})
    web.sessions.max_age = -1
    assert web.sessions.valid(expired) is None


def test_login_goes_only_to_our_own_admin_pages(client: TestClient) -> None:
    for target in ("https://evil.example/", "//evil.example/admin/", "/t/x"):
        reply = client.post("/admin/login", data={"password": PASSWORD, "next": target},
                            follow_redirects=False)
        assert reply.headers["location"] == "/admin/"
    reply = client.post("/admin/login", data={"password": PASSWORD, "next": "/admin/cutover"},
                        follow_redirects=False)
    assert reply.headers["location"] == "/admin/cutover"


def test_failed_logins_slow_the_next_ones(pub: Pub) -> None:
    clock = [1000.0]
    throttle = LoginThrottle(free=3, base=2.0, cap=60.0, clock=lambda: clock[0])
    app = create_app(pub, web_settings(throttle=throttle), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as c:
        for _ in range(3):
            assert login(c, "guess").status_code == 401
        # the fourth attempt must wait, and is not even checked: the right password too
        slowed = login(c)
        assert slowed.status_code == 429 and "retry-after" in slowed.headers
        assert "set-cookie" not in slowed.headers
        clock[0] += 2.1
        assert login(c, "guess").status_code == 401  # allowed again, wrong: waits 4 s now
        clock[0] += 2.1
        assert login(c).status_code == 429
        clock[0] += 2.0
        assert login(c).status_code == 303  # success forgets the failures
        assert throttle.wait("testclient") == 0.0


# -- cross-site request forgery --------------------------------------------------------


def test_cross_origin_posts_are_refused_and_change_nothing(operator: TestClient,
                                                           pub: Pub) -> None:
    hostile = [{"origin": EVIL}, {"sec-fetch-site": "cross-site"},
               {"sec-fetch-site": "same-site", "origin": "https://other.pub.example"}]
    for headers in hostile:
        reply = operator.post("/admin/open", data={"week": WEEK}, headers=headers,
                              follow_redirects=False)
        assert reply.status_code == 403 and "cross-origin request refused" in reply.text
    assert pub.runs.get(WEEK) is None
    # the tender form and the login are guarded alike
    v2.open_form(pub, WEEK, now=NOW)
    alice = who(pub)["Alice"]
    shift = weeks.shifts(pub, WEEK)[0].id
    reply = operator.post(alice.form(pub), data={"week": WEEK, "shift": str(shift)},
                          headers={"origin": EVIL})
    assert reply.status_code == 403
    assert week_show(pub, WEEK)["submissions"] == []
    assert operator.post("/admin/login", data={"password": PASSWORD},
                         headers={"sec-fetch-site": "cross-site"}).status_code == 403
    # the same request from our own pages goes through
    same = operator.post(alice.form(pub), data={"week": WEEK, "shift": str(shift)},
                         headers={"origin": "https://testserver",
                                  "sec-fetch-site": "same-origin"}, follow_redirects=False)
    assert same.status_code == 303


def test_pages_forbid_framing_and_referrers(client: TestClient) -> None:
    reply = client.get("/admin/login")
    assert reply.headers["x-frame-options"] == "DENY"
    assert reply.headers["referrer-policy"] == "no-referrer"
    assert "script-src 'self'" in reply.headers["content-security-policy"]


# -- the week page and its buttons -----------------------------------------------------


def test_only_the_legal_buttons_are_drawn(operator: TestClient, pub: Pub) -> None:
    reply = operator.post("/admin/open", data={"week": WEEK}, follow_redirects=True)
    assert "COLLECTING" in reply.text
    assert buttons(reply.text) == ["extend", "close"]
    press(operator, "close")
    assert buttons(operator.get(f"/admin/weeks/{WEEK}").text) == ["reopen", "generate"]
    press(operator, "generate")
    assert buttons(operator.get(f"/admin/weeks/{WEEK}").text) == [
        "regenerate", "reopen_after_generate", "approve"]
    press(operator, "approve")
    assert buttons(operator.get(f"/admin/weeks/{WEEK}").text) == ["unapprove", "send"]
    text = press(operator, "send")
    assert "SENT" in text and buttons(text) == []
    assert "never sent twice" in text


def test_create_as_draft_makes_the_week_and_its_page_shows_it(operator: TestClient,
                                                              pub: Pub) -> None:
    """#17.9: the weeks page's "Create as draft" form: DRAFT, its shifts, the form not open;
    a second click is refused with nothing changed; a day that is not a Monday writes
    nothing."""
    weeks_page = operator.get("/admin/").text
    assert 'action="/admin/create"' in weeks_page and "Create as draft" in weeks_page
    reply = operator.post("/admin/create", data={"week": WEEK}, follow_redirects=True)
    assert reply.status_code == 200
    assert "as a draft" in reply.text and "DRAFT" in reply.text
    assert buttons(reply.text) == ["open"]
    row = pub.runs.get(WEEK)
    assert row is not None and row["v2_state"] == "DRAFT" and row["opened_at"] is None
    assert len(weeks.shifts(pub, WEEK)) == 3
    again = operator.post("/admin/create", data={"week": WEEK}, follow_redirects=True)
    assert "exists already" in again.text and pub.runs.get(WEEK) == row
    assert WEEK in operator.get("/admin/").text
    tuesday = (datetime.fromisoformat(WEEK) + timedelta(days=8)).date().isoformat()
    bad = operator.post("/admin/create", data={"week": tuesday}, follow_redirects=True)
    assert bad.status_code == 200 and pub.runs.get(tuesday) is None


@pytest.mark.both_databases("the week page's reads and every button's move")
def test_a_week_runs_through_its_buttons(operator: TestClient, pub: Pub) -> None:
    team = who(pub)
    operator.post("/admin/open", data={"week": WEEK})
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    for name, picks in (("Alice", ids[:3]), ("Bob", ids[2:5])):
        reply = operator.post(team[name].form(pub), data={
            "week": WEEK, "shift": [str(i) for i in picks], "max": "2"},
            follow_redirects=True)
        assert reply.status_code == 200 and "Saved." in reply.text
    for action in ("close", "generate", "approve"):
        assert "refused" not in press(operator, action).lower()
    page = press(operator, "send")
    shown = week_show(pub, WEEK)
    assert shown["state"] == "SENT"
    assert {d["status"] for d in shown["deliveries"]} == {"sent"}
    # the grid: every shift a row, the assigned tenders as columns, unfilled marked
    assert 'class="on">assigned' in page and "unfilled" in page
    assert page.count("<th scope=\"row\">") == len(ids)
    assert "Alice" in page and "Bob" in page
    # the history lists each move in the machine's own words
    for label in ("open form", "close form", "generate", "operator approves",
                  "send schedule email"):
        assert f">{label}</td>" in page
    assert 'class="mermaid"' in page and "class SENT current" in page


def test_autopilot_is_switched_from_the_week_page(operator: TestClient, pub: Pub) -> None:
    operator.post("/admin/open", data={"week": WEEK})
    page = operator.get(f"/admin/weeks/{WEEK}").text
    assert "Autopilot on" in page
    reply = operator.post(f"/admin/weeks/{WEEK}/do/autopilot",
                          data={"seen": seen(page), "on": "1"}, follow_redirects=True)
    assert week_show(pub, WEEK)["autopilot"] is True
    assert "Autopilot off" in reply.text


def test_the_legacy_engine_draws_the_buttons_of_its_inferred_state(operator: TestClient,
                                                                   pub: Pub) -> None:
    flags.set_v2(pub, False, now=NOW)
    reply = operator.post("/admin/open", data={"week": WEEK}, follow_redirects=True)
    assert "Engine: <strong>legacy</strong>" in reply.text
    assert buttons(reply.text) == ["extend", "close"]
    for action in ("close", "generate", "approve", "send"):
        assert "refused" not in press(operator, action).lower(), action
    shown = week_show(pub, WEEK)
    assert shown["state"] == "SENT" and shown["legacy_status"] == "sent"
    assert buttons(operator.get(f"/admin/weeks/{WEEK}").text) == []


def cut_over(pub: Pub) -> None:
    """The pub as one that was cut over to v2: a passed dress rehearsal on record (a pub
    that began on v2 has nothing to cut over, and its page says only that)."""
    made = record.insert(pub, week=WEEK, scratch="scratch", now=NOW, by="web")
    assert record.finish(pub, made.id, record.PASSED, NOW)


def test_the_cutover_page_flips_only_in_the_idle_gap(operator: TestClient, pub: Pub) -> None:
    cut_over(pub)
    page = operator.get("/admin/cutover").text
    assert "v2 (PUB_SCHEDULER_V2 on)" in page and "Rehearsal mode" in page
    assert "<strong>yes</strong>: no run is in flight" in page
    operator.post("/admin/open", data={"week": WEEK})
    page = operator.get("/admin/cutover").text
    assert "<strong class=\"warn\">no</strong>" in page and f"week {WEEK} is in flight" in page
    refused = operator.post("/admin/cutover/flag", data={"on": "0"}, follow_redirects=True)
    assert "refused" in refused.text and flags.v2_enabled(pub)
    forced = operator.post("/admin/cutover/flag", data={"on": "0", "force": "1"},
                           follow_redirects=True)
    assert "legacy (PUB_SCHEDULER_V2 off)" in forced.text and not flags.v2_enabled(pub)


def test_extend_sets_the_deadline_in_local_time(operator: TestClient, pub: Pub) -> None:
    operator.post("/admin/open", data={"week": WEEK})
    text = press(operator, "extend", deadline="2026-12-02T21:30")
    assert "refused" not in text.lower()
    deadline = datetime.fromisoformat(week_show(pub, WEEK)["deadline_at"].replace("Z", "+00:00"))
    assert deadline.astimezone(pub.config.tz).strftime("%Y-%m-%d %H:%M") == "2026-12-02 21:30"


def test_a_refused_click_shows_the_reason_not_a_trace(operator: TestClient,
                                                      pub: Pub) -> None:
    operator.post("/admin/open", data={"week": WEEK})
    page = operator.get(f"/admin/weeks/{WEEK}").text
    # a button the page did not draw, posted by hand: the engine says why not
    reply = operator.post(f"/admin/weeks/{WEEK}/do/approve", data={"seen": seen(page)},
                          follow_redirects=True)
    assert reply.status_code == 200
    assert ("Cannot approve the roster of the week of 7 Dec: it is taking availability"
            in reply.text)  # in words, not the engine's STATE_MISMATCH / COLLECTING
    assert "Traceback" not in reply.text
    assert week_show(pub, WEEK)["state"] == "COLLECTING"
    bad = operator.post(f"/admin/weeks/{WEEK}/do/extend",
                        data={"seen": seen(page), "deadline": "not a time"},
                        follow_redirects=True)
    assert "not a date and time" in bad.text and "Traceback" not in bad.text
    assert operator.get("/admin/weeks/2026-12-08").status_code == 404  # not a Monday


@pytest.mark.both_databases("races: a double click's two posts")
def test_a_double_click_has_one_effect(operator: TestClient, pub: Pub) -> None:
    operator.post("/admin/open", data={"week": WEEK})
    page = operator.get(f"/admin/weeks/{WEEK}").text
    form = {"seen": seen(page), "deadline": "2026-12-02T21:30"}
    first = operator.post(f"/admin/weeks/{WEEK}/do/extend", data=form, follow_redirects=True)
    second = operator.post(f"/admin/weeks/{WEEK}/do/extend", data=form, follow_redirects=True)
    assert "refused" not in first.text.lower()
    assert "STALE" not in first.text and "changed since this page was drawn" in second.text
    extends = [h for h in week_show(pub, WEEK)["history"] if h["edge"] == "extend"]
    assert len(extends) == 1
    # a self-edge (extend) would apply twice without the fingerprint; the send twice is
    # refused by the engine as well (the page's fingerprint is stale, then the state)
    for action in ("close", "generate", "approve"):
        press(operator, action)
    page = operator.get(f"/admin/weeks/{WEEK}").text
    for _ in range(2):
        operator.post(f"/admin/weeks/{WEEK}/do/send", data={"seen": seen(page)})
    sends = [h for h in week_show(pub, WEEK)["history"] if h["edge"] == "send"]
    assert len(sends) == 1


def test_the_fingerprint_follows_the_row(pub: Pub) -> None:
    v2.open_form(pub, WEEK, now=NOW)
    before = pub.runs.get(WEEK)
    assert before is not None
    v2.extend(pub, WEEK, NOW + timedelta(days=2, hours=8), now=NOW)
    after = pub.runs.get(WEEK)
    assert after is not None and fingerprint(before) != fingerprint(after)


# -- the tender's pages ----------------------------------------------------------------


def test_the_tender_form_saves_changes_and_shows_them(client: TestClient, pub: Pub) -> None:
    alice = who(pub)["Alice"]
    assert "No form is open" in client.get(alice.form(pub)).text
    v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    page = client.get(alice.form(pub)).text
    assert "Hi Alice" in page and "week of Mon 7 Dec 2026" in page  # WEEK, in words
    assert page.count('name="shift"') == len(ids)
    client.post(alice.form(pub), data={"week": WEEK, "shift": [str(ids[0]), str(ids[1])],
                                       "max": "1"})
    client.post(alice.form(pub), data={"week": WEEK, "shift": [str(ids[2])], "max": ""})
    mine = [s for s in week_show(pub, WEEK)["submissions"] if s["email"] == alice.email]
    assert mine == [{"email": alice.email, "shift_ids": [ids[2]], "max": None,
                     "source": "form"}]
    page = client.get(alice.form(pub)).text
    assert "What you submitted" in page and "no limit" in page
    assert f'value="{ids[2]}" checked' in page and f'value="{ids[0]}" checked' not in page


def test_bad_tender_input_is_refused_with_nothing_written(client: TestClient,
                                                          pub: Pub) -> None:
    alice = who(pub)["Alice"]
    v2.open_form(pub, WEEK, now=NOW)
    other = "2026-12-14"
    for data in ({"week": WEEK, "shift": "999999"}, {"week": WEEK, "max": "many"},
                 {"week": WEEK, "max": "99"}, {"week": other, "shift": "1"}):
        reply = client.post(alice.form(pub), data=data)
        assert reply.status_code == 400, data
        assert "Traceback" not in reply.text
    assert week_show(pub, WEEK)["submissions"] == []


def test_after_close_the_form_says_closed_and_when(client: TestClient, pub: Pub) -> None:
    alice = who(pub)["Alice"]
    v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    client.post(alice.form(pub), data={"week": WEEK, "shift": str(ids[0])})
    v2.close(pub, WEEK, now=NOW)
    page = client.get(alice.form(pub)).text
    assert "is closed" in page and "The schedule is expected by" in page
    assert 'name="shift"' not in page and "What you submitted" in page
    late = client.post(alice.form(pub), data={"week": WEEK, "shift": str(ids[1])})
    assert late.status_code == 409 and "closed" in late.text
    # a short page (the rush's late answers draw no week) with the way back to the form
    assert "not saved" in late.text and f'href="{alice.form(pub)}"' in late.text
    assert 'name="shift"' not in late.text
    mine = [s for s in week_show(pub, WEEK)["submissions"] if s["email"] == alice.email]
    assert mine[0]["shift_ids"] == [ids[0]]


def test_bad_links_do_nothing(client: TestClient, pub: Pub) -> None:
    alice = who(pub)["Alice"]
    v2.open_form(pub, WEEK, now=NOW)
    good = alice.form(pub)
    tampered = good[:-3] + ("AAA" if not good.endswith("AAA") else "BBB")
    forged_id = "/t/" + links.tender_token(pub.config, alice.id + 100)
    other_secret = "/t/" + links._signer(
        type(pub.config)(secret="another-secret"), "form").dumps({"t": alice.id, "v": 1})
    calendar_as_form = "/t/" + alice.calendar(pub).removeprefix("/cal/").removesuffix(".ics")
    for path in (tampered, forged_id, other_secret, calendar_as_form, "/t/garbage"):
        reply = client.get(path)
        assert reply.status_code == 404 and "This link does not work" in reply.text, path
        assert client.post(path, data={"week": WEEK}).status_code == 404
    assert client.get(alice.form(pub).replace("/t/", "/cal/") + ".ics").status_code == 404
    assert week_show(pub, WEEK)["submissions"] == []


def test_a_revoked_or_deactivated_tender_link_is_dead(client: TestClient, pub: Pub) -> None:
    team = who(pub)
    old_form, old_cal = team["Alice"].form(pub), team["Alice"].calendar(pub)
    assert client.get(old_form).status_code == 200
    tenders.revoke_links(pub, team["Alice"].email)
    assert client.get(old_form).status_code == 404
    assert client.get(old_cal).status_code == 404
    assert client.get(team["Alice"].form(pub)).status_code == 200  # the new link works
    tenders.deactivate(pub, team["Bob"].email)
    assert client.get(team["Bob"].form(pub)).status_code == 404


@pytest.mark.both_databases("the link version's update")
def test_the_operator_revokes_a_link_on_the_tenders_page(operator: TestClient,
                                                         pub: Pub) -> None:
    alice = who(pub)["Alice"]
    old = alice.form(pub)
    page = operator.get("/admin/tenders").text
    assert "https://pub.example" + old in page
    reply = operator.post(f"/admin/tenders/{alice.id}/revoke", follow_redirects=True)
    assert "revoked the links of Alice" in reply.text
    assert "https://pub.example" + old not in reply.text
    assert "https://pub.example" + alice.form(pub) in reply.text


def test_the_calendar_feed_lists_assigned_shifts_of_sent_weeks(client: TestClient,
                                                               pub: Pub) -> None:
    team = who(pub)
    v2.open_form(pub, WEEK, now=NOW)
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    from pubsched.week.submissions import submit

    submit(pub, WEEK, team["Alice"].email, ids[:2], now=NOW)
    for step in (v2.close, v2.generate, v2.approve):
        assert step(pub, WEEK, now=NOW).applied
    feed = client.get(team["Alice"].calendar(pub))
    assert feed.status_code == 200 and feed.headers["content-type"].startswith("text/calendar")
    assert Calendar.from_ical(feed.content).walk("VEVENT") == []  # approved is not final
    assert v2.send(pub, WEEK, now=NOW).applied
    feed = client.get(team["Alice"].calendar(pub))
    events = Calendar.from_ical(feed.content).walk("VEVENT")
    mine = {s["id"] for s in week_show(pub, WEEK)["shifts"]
            if team["Alice"].email in s["assigned"]}
    assert len(events) == len(mine) == 2
    assert all(str(e["SUMMARY"]).startswith("Shift at The pub") for e in events)
    assert client.get(team["Alice"].calendar(pub)).content == feed.content  # stable bytes
    empty = Calendar.from_ical(client.get(team["Carol"].calendar(pub)).content)
    assert empty.walk("VEVENT") == []


def test_an_uncertain_delivery_is_marked_and_resent_on_request(tmp_path: Path) -> None:
    with SmtpTestServer() as smtp:
        mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                           PUBSCHED_SMTP_TIMEOUT="2"))
        pub = make_pub(f"sqlite:///{tmp_path}/uncertain.db", mail, web=True)
        try:
            team = who(pub)
            v2.open_form(pub, WEEK, now=NOW)
            ids = [s.id for s in weeks.shifts(pub, WEEK)]
            from pubsched.week.submissions import submit

            submit(pub, WEEK, team["Alice"].email, ids, now=NOW)
            for step in (v2.close, v2.generate, v2.approve):
                assert step(pub, WEEK, now=NOW).applied
            smtp.drop_after_data(for_recipient=team["Alice"].email)  # its fate unknown
            assert v2.send(pub, WEEK, now=NOW).applied
            smtp.clear_faults()
            app = create_app(pub, web_settings(), clock=lambda: NOW)
            with TestClient(app, base_url="https://testserver") as c:
                login(c)
                page = c.get(f"/admin/weeks/{WEEK}").text
                assert "uncertain" in page and "/do/resend" in page
                reply = c.post(f"/admin/weeks/{WEEK}/do/resend",
                               data={"seen": seen(page), "email": team["Alice"].email},
                               follow_redirects=True)
                assert "resent week" in reply.text
                assert "uncertain" not in reply.text and "/do/resend" not in reply.text
            assert len(smtp.accepted_for(team["Alice"].email)) == 1  # the resend's
        finally:
            pub.close()


def test_a_failed_send_shows_last_error_and_stays_retryable(tmp_path: Path) -> None:
    with SmtpTestServer() as smtp:
        mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                           PUBSCHED_SMTP_TIMEOUT="2"))
        pub = make_pub(f"sqlite:///{tmp_path}/failed.db", mail, web=True)
        try:
            team = who(pub)
            v2.open_form(pub, WEEK, now=NOW)
            ids = [s.id for s in weeks.shifts(pub, WEEK)]
            from pubsched.week.submissions import submit

            submit(pub, WEEK, team["Alice"].email, ids, now=NOW)
            for step in (v2.close, v2.generate, v2.approve):
                assert step(pub, WEEK, now=NOW).applied
            smtp.refuse_recipient(team["Alice"].email)
            app = create_app(pub, web_settings(), clock=lambda: NOW)
            with TestClient(app, base_url="https://testserver") as c:
                login(c)
                text = press(c, "send")
                assert 'class="flash flash-failed"' in text and "failed" in text
                assert "Last problem:" in text and team["Alice"].email in text
                assert "APPROVED" in text and buttons(text) == ["unapprove", "send"]
                smtp.clear_faults()
                text = press(c, "send")  # the retry sends to the one who failed
                assert "SENT" in text and "Last problem:" not in text
            assert len(smtp.accepted_for(team["Alice"].email)) == 1
        finally:
            pub.close()
