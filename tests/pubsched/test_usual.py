"""A tender's usual (issue 19, standing availability) on SQLite (PostgreSQL where marked):
saved with an answer (``avail --usual``, the form's "save this as my usual"), shown by
``tender show``; a week they never answer is answered from it by the close (the v2 close,
the tick's autopilot close, the legacy close), marked "usual" in ``week show`` and its JSON;
their own answer after a reopen replaces it; nights they are away are not taken from it."""

from __future__ import annotations

from typing import Any

import pytest

from support.pub_cli import Cli, one_line, snapshot, use_env
from support.smtp_server import SmtpTestServer

A, B = "2026-12-14", "2026-12-21"  # Thu, Fri, Sat 18:00 - 02:00 New York, two slots each
FORM_OPEN = "2026-12-08T15:00:00Z"  # Tue 8 Dec, 10:00 in New York: A's form is open
ANA, BEN, CLEO = "ana@pub.example", "ben@pub.example", "cleo@pub.example"


class Pub(Cli):
    def __call__(self, *argv: str) -> Any:
        return super().__call__(*argv, *(() if "--now" in argv else ("--now", FORM_OPEN)))

    def show(self, week: str) -> dict[str, Any]:
        shown: dict[str, Any] = self.json("week", "show", week)
        return shown

    def ids(self, week: str) -> list[str]:
        """The week's shift ids, Thursday first."""
        return [str(s["id"]) for s in self.show(week)["shifts"]]

    def answers(self, week: str) -> dict[str, tuple[str, list[str], int | None]]:
        return {s["email"]: (s["source"], [str(i) for i in s["shift_ids"]], s["max"])
                for s in self.show(week)["submissions"]}


