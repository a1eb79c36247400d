"""Who moved each week (issues 18, 21): every v2 move records ``by`` in its event's own
``actor`` column (rowstate's ``by=``: ``operator:EMAIL`` from the web, ``cli:USER`` from the
CLI, ``tick`` from the tick), and ``week show --json``'s ``history[].by`` and the week
page's "By" column show it. On SQLite (PostgreSQL where marked); the web through its app
in-process, the CLI through its own entry point."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

import rowstate
from pubsched.cli.dispatch import run as cli_run
from pubsched.engines import flags
from pubsched.people import operators
from pubsched.pub import Pub
from pubsched.verdicts import BadInput
from pubsched.web.app import create_app
from pubsched.week import runs as weeks
from pubsched.week import submissions
from pubsched.week.view import week_show
from support.pub_web import FAST_HASH, login, people, seen, web_settings
from support.pubs import NOW, WEEK

pytestmark = pytest.mark.pub_setup("web")
GOOD = "correct horse battery"


def cli(url: str, *argv: str, user: str = "ann") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"USER": user, "PATH": os.environ.get("PATH", "")}
    code = cli_run(["--db", url, *argv], environ=env, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def ok(url: str, *argv: str, user: str = "ann") -> str:
    code, out, err = cli(url, *argv, user=user)
    assert code == 0, (argv, out, err)
    return out


def history(url: str, week: str = WEEK) -> list[dict[str, Any]]:
    shown: list[dict[str, Any]] = json.loads(ok(url, "week", "show", week, "--json"))["history"]
    return shown


def moves(url: str) -> list[tuple[str, str | None]]:
    return [(h["edge"], h["by"]) for h in history(url)]


def event_actors(pub: Pub) -> list[tuple[Any, Any]]:
    rows = pub.query("SELECT actor, data FROM rowstate_events WHERE row_key = %s ORDER BY id",
                     [json.dumps([WEEK])])
    return [(r["actor"], r["data"]) for r in rows]


# -- the CLI ---------------------------------------------------------------------------------


@pytest.mark.both_databases("the events' actor column")
def test_the_cli_records_cli_user_or_by_name(db_url: str, pub: Pub) -> None:
    ok(db_url, "week", "open", WEEK, "--now", NOW.isoformat())
    ids = [str(s.id) for s in weeks.shifts(pub, WEEK)]
    ok(db_url, "avail", WEEK, "alice@example.com", *ids[:2])
    ok(db_url, "week", "close", WEEK)  # a leased edge: run(..., data=)
    ok(db_url, "--by", "cleo", "week", "generate", WEEK)  # before the command
    ok(db_url, "week", "approve", WEEK, "--by", "dan")  # after it
    ok(db_url, "week", "unapprove", WEEK, user="eve")
    assert moves(db_url) == [("create", "cli:ann"), ("open", "cli:ann"), ("close", "cli:ann"),
                             ("generate", "cli:cleo"), ("approve", "cli:dan"),
                             ("unapprove", "cli:eve")]
    # the event rows themselves carry it, in their own column, not in the data (the outbox
    # publishes it too, as Event.by)
    assert event_actors(pub) == [(b, None) for b in (
        "cli:ann", "cli:ann", "cli:ann", "cli:cleo", "cli:dan", "cli:eve")]
    assert [e.by for e in pub.runs.history(WEEK)] == [b for b, _ in event_actors(pub)]


def test_a_bad_by_is_bad_usage_and_moves_nothing(db_url: str, pub: Pub) -> None:
    for bad in ("", "two words", "x" * 65, "tab\there"):
        code, _, err = cli(db_url, "--by", bad, "week", "open", WEEK,
                             "--now", NOW.isoformat())
        assert code == 2 and "--by" in err, (bad, err)
    assert pub.runs.get(WEEK) is None
    assert pub.query("SELECT id FROM rowstate_events") == []


def test_no_user_in_the_environment_is_cli_unknown(db_url: str, pub: Pub) -> None:
    ok(db_url, "week", "open", WEEK, "--now", NOW.isoformat(), user="")
    assert moves(db_url)[-1] == ("open", "cli:unknown")


# -- the tick --------------------------------------------------------------------------------


def test_the_tick_records_tick_even_run_from_a_shell(db_url: str, pub: Pub) -> None:
    team = people(pub)
    ok(db_url, "week", "create", WEEK, "--by", "boss")
    ok(db_url, "week", "autopilot", WEEK, "on")
    row = pub.runs.get(WEEK)
    assert row is not None
    opens = pub.runs.core.dialect.parse_time(row["opens_at"])
    assert opens is not None
    ok(db_url, "tick", "--now", opens.isoformat())  # the autopilot open: its own move
    for t in team.values():
        submissions.submit(pub, WEEK, t.email, [s.id for s in weeks.shifts(pub, WEEK)],
                           now=opens)
    late = pub.runs.core.dialect.parse_time(pub.runs.get(WEEK)["generate_at"])  # type: ignore[index]
    assert late is not None
    ok(db_url, "tick", "--now", (late + timedelta(hours=1)).isoformat())  # fire_due
    assert moves(db_url) == [("create", "cli:boss"), ("open", "tick"), ("close", "tick"),
                             ("generate", "tick")]


def test_fire_due_checks_its_data_before_any_write(pub: Pub) -> None:
    weeks.ensure_week(pub, WEEK, now=NOW)
    weeks.set_autopilot(pub, WEEK, True)
    before = pub.query("SELECT COUNT(*) AS n FROM rowstate_events")
    with pytest.raises(rowstate.ValidationError):
        pub.runs.fire_due(now=NOW + timedelta(days=30), data={"by": object()})
    assert pub.query("SELECT COUNT(*) AS n FROM rowstate_events") == before
    assert week_show(pub, WEEK)["state"] == "DRAFT"


# -- the web ---------------------------------------------------------------------------------


@pytest.fixture
def web(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client:
        yield client


def press(client: TestClient, action: str) -> None:
    page = client.get(f"/admin/weeks/{WEEK}").text
    reply = client.post(f"/admin/weeks/{WEEK}/do/{action}", data={"seen": seen(page)},
                        follow_redirects=True)
    assert reply.status_code == 200 and "flash-ok" in reply.text, reply.text


def test_the_web_records_the_operator_and_the_page_shows_it(
        web: TestClient, pub: Pub, db_url: str) -> None:
    assert operators.add(pub, "Ann@Pub.example", GOOD, hasher=FAST_HASH, now=NOW)
    assert login(web, GOOD, "ann@pub.example").status_code == 303
    assert web.post("/admin/open", data={"week": WEEK},
                    follow_redirects=False).status_code == 303
    press(web, "close")
    web.post("/admin/logout")
    assert login(web).status_code == 303  # the quick start's admin
    press(web, "generate")
    assert moves(db_url) == [("create", "operator:Ann@Pub.example"),
                             ("open", "operator:Ann@Pub.example"),
                             ("close", "operator:Ann@Pub.example"),
                             ("generate", "operator:admin")]
    page = web.get(f"/admin/weeks/{WEEK}").text
    past = page[page.rindex("<table"):]
    assert '<th scope="col">By</th>' in past
    assert ">operator:Ann@Pub.example</td>" in past and ">operator:admin</td>" in past


def test_the_legacy_engine_keeps_no_history_so_by_is_never_made_up(
        db_url: str, pub: Pub) -> None:
    flags.set_v2(pub, False, now=NOW)
    ok(db_url, "week", "open", WEEK, "--now", NOW.isoformat())
    assert history(db_url) == []  # the legacy engine writes no events
    # a week made by code that said nobody (a script on the domain): by null, not a guess
    weeks.ensure_week(pub, "2026-12-14", now=NOW)
    assert [h["by"] for h in history(db_url, "2026-12-14")] in ([], [None])


# -- the acting-as context ---------------------------------------------------------------


def test_acting_as_nests(pub: Pub) -> None:
    assert pub.actor is None
    with pub.acting_as("cli:ann"):
        assert pub.actor == "cli:ann"
        with pub.acting_as("tick"):
            assert pub.actor == "tick"
        assert pub.actor == "cli:ann"
    assert pub.actor is None
    for bad in ("", "   ", "x" * 201, "a\nb"):
        with pytest.raises(BadInput), pub.acting_as(bad):
            pass


def test_an_event_from_before_0048_still_says_who_from_its_data(db_url: str, pub: Pub) -> None:
    """Events written before events had their own ``by`` kept it in their data: the
    history still reads it there (and the event's own ``by`` wins when both say)."""
    weeks.ensure_week(pub, WEEK, now=NOW)
    assert pub.runs.transition(WEEK, "COLLECTING", data={"by": "cli:old"}).applied
    assert pub.runs.transition(WEEK, "COLLECTING", by="cli:new",
                               data={"by": "cli:old"}).applied  # extend
    assert [h["by"] for h in history(db_url)][-2:] == ["cli:old", "cli:new"]
