"""``pubsched cover ask|take|cancel|list`` (issue 19) on SQLite (PostgreSQL where marked),
through the real command line with mail to a real SMTP server on loopback: every command's
exit code, its words, its JSON; bad input exits 2 with nothing written, a refusal exits 3
with its reason; ``week show --json`` gains ``covers`` and shows the roster as it is now;
the commands deliver their emails right after their commit, and what SMTP refused is left
for ``pubsched tick``."""

from __future__ import annotations

from typing import Any

import pytest

from support.pub_cli import OPERATOR, Cli, one_line, snapshot, use_env
from support.smtp_server import SmtpTestServer

WEEK = "2026-12-14"  # its form opens Mon 7 Dec; Thu 17, Fri 18, Sat 19 Dec nights
OPENED = "2026-12-07T15:00:00Z"
LATER = "2026-12-08T12:00:00Z"  # after the send, before any shift
ANN, BOB, CAT, DAN = (f"{n}@pub.example" for n in ("ann", "bob", "cat", "dan"))


@pytest.fixture
def run(db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        smtp: SmtpTestServer) -> Cli:
    use_env(monkeypatch, smtp, PUBSCHED_PUB_NAME="The Crown")
    return Cli(db_url, capsys)


def sent_week(run: Cli) -> list[int]:
    """Ann and Bob on Thursday, Cat on Friday, Dan nowhere; sent. The shift ids."""
    for name, email in (("Ann", ANN), ("Bob", BOB), ("Cat", CAT), ("Dan", DAN)):
        run.ok("tender", "add", name, email)
    run.ok("week", "open", WEEK, "--now", OPENED)
    ids = [int(s["id"]) for s in run.json("week", "show", WEEK)["shifts"]]
    for email, shift in ((ANN, ids[0]), (BOB, ids[0]), (CAT, ids[1])):
        run.ok("avail", WEEK, email, str(shift), "--now", OPENED)
    for step in ("close", "generate", "approve", "send"):
        run.ok("week", step, WEEK, "--now", OPENED)
    return ids


def cover_subjects(smtp: SmtpTestServer) -> list[tuple[str, str]]:
    return sorted((m.rcpt_tos[0], str(m.message["Subject"])) for m in smtp.accepted
                  if "your shifts" not in str(m.message["Subject"]))


@pytest.mark.both_databases("the cover commands end to end")
def test_ask_take_list_and_week_show(run: Cli, db_url: str, smtp: SmtpTestServer) -> None:
    ids = sent_week(run)
    asked = run.ok("cover", "ask", WEEK, str(ids[0]), ANN, "--note", "dentist",
                   "--now", LATER)
    assert asked.out.strip() == (
        "Request 1: Ann asked for cover for Thu 17 Dec, 18:00 - 02:00, New York time (EST); "
        "offered to 2 tenders (Cat, Dan).")
    assert cover_subjects(smtp) == [
        (CAT, "The Crown: can you cover Thu 17 Dec?"),
        (DAN, "The Crown: can you cover Thu 17 Dec?"),
        (OPERATOR, "The Crown: Ann asked for cover, Thu 17 Dec")]
    assert run.json("cover", "list") == [
        {"id": 1, "week_of": WEEK, "shift_id": ids[0], "from": ANN, "state": "OPEN",
         "taken_by": None, "note": "dentist"}]
    table = run.ok("cover", "list").out
    assert "Looking for cover" in table and "New York time" in table and "OPEN" not in table

    taken = run.ok("cover", "take", "1", DAN, "--now", LATER)
    assert taken.out.strip() == ("Request 1: Dan takes Thu 17 Dec, 18:00 - 02:00, New York "
                                 "time (EST) from Ann; the roster is changed.")
    assert [s for s in cover_subjects(smtp) if "covered" in s[1] or "working" in s[1]
            or "covers" in s[1]] == [
        (ANN, "The Crown: your shift on Thu 17 Dec is covered"),
        (DAN, "The Crown: you are working Thu 17 Dec"),
        (OPERATOR, "The Crown: Dan covers Ann, Thu 17 Dec")]
    shown = run.json("week", "show", WEEK)
    assert shown["state"] == "SENT"
    assert shown["covers"] == [{"id": 1, "shift_id": ids[0], "from": ANN, "state": "TAKEN",
                                "taken_by": DAN}]
    assert shown["shifts"][0]["assigned"] == [BOB, DAN]
    assert run.json("cover", "list", "--week", WEEK)[0]["taken_by"] == DAN
    assert run.json("cover", "list", "--week", "2026-12-21") == []
    assert "no cover requests for the week of 2026-12-21" in run.ok(
        "cover", "list", "--week", "2026-12-21").out

    again = run("cover", "take", "1", CAT, "--now", LATER)
    assert again.code == 3
    assert one_line(again.err) == ("pubsched: refused (COVER_TAKEN): Request 1 (Thu 17 Dec, "
                                   "18:00 - 02:00, New York time (EST)) was already taken "
                                   "by Dan: nothing changed.")


