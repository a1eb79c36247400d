"""Issue 29, item 4: the hand edits of a week are in its history, with who did them, in
time order with the run's own moves: pins and take-offs (CLI and web), a one-off shift
added and a shift removed, a tender deactivated off it; in ``week show --json`` and on the
week page. Each is written in the edit's own unit (pubsched.week.history), so a refused
edit leaves no line. The CLI in-process through its entry point, the web in-process."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from pubsched.cli.dispatch import run as cli_run
from pubsched.pub import Pub
from pubsched.web.app import create_app
from pubsched.week import history as week_history
from pubsched.week import runs as weeks
from support.pub_web import login, web_settings
from support.pubs import NOW, WEEK

pytestmark = pytest.mark.pub_setup("web")  # Alice, Bob, Carol; the v2 flag on


def cli(url: str, *argv: str, user: str = "ann") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"USER": user, "PATH": os.environ.get("PATH", "")}
    code = cli_run(["--db", url, *argv], environ=env, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def ok(url: str, *argv: str, user: str = "ann") -> str:
    code, out, err = cli(url, *argv, user=user)
    assert code == 0, (argv, out, err)
    return out


def history(url: str) -> list[dict[str, Any]]:
    shown: list[dict[str, Any]] = json.loads(ok(url, "week", "show", WEEK, "--json"))["history"]
    return shown


def lines(url: str) -> list[tuple[str, str | None, str | None]]:
    """(what moved or was edited, its words for an edit, by), in the history's order."""
    return [(h["edge"], h["what"], h["by"]) for h in history(url)]


def rostered(url: str) -> list[int]:
    """The week opened, answered (Alice the first two shifts, Bob all), closed, generated,
    by the CLI as ann; its shift ids."""
    ok(url, "week", "open", WEEK, "--now", NOW.isoformat())
    ids = [str(s["id"]) for s in json.loads(ok(url, "week", "show", WEEK, "--json"))["shifts"]]
    ok(url, "avail", WEEK, "alice@example.com", *ids[:2])
    ok(url, "avail", WEEK, "bob@example.com", *ids)
    ok(url, "week", "close", WEEK)
    ok(url, "week", "generate", WEEK)
    return [int(i) for i in ids]


@pytest.mark.both_databases("the record is written in the edit's unit on each database")
def test_pins_and_take_offs_from_the_cli_are_in_the_history_with_who(
        db_url: str, pub: Pub) -> None:
    ids = rostered(db_url)
    ok(db_url, "week", "assign", WEEK, str(ids[2]), "carol@example.com", user="cleo")
    ok(db_url, "week", "unassign", WEEK, str(ids[0]), "bob@example.com", user="dan")
    got = lines(db_url)
    assert [edge for edge, _, _ in got] == ["create", "open", "close", "generate", "pin",
                                            "take_off"]
    assert got[-2:] == [
        ("pin", "pinned Carol on Saturday night (Sat 12 Dec 18:00)", "cli:cleo"),
        ("take_off", "took Bob off Thursday night (Thu 10 Dec 18:00)", "cli:dan")]
    assert [h["what"] for h in history(db_url)[:4]] == [None] * 4  # the moves: no words
    # in time order with the moves: a regenerate after the edits comes after them
    ok(db_url, "week", "generate", WEEK, user="eve")
    assert [(e, b) for e, _, b in lines(db_url)][-3:] == [
        ("pin", "cli:cleo"), ("take_off", "cli:dan"), ("regenerate", "cli:eve")]
    ats = [h["at"] for h in history(db_url)]
    assert ats == sorted(ats)


@pytest.mark.both_databases("a refused edit rolls its unit back, its record with it")
def test_a_refused_edit_leaves_no_line(db_url: str, pub: Pub) -> None:
    ids = rostered(db_url)
    before = history(db_url)
    shown = json.loads(ok(db_url, "week", "show", WEEK, "--json"))
    full = next(s for s in shown["shifts"] if len(s["assigned"]) >= s["slots"])
    code, _, _ = cli(db_url, "week", "assign", WEEK, str(full["id"]), "carol@example.com")
    assert code == 3  # SLOT_FULL
    code, _, _ = cli(db_url, "week", "unassign", WEEK, str(ids[2]), "alice@example.com")
    assert code == 3  # NOT_ON_SHIFT: Alice never offered Saturday
    assert history(db_url) == before
    with pytest.raises(ValueError, match="unknown kind"), pub.atomic() as tx:
        week_history.record(tx, WEEK, "nap", "slept")