@pytest.fixture
def run(db_url: str, smtp: SmtpTestServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Pub:
    use_env(monkeypatch, smtp)
    runner = Pub(db_url, capsys)
    runner.ok("flag", "v2", "on")  # the legacy engine's own tests say "flag v2 off"
    for name, email in (("Ana", ANA), ("Ben", BEN), ("Cleo", CLEO)):
        runner.ok("tender", "add", name, email)
    return runner


def usual_saved_in_week_a(run: Pub) -> None:
    """Ana answers week A (Thu and Fri, at most 2) and saves it as her usual; A closes."""
    run.ok("week", "open", A)
    thu, fri, _ = run.ids(A)
    saved = run.ok("avail", A, ANA, thu, fri, "--max", "2", "--usual")
    assert "saved as their usual" in saved.out
    run.ok("week", "close", A)


@pytest.mark.both_databases("the usual's upsert and the close that reads it")
def test_the_close_answers_for_a_tender_who_did_not_from_their_usual(run: Pub) -> None:
    usual_saved_in_week_a(run)
    shown = run.json("tender", "show", ANA)
    assert shown["usual"]["shifts"] == ["Thu 18:00", "Fri 18:00"]
    assert shown["usual"]["max"] == 2
    assert shown["usual"]["saved_at"] == "2026-12-08T15:00:00Z"  # when, as week show says it
    assert "usual: Thu 18:00, Fri 18:00 (at most 2)" in run.ok("tender", "show", ANA).out
    assert run.json("tender", "show", BEN)["usual"] is None
    assert run.answers(A)[ANA][0] == "form"  # the answer itself was hers

    run.ok("week", "open", B)
    thu, fri, sat = run.ids(B)
    run.ok("avail", B, BEN, sat)
    assert ANA not in run.answers(B)  # nothing is saved for her before the close
    run.ok("week", "close", B)
    assert run.answers(B) == {ANA: ("usual", [thu, fri], 2), BEN: ("form", [sat], None)}
    text = run.ok("week", "show", B).out
    assert "from" in text and "usual" in text

    # a reopen, then her own answer: it replaces the usual's, and a close keeps it
    run.ok("week", "reopen", B)
    run.ok("avail", B, ANA, sat)
    assert run.answers(B)[ANA] == ("form", [sat], None)
    run.ok("week", "close", B)
    assert run.answers(B)[ANA] == ("form", [sat], None)
    run.ok("week", "generate", B)
    assert ANA in {e for s in run.show(B)["shifts"] for e in s["assigned"]}


def test_a_close_after_a_reopen_fills_again_from_the_usual_as_it_is_then(run: Pub) -> None:
    usual_saved_in_week_a(run)
    run.ok("week", "open", B)
    thu, fri, _ = run.ids(B)
    run.ok("week", "close", B)
    assert run.answers(B)[ANA] == ("usual", [thu, fri], 2)
    run.ok("week", "reopen", B)
    run.ok("tender", "away", ANA, "2026-12-25", "2026-12-25")  # Friday off, meanwhile
    run.ok("week", "close", B)
    assert run.answers(B) == {ANA: ("usual", [thu], 2)}


def test_nights_away_are_not_taken_from_the_usual(run: Pub) -> None:
    usual_saved_in_week_a(run)
    run.ok("tender", "away", ANA, "2026-12-24", "2026-12-24")  # Thursday of week B
    run.ok("week", "open", B)
    _, fri, _ = run.ids(B)
    run.ok("week", "close", B)
    assert run.answers(B) == {ANA: ("usual", [fri], 2)}


def test_an_inactive_tender_is_not_answered_for(run: Pub) -> None:
    usual_saved_in_week_a(run)
    run.ok("tender", "deactivate", ANA)
    run.ok("week", "open", B)
    run.ok("week", "close", B)
    assert run.answers(B) == {}


def test_saving_while_away_keeps_the_nights_the_form_could_not_offer(run: Pub) -> None:
    usual_saved_in_week_a(run)
    run.ok("tender", "away", ANA, "2026-12-25", "2026-12-26")  # Fri and Sat of week B
    run.ok("week", "open", B)
    thu, _, _ = run.ids(B)
    run.ok("avail", B, ANA, thu, "--usual")
    # Friday was not hers to tick this week: it stays in her usual; the maximum is new
    assert run.json("tender", "show", ANA)["usual"] == {
        **run.json("tender", "show", ANA)["usual"], "shifts": ["Thu 18:00", "Fri 18:00"],
        "max": None}


def test_a_refused_close_writes_nothing(run: Pub) -> None:
    usual_saved_in_week_a(run)
    run.ok("week", "create", B)
    before = snapshot(run.url)
    ran = run("week", "close", B)  # a draft: its form was never open
    assert ran.code == 3, ran
    assert snapshot(run.url) == before


def test_the_ticks_autopilot_close_uses_the_usual(run: Pub) -> None:
    usual_saved_in_week_a(run)
    run.ok("week", "open", B)
    run.ok("week", "autopilot", B, "on")
    thu, fri, _ = run.ids(B)
    ticked = run.ok("tick", "--now", "2026-12-24T03:00:00Z")  # Wed 23 Dec 22:00: past it
    assert f"{B} close" in ticked.out
    closed = [h for h in run.show(B)["history"] if h["edge"] == "close"]
    assert [h["by"] for h in closed] == ["tick"]
    assert run.answers(B) == {ANA: ("usual", [thu, fri], 2)}


def test_the_legacy_close_uses_the_usual(run: Pub) -> None:
    run.ok("flag", "v2", "off")
    usual_saved_in_week_a(run)
    run.ok("week", "open", B)
    thu, fri, _ = run.ids(B)
    run.ok("week", "close", B)
    shown = run.show(B)
    assert shown["engine"] == "legacy" and shown["state"] == "CLOSED"
    assert run.answers(B) == {ANA: ("usual", [thu, fri], 2)}


def test_usual_without_an_answer_is_bad_usage(run: Pub) -> None:
    run.ok("week", "open", A)
    ran = run("avail", A, ANA, "--usual")
    assert ran.code == 2 and "SHIFT_ID" in one_line(ran.err.splitlines()[-1])