def test_cancel_then_refusals_exit_3(run: Cli, smtp: SmtpTestServer) -> None:
    ids = sent_week(run)
    run.ok("cover", "ask", WEEK, str(ids[0]), ANN, "--now", LATER)
    twice = run("cover", "ask", WEEK, str(ids[0]), ANN, "--now", LATER)
    assert twice.code == 3 and "(ALREADY_ASKED)" in one_line(twice.err)
    not_on = run("cover", "ask", WEEK, str(ids[1]), ANN, "--now", LATER)
    assert not_on.code == 3 and "Ann is not on Fri 18 Dec" in one_line(not_on.err)
    own = run("cover", "take", "1", ANN, "--now", LATER)
    assert own.code == 3 and "(OWN_REQUEST)" in one_line(own.err)
    busy = run("cover", "take", "1", BOB, "--now", LATER)
    assert busy.code == 3 and one_line(busy.err).endswith(
        "Bob cannot take Thu 17 Dec, 18:00 - 02:00, New York time (EST): they already work "
        "that night.")

    cancelled = run.ok("cover", "cancel", "1", "--now", LATER)
    assert cancelled.out.strip().startswith("Request 1 is called off: Ann still works")
    assert (ANN, "The Crown: your cover request for Thu 17 Dec is called off") in \
        cover_subjects(smtp)
    assert run("cover", "cancel", "1").code == 3
    late = run("cover", "take", "1", CAT, "--now", LATER)
    assert late.code == 3 and "(COVER_CANCELLED)" in one_line(late.err)
    assert run.json("cover", "list")[0]["state"] == "CANCELLED"


def test_a_week_not_sent_and_a_started_shift_are_refused(run: Cli) -> None:
    for name, email in (("Ann", ANN), ("Bob", BOB)):
        run.ok("tender", "add", name, email)
    run.ok("week", "open", WEEK, "--now", OPENED)
    ids = [int(s["id"]) for s in run.json("week", "show", WEEK)["shifts"]]
    run.ok("avail", WEEK, ANN, str(ids[0]), "--now", OPENED)
    for step in ("close", "generate"):
        run.ok("week", step, WEEK, "--now", OPENED)
    early = run("cover", "ask", WEEK, str(ids[0]), ANN, "--now", LATER)
    assert early.code == 3 and one_line(early.err).startswith(
        "pubsched: refused (WEEK_NOT_SENT): The schedule for the week of 14 Dec is not sent "
        "yet")
    for step in ("approve", "send"):
        run.ok("week", step, WEEK, "--now", OPENED)
    started = run("cover", "ask", WEEK, str(ids[0]), ANN, "--now", "2026-12-17T23:30:00Z")
    assert started.code == 3 and "(SHIFT_STARTED)" in one_line(started.err)


@pytest.mark.parametrize("argv", [
    ["cover", "ask", "2026-12-15", "1", ANN],           # not a Monday
    ["cover", "ask", WEEK, "x", ANN],                    # not a number
    ["cover", "ask", WEEK, "999", ANN],                  # not a shift of the week
    ["cover", "ask", "2026-12-21", "1", ANN],            # no such week
    ["cover", "ask", WEEK, "1", "nobody@pub.example"],   # no such tender
    ["cover", "ask", WEEK, "1", ANN, "--note", "x" * 501],
    ["cover", "ask", WEEK, "1", ANN, "--note", "bell\a"],
    ["cover", "take", "7", ANN],                         # no such request
    ["cover", "take", "0", ANN],
    ["cover", "take", "-1", ANN],
    ["cover", "take", "one", ANN],
    ["cover", "cancel", "7"],
    ["cover", "list", "--week", "2026-12-16"],
    ["cover", "ask", WEEK, "1"],                         # EMAIL missing
    ["cover"],
])
def test_bad_input_exits_2_and_writes_nothing(run: Cli, db_url: str, argv: list[str]) -> None:
    sent_week(run)
    before = snapshot(db_url)
    ran = run(*argv, "--now", LATER) if argv[-1] != "cover" else run(*argv)
    assert ran.code == 2, ran
    assert snapshot(db_url) == before


def test_an_email_smtp_refuses_is_a_warning_and_the_tick_sends_it(
        run: Cli, smtp: SmtpTestServer) -> None:
    ids = sent_week(run)
    smtp.refuse_recipient(CAT)
    asked = run("cover", "ask", WEEK, str(ids[0]), ANN, "--now", LATER)
    assert asked.code == 0 and asked.out.startswith("Request 1:")
    assert one_line(asked.err).startswith("pubsched: warning: an email did not go through")
    assert "the next tick tries again" in asked.err
    smtp.clear_faults()
    assert "email" not in run.ok("tick", "--now", LATER).out  # refused just now: it waits
    ticked = run.ok("tick", "--now", "2026-12-08T12:01:00Z")  # the next tick, a minute on
    assert "tick: 1 email dealt with" in ticked.out
    offers: dict[str, Any] = {}
    for m in smtp.accepted:
        if "can you cover" in str(m.message["Subject"]):
            offers[m.rcpt_tos[0]] = offers.get(m.rcpt_tos[0], 0) + 1
    assert offers == {CAT: 1, DAN: 1}  # Cat's once, after the refusal; Dan's never again
