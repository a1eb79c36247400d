"""The cutover page's rehearsal wizard (#17.7) in-process (Starlette's TestClient), on
SQLite (PostgreSQL where marked), mail to a loopback SMTP server: one step per press, the
state in the record (a reload sees it), a stale or repeated press runs nothing, stop drops
the copy, a failed step keeps the switch disabled, bad input and a missing operator write
nothing. What a person sees is test_browser_rehearsal.py's."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest
from starlette.testclient import TestClient

from pubsched.engines.flags import v2_enabled
from pubsched.mail.settings import load_mail_settings
from pubsched.pub import Pub
from pubsched.rehearsal import STEPS, scratch
from pubsched.rehearsal import record as records
from pubsched.web.app import create_app
from pubsched.week.runs import ensure_week
from support.pub_web import login, web_settings
from support.pubs import NOW, WEEK, make_pub
from support.smtp_server import SmtpTestServer

OPERATOR = "boss@pub.example"
DISABLED_FLIP = 'id="flip" disabled'


@pytest.fixture
def legacy_pub(db_url: str, smtp: SmtpTestServer) -> Iterator[Pub]:
    """A legacy install with a week (so a rehearsal is needed) and three tenders."""
    mail = load_mail_settings(smtp.env(PUBSCHED_MAIL_FROM="pub@pub.example",
                                       PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                       PUBSCHED_SMTP_TIMEOUT="5"))
    pub = make_pub(db_url, mail, web=True, v2=False)
    ensure_week(pub, WEEK)
    try:
        yield pub
    finally:
        pub.close()


def client_for(pub: Pub) -> TestClient:
    return TestClient(create_app(pub, web_settings(), clock=lambda: NOW),
                      base_url="https://testserver")


@pytest.fixture
def operator(legacy_pub: Pub) -> Iterator[TestClient]:
    with client_for(legacy_pub) as c:
        assert login(c).status_code == 303
        yield c


def next_form(page: str) -> dict[str, str]:
    """The hidden fields of the page's "Run next step" form."""
    form = re.search(r'action="/admin/cutover/rehearsal/next".*?</form>', page, re.S)
    assert form, "no next-step button on the page"
    return dict(re.findall(r'name="(\w+)" value="(\d+)"', form.group(0)))


def press_next(operator: TestClient, fields: dict[str, str]) -> str:
    return operator.post("/admin/cutover/rehearsal/next", data=fields,
                         follow_redirects=True).text


def test_the_wizard_runs_one_step_per_press_then_the_switch_is_enabled(
        operator: TestClient, legacy_pub: Pub, smtp: SmtpTestServer) -> None:
    page = operator.get("/admin/cutover").text
    assert "Start a rehearsal" in page and DISABLED_FLIP in page
    assert "no rehearsal has passed here yet" in page
    page = operator.post("/admin/cutover/rehearsal", follow_redirects=True).text
    assert "started on a throwaway copy" in page
    assert "Run next step: open the form for the week of 7 Dec" in page
    for number, each in enumerate(STEPS, 1):
        fields = next_form(page)
        assert fields["step"] == str(number)
        page = press_next(operator, fields)
        done = records.unfinished(legacy_pub) or records.latest(legacy_pub)
        assert done is not None and done.step_reached == number  # one step per press
        assert each.words(WEEK) in page
    assert "Rehearsal passed: you can now switch to the new engine" in page
    assert 'action="/admin/cutover/rehearsal/next"' not in page
    assert DISABLED_FLIP not in page and "Switch v2 on" in page
    assert {to for m in smtp.received for to in m.rcpt_tos} == {OPERATOR}
    assert len(smtp.accepted) == 3
    flipped = operator.post("/admin/cutover/flag", data={"on": "1"}, follow_redirects=True)
    assert "v2 (PUB_SCHEDULER_V2 on)" in flipped.text and v2_enabled(legacy_pub)


