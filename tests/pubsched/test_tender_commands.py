"""``pubsched tender add|edit|activate|list`` with skills (issue 18): exit codes, the JSON,
nothing written on bad input, on SQLite (PostgreSQL where marked); and the one rule that an email
belongs to one tender, held by the UNIQUE index even when the check would have passed."""

from __future__ import annotations

import threading
import time

import pytest

from pubsched import db as pubdb
from pubsched.config import Config
from pubsched.people import links, tenders
from pubsched.pub import Pub
from support.pub_cli import Cli, snapshot, use_env
from support.smtp_server import SmtpTestServer

CREW = (("Ana", "ana@pub.example"), ("Ben", "ben@pub.example"))


@pytest.fixture
def run(db_url: str, smtp: SmtpTestServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Cli:
    use_env(monkeypatch, smtp)
    runner = Cli(db_url, capsys)
    for name, email in CREW:
        runner.ok("tender", "add", name, email)
    return runner


def open_pub(url: str) -> Pub:
    return Pub(pubdb.open_store(url), Config())


def test_add_with_skills_stores_them_as_words(run: Cli) -> None:
    ran = run.ok("tender", "add", "Cleo", "cleo@pub.example", "--skill", " Bar ",
                 "--skill", "cellar", "--skill", "BAR", "--max-shifts", "3")
    assert "cleo@pub.example" in ran.out
    listed = run.tenders()
    assert listed["cleo@pub.example"]["skills"] == ["bar", "cellar"]
    assert listed["cleo@pub.example"]["max_shifts"] == 3
    assert listed["ana@pub.example"]["skills"] == []
    assert {frozenset(t) for t in listed.values()} == {
        frozenset({"id", "name", "email", "active", "max_shifts", "skills", "time_off",
                   "shift_reminders"})}
    text = run.ok("tender", "list").out
    assert "skills" in text and "bar cellar" in text


@pytest.mark.both_databases("the tender's partial updates")
def test_edit_changes_only_what_is_given(run: Cli) -> None:
    before = run.tenders()["ana@pub.example"]
    ran = run.ok("tender", "edit", "ANA@pub.example", "--name", "Ana Alvarez")
    assert ran.out.strip() == "Ana Alvarez's details are saved"
    after = run.tenders()["ana@pub.example"]
    assert after == {**before, "name": "Ana Alvarez"}

    run.ok("tender", "edit", "ana@pub.example", "--max-shifts", "3", "--skill", "Bar",
           "--skill", "firstaid")
    after = run.tenders()["ana@pub.example"]
    assert (after["max_shifts"], after["skills"]) == (3, ["bar", "firstaid"])
    run.ok("tender", "edit", "ana@pub.example", "--skill", "cellar")  # replaces, not adds
    assert run.tenders()["ana@pub.example"]["skills"] == ["cellar"]
    run.ok("tender", "edit", "ana@pub.example", "--max-shifts", "none")
    after = run.tenders()["ana@pub.example"]
    assert (after["max_shifts"], after["skills"]) == (None, ["cellar"])
    run.ok("tender", "edit", "ana@pub.example", "--no-skills")
    assert run.tenders()["ana@pub.example"] == {**before, "name": "Ana Alvarez"}
    assert run.tenders()["ben@pub.example"]["name"] == "Ben"


def test_a_new_email_keeps_the_tenders_links_working(run: Cli) -> None:
    link = run.ok("tender", "link", "ana@pub.example").out.strip()
    ran = run.ok("tender", "edit", "ana@pub.example", "--email", "Ana.A@Pub.Example")
    assert "details are saved" in ran.out
    listed = run.tenders()
    assert "ana@pub.example" not in listed and "Ana.A@Pub.Example" in listed
    assert run.ok("tender", "link", "ana.a@pub.example").out.strip() == link
    pub = open_pub(run.url)
    try:
        found = links.tender_for_link(pub, link.rsplit("/", 1)[1])
        assert found is not None and found.email == "Ana.A@Pub.Example"
    finally:
        pub.close()
    # the old address is free again, and names nobody
    assert run("tender", "edit", "ana@pub.example", "--name", "X").code == 2
    run.ok("tender", "add", "Another Ana", "ana@pub.example")


@pytest.mark.both_databases("the unique index refuses the address")
@pytest.mark.parametrize("taken", ["ben@pub.example", "BEN@pub.example", " ben@Pub.example "])
def test_edit_onto_another_tenders_email_is_refused_with_nothing_changed(
        run: Cli, taken: str) -> None:
    before = snapshot(run.url)
    ran = run("tender", "edit", "ana@pub.example", "--email", taken, "--name", "Ana B")
    assert ran.code == 3
    assert ran.line().startswith("pubsched: refused (TENDER_EXISTS): ")
    assert snapshot(run.url) == before


def test_edit_onto_its_own_email_in_another_case_is_saved(run: Cli) -> None:
    run.ok("tender", "edit", "ana@pub.example", "--email", "ANA@pub.example")
    assert "ANA@pub.example" in run.tenders()


BAD_EDITS = {
    "unknown-tender": ["nobody@pub.example", "--name", "X"],
    "nothing-to-change": ["ana@pub.example"],
    "bad-email": ["ana@pub.example", "--email", "not-an-email"],
    "unmailable-email": ["ana@pub.example", "--email", "a..b@pub.example"],
    "bad-name": ["ana@pub.example", "--name", "Lee, Ana"],
    "empty-name": ["ana@pub.example", "--name", "  "],
    "max-too-big": ["ana@pub.example", "--max-shifts", "15"],
    "max-negative": ["ana@pub.example", "--max-shifts", "-1"],
    "max-not-a-number": ["ana@pub.example", "--max-shifts", "two"],
    "skill-with-space": ["ana@pub.example", "--skill", "first aid"],
    "skill-with-comma": ["ana@pub.example", "--skill", "bar,cellar"],
    "empty-skill": ["ana@pub.example", "--skill", " "],
    "long-skill": ["ana@pub.example", "--skill", "x" * 21],
    "too-many-skills": ["ana@pub.example", *[a for i in range(21) for a in ("--skill",
                                                                           f"s{i}")]],
    "skills-and-no-skills": ["ana@pub.example", "--skill", "bar", "--no-skills"],
    "a-good-change-with-a-bad-one": ["ana@pub.example", "--name", "Ana B", "--skill", "a b"],
}


def test_bad_edits_exit_2_and_write_nothing(run: Cli) -> None:
    before = snapshot(run.url)
    for case, argv in BAD_EDITS.items():
        ran = run("tender", "edit", *argv)
        assert ran.code == 2, (case, ran)
        assert ran.err.strip(), case
        assert snapshot(run.url) == before, case


def test_bad_skills_at_add_exit_2_and_write_nothing(run: Cli) -> None:
    before = snapshot(run.url)
    for skill in ("first aid", "a,b", "", "x" * 21, "tab\there"):
        ran = run("tender", "add", "Cleo", "cleo@pub.example", "--skill", skill)
        assert ran.code == 2, (skill, ran)
        assert ran.line().startswith("pubsched: error: a skill "), skill
        assert snapshot(run.url) == before, skill


@pytest.mark.both_databases("reactivation's update")
def test_activate_brings_back_an_inactive_tender_and_their_link(run: Cli) -> None:
    link = run.ok("tender", "link", "ben@pub.example").out.strip()
    token = link.rsplit("/", 1)[1]
    run.ok("tender", "deactivate", "ben@pub.example")
    pub = open_pub(run.url)
    try:
        assert links.tender_for_link(pub, token) is None
        ran = run.ok("tender", "activate", "BEN@pub.example")
        assert ran.out.strip() == "activated ben@pub.example"
        assert run.tenders()["ben@pub.example"]["active"] is True
        assert links.tender_for_link(pub, token) is not None
    finally:
        pub.close()
    before = snapshot(run.url)
    again = run("tender", "activate", "ben@pub.example")
    assert again.code == 3 and "ALREADY_ACTIVE" in again.line()
    unknown = run("tender", "activate", "nobody@pub.example")
    assert unknown.code == 2 and "nobody@pub.example" in unknown.line()
    assert snapshot(run.url) == before


@pytest.mark.both_databases("the unique index, not a read, refuses the email")
def test_the_unique_index_decides_an_email_taken_after_the_edit_began(run: Cli) -> None:
    """Another unit inserts the address and has not committed when the edit starts: a
    check that read first would see it free. The edit waits on the index, then is refused
    (TENDER_EXISTS), nothing changed, no traceback."""
    holder, editor = open_pub(run.url), open_pub(run.url)
    inserted, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def hold() -> None:
        try:
            with holder.atomic() as tx:
                tx.execute("INSERT INTO pub_tenders (name, email, email_key, active, "
                           "created_at) VALUES ('Dee', 'dee@pub.example', "
                           "'dee@pub.example', 1, %s)", ["2026-11-30T15:00:00+00:00"])
                inserted.set()
                release.wait(10)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inserted.wait(10)
        if editor.dialect == "postgresql":  # a read first would find the address free
            assert tenders.find(editor, "dee@pub.example") is None
        threading.Timer(0.3, release.set).start()
        started = time.monotonic()
        verdict = tenders.edit(editor, "ana@pub.example", new_email="DEE@pub.example")
        assert time.monotonic() - started >= 0.2  # it waited for the other unit
        assert (verdict.applied, verdict.reason) == (False, "TENDER_EXISTS")
        assert tenders.get(editor, "ana@pub.example").name == "Ana"
    finally:
        release.set()
        thread.join(10)
        holder.close()
        editor.close()
    assert not failures


@pytest.mark.both_databases("races: two edits onto one address")
def test_two_edits_racing_onto_one_address_one_wins(run: Cli) -> None:
    pubs = [open_pub(run.url), open_pub(run.url)]
    gate = threading.Barrier(2)
    verdicts: dict[str, object] = {}

    def edit(pub: Pub, who: str) -> None:
        gate.wait(5)
        verdicts[who] = tenders.edit(pub, who, new_email="new@pub.example")

    threads = [threading.Thread(target=edit, args=(p, w))
               for p, w in zip(pubs, ("ana@pub.example", "ben@pub.example"), strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    for p in pubs:
        p.close()
    outcomes = sorted((bool(v), getattr(v, "reason", None)) for v in verdicts.values())
    assert outcomes == [(False, "TENDER_EXISTS"), (True, None)]
    assert sum(1 for e in run.tenders() if e == "new@pub.example") == 1


def test_check_skills_is_the_one_rule() -> None:
    assert tenders.check_skills([" Bar", "bar", "CELLAR", "first-aid"]) == (
        "bar", "cellar", "first-aid")
    assert tenders.split_skills("bar, cellar  Bar,,firstaid") == ("bar", "cellar", "firstaid")
    assert tenders.split_skills("  ") == ()
    for bad in (["a b"], ["a,b"], [""], [None], [3], ["x" * 21], ["nul\x00"]):
        with pytest.raises(tenders.BadInput):
            tenders.check_skills(bad)
    with pytest.raises(tenders.BadInput):
        tenders.check_skills("bar")  # a lone string is not a list of words
    from pubsched.people import skills
    from pubsched.week import template

    assert skills.stored('[" Bar", "bar"]') == ("bar",)
    assert skills.stored("not json") == () and skills.stored("{}") == ()
    # a shift's needs are the same words: what a tender may not have, no shift may need
    for bad in (["a b"], [""], ["x" * 21]):
        with pytest.raises(tenders.BadInput):
            template.check_needs(bad)
    assert template.check_needs(["Keys", "keys"]) == ("keys",)