def test_a_week_s_own_shifts_added_and_removed_are_in_its_history(db_url: str,
                                                                   pub: Pub) -> None:
    ok(db_url, "week", "open", WEEK, "--now", NOW.isoformat())
    ids = [s.id for s in weeks.shifts(pub, WEEK)]
    ok(db_url, "avail", WEEK, "alice@example.com", str(ids[1]))
    ok(db_url, "week", "shift", "add", WEEK, "Quiz night", "--date", "2026-12-08",
       "--start", "19:00", "--end", "23:00", user="cleo")
    ok(db_url, "week", "shift", "remove", WEEK, str(ids[1]), user="dan")
    assert lines(db_url)[-2:] == [
        ("shift_add", "added a one-off shift: Quiz night (Tue 8 Dec 19:00-23:00, 2 slots)",
         "cli:cleo"),
        ("shift_remove", "removed Friday night (Fri 11 Dec 18:00) from this week: 1 "
         "tender(s) had ticked it, their form says so", "cli:dan")]


def test_a_tender_deactivated_off_a_week_is_in_its_history(db_url: str, pub: Pub) -> None:
    rostered(db_url)
    on = [s["label"] for s in json.loads(ok(db_url, "week", "show", WEEK, "--json"))["shifts"]
          if "bob@example.com" in s["assigned"]]
    assert on
    ok(db_url, "tender", "deactivate", "bob@example.com", user="cleo")
    edge, what, by = lines(db_url)[-1]
    assert (edge, by) == ("deactivate", "cli:cleo")
    assert what is not None and what.startswith("deactivated Bob, who was on ")
    assert all(label in what for label in on)
    # a tender on no shift of the week: nothing said about the week
    before = history(db_url)
    ok(db_url, "tender", "deactivate", "carol@example.com")
    assert history(db_url) == before


# -- the web ---------------------------------------------------------------------------------


@pytest.fixture
def web(pub: Pub) -> Iterator[TestClient]:
    app = create_app(pub, web_settings(), clock=lambda: NOW)
    with TestClient(app, base_url="https://testserver") as client:
        assert login(client).status_code == 303
        yield client


def test_the_web_s_edits_say_the_operator_and_the_page_shows_them(
        web: TestClient, db_url: str, pub: Pub) -> None:
    ids = rostered(db_url)
    added = web.post(f"/admin/weeks/{WEEK}/roster/assign",
                     data={"shift": str(ids[2]), "email": "carol@example.com"},
                     follow_redirects=True)
    assert "flash-ok" in added.text, added.text
    off = web.post(f"/admin/weeks/{WEEK}/roster/unassign",
                   data={"shift": str(ids[0]), "email": "bob@example.com"},
                   follow_redirects=True)
    assert "flash-ok" in off.text, off.text
    assert lines(db_url)[-2:] == [
        ("pin", "pinned Carol on Saturday night (Sat 12 Dec 18:00)", "operator:admin"),
        ("take_off", "took Bob off Thursday night (Thu 10 Dec 18:00)", "operator:admin")]
    page = web.get(f"/admin/weeks/{WEEK}").text
    past = page[page.index('id="h-hist"'):]
    rows = past[:past.index("</table>")]
    # newest first on the page, as the moves are
    take_off = rows.index('data-edit="take_off"')
    pin = rows.index('data-edit="pin"')
    assert take_off < pin < rows.index(">cli:ann</td>")  # the CLI's moves came before
    assert "took Bob off Thursday night (Thu 10 Dec 18:00)" in rows
    assert ">operator:admin</td>" in rows and ">cli:ann</td>" in rows