def test_a_reload_and_a_second_browser_see_the_same_wizard_and_a_stale_press_runs_nothing(
        operator: TestClient, legacy_pub: Pub) -> None:
    operator.post("/admin/cutover/rehearsal")
    fields = next_form(operator.get("/admin/cutover").text)
    with client_for(legacy_pub) as other:
        assert login(other).status_code == 303
        assert next_form(other.get("/admin/cutover").text) == fields  # the same wizard
        first = press_next(other, fields)
        assert "step 1/9 open the form" in first
    again = press_next(operator, fields)  # the first browser's page is now stale
    assert "already being run or done" in again
    current = records.unfinished(legacy_pub)
    assert current is not None and current.step_reached == 1 and len(current.steps) == 1
    assert next_form(again)["step"] == "2"


@pytest.mark.both_databases("races: two presses at once")
def test_two_operators_pressing_next_at_once_run_the_step_once(
        operator: TestClient, legacy_pub: Pub) -> None:
    operator.post("/admin/cutover/rehearsal")
    fields = next_form(operator.get("/admin/cutover").text)
    with client_for(legacy_pub) as other:
        assert login(other).status_code == 303
        gate = threading.Barrier(2)
        pages: list[str] = []

        def press(client: TestClient) -> None:
            gate.wait()
            pages.append(press_next(client, fields))

        threads = [threading.Thread(target=press, args=(c,)) for c in (operator, other)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    ran = [p for p in pages if "step 1/9 open the form" in p]
    lost = [p for p in pages if "already being run or done" in p]
    assert (len(ran), len(lost)) == (1, 1), pages
    current = records.unfinished(legacy_pub)
    assert current is not None and current.step_reached == 1 and len(current.steps) == 1


def test_stop_abandons_the_rehearsal_and_drops_its_copy(operator: TestClient,
                                                        legacy_pub: Pub) -> None:
    operator.post("/admin/cutover/rehearsal")
    made = records.unfinished(legacy_pub)
    assert made is not None and scratch.exists(legacy_pub, made.scratch)
    page = operator.post("/admin/cutover/rehearsal/stop", data={"rehearsal": str(made.id)},
                         follow_redirects=True).text
    assert "rehearsal stopped" in page and "Start another rehearsal" in page
    assert "Stopped before the end" in page and DISABLED_FLIP in page
    done = records.get(legacy_pub, made.id)
    assert done is not None and done.outcome == "abandoned"
    assert not scratch.exists(legacy_pub, made.scratch)


def test_a_failed_step_is_shown_and_the_switch_stays_refused(
        operator: TestClient, legacy_pub: Pub, smtp: SmtpTestServer) -> None:
    smtp.refuse_recipient(OPERATOR)
    page = operator.post("/admin/cutover/rehearsal", follow_redirects=True).text
    for _ in STEPS:
        page = press_next(operator, next_form(page))
    assert "step 9/9 send the schedule (to the operator only) failed" in page
    assert "Failed</strong>: failed at send" in page and DISABLED_FLIP in page
    forced = operator.post("/admin/cutover/flag", data={"on": "1", "force": "1"},
                           follow_redirects=True).text
    assert "no dress rehearsal has passed" in forced and not v2_enabled(legacy_pub)


def test_bad_input_and_no_operator_write_nothing(operator: TestClient, legacy_pub: Pub,
                                                 db_url: str) -> None:
    for fields in ({"rehearsal": "x", "step": "1"}, {"step": "1"}, {"rehearsal": "1"}):
        page = press_next(operator, fields)
        assert "is not a number" in page, fields
    assert legacy_pub.query("SELECT * FROM pub_rehearsals") == []
    bare = make_pub(db_url, replace(legacy_pub.config.mail, operator_email=None), web=True,
                    v2=False)
    try:
        with client_for(bare) as c:
            assert login(c).status_code == 303
            page = c.get("/admin/cutover").text
            assert re.search(r'id="start-rehearsal"[^>]* disabled>', page)
            refused = c.post("/admin/cutover/rehearsal", follow_redirects=True).text
            assert "set PUBSCHED_OPERATOR_EMAIL" in refused
        assert bare.query("SELECT * FROM pub_rehearsals") == []
        assert scratch.leftovers(bare) == []
    finally:
        bare.close()
