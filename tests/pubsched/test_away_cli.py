"""``pubsched tender away|back`` (issue 19, time off) on SQLite (PostgreSQL where marked):
every exit code, every refusal leaving every table as it was, the warning for a week not yet
sent, the refusal with the cover hint for a sent one, ``tender show|list`` (and their JSON)
showing the time off to come; and what time off does to a week: the form shows those nights
as away and refuses a tick of them, generate never picks the tender for them."""

from __future__ import annotations

from typing import Any

import pytest

from support.pub_cli import Cli, one_line, snapshot, use_env
from support.smtp_server import SmtpTestServer

WEEK = "2026-12-14"  # Thu 17, Fri 18, Sat 19 Dec, 18:00 - 02:00 New York, two slots each
FORM_OPEN = "2026-12-08T15:00:00Z"  # Tue 8 Dec, 10:00 in New York: WEEK's form is open
ANA, BEN, CLEO = "ana@pub.example", "ben@pub.example", "cleo@pub.example"


class Pub(Cli):
    """The CLI, every command acting at ``FORM_OPEN`` unless it says otherwise."""

    def __call__(self, *argv: str) -> Any:
        return super().__call__(*argv, *(() if "--now" in argv else ("--now", FORM_OPEN)))

    def show(self) -> dict[str, Any]:
        shown: dict[str, Any] = self.json("week", "show", WEEK)
        return shown

    def shift_ids(self) -> list[int]:
        return [int(s["id"]) for s in self.show()["shifts"]]

    def on_shift(self, email: str) -> list[int]:
        return [int(s["id"]) for s in self.show()["shifts"] if email in s["assigned"]]


@pytest.fixture
def run(db_url: str, smtp: SmtpTestServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Pub:
    use_env(monkeypatch, smtp)
    runner = Pub(db_url, capsys)
    runner.ok("flag", "v2", "on")  # the legacy engine's own tests say "flag v2 off"
    for name, email in (("Ana", ANA), ("Ben", BEN), ("Cleo", CLEO)):
        runner.ok("tender", "add", name, email)
    return runner


def rostered(run: Pub, *, send: bool = False) -> list[int]:
    """The week opened, everyone available for everything, the roster made (and sent)."""
    run.ok("week", "open", WEEK)
    ids = [str(i) for i in run.shift_ids()]
    for email in (ANA, BEN, CLEO):
        run.ok("avail", WEEK, email, *ids)
    for step in ("close", "generate", *(("approve", "send") if send else ())):
        run.ok("week", step, WEEK)
    return [int(i) for i in ids]


@pytest.mark.both_databases("time off locks the tender's row FOR UPDATE on PostgreSQL")
def test_away_then_back_and_what_show_and_list_say(run: Pub) -> None:
    ran = run.ok("tender", "away", ANA, "2026-12-20", "2026-12-22")
    assert one_line(ran.out) == "Ana is away Sun 20 Dec - Tue 22 Dec 2026"
    assert ran.err == ""
    run.ok("tender", "away", ANA, "2027-01-04", "2027-01-04")
    shown = run.json("tender", "show", ANA)
    assert shown["time_off"] == [{"from": "2026-12-20", "to": "2026-12-22"},
                                 {"from": "2027-01-04", "to": "2027-01-04"}]
    assert shown["usual"] is None
    listed = run.tenders()
    assert listed[ANA]["time_off"] == shown["time_off"] and listed[BEN]["time_off"] == []
    text = run.ok("tender", "show", ANA).out
    assert "time off: Sun 20 Dec - Tue 22 Dec 2026; Mon 4 Jan 2027" in text
    assert "2026-12-20" in run.ok("tender", "list").out
    # a span that has ended is no longer "to come"
    later = run.json("tender", "show", ANA, "--now", "2026-12-23T15:00:00Z")
    assert later["time_off"] == [{"from": "2027-01-04", "to": "2027-01-04"}]

    back = run.ok("tender", "back", ANA, "2026-12-20")
    assert one_line(back.out) == (
        "Ana is back: the time off Sun 20 Dec - Tue 22 Dec 2026 is cancelled")
    assert run.json("tender", "show", ANA)["time_off"] == [
        {"from": "2027-01-04", "to": "2027-01-04"}]
    again = run("tender", "back", ANA, "2026-12-20")
    assert again.code == 3
    assert one_line(again.err) == (
        "pubsched: refused (NO_TIME_OFF): Ana has no time off starting on 2026-12-20; "
        "their time off starts on 2027-01-04")
    none = run("tender", "back", BEN, "2026-12-20")
    assert none.code == 3 and "they have none" in one_line(none.err)


@pytest.mark.parametrize("argv, said", [
    (("away", ANA, "2026-12-32", "2027-01-02"), "a date is YYYY-MM-DD"),
    (("away", ANA, "2026-12-20", "tomorrow"), "a date is YYYY-MM-DD"),
    (("away", ANA, "2026-12-22", "2026-12-20"), "is backwards"),
    (("away", ANA, "2026-12-01", "2026-12-07"), "time off is for days to come"),
    (("away", ANA, "2026-12-20", "2028-01-01"), "at most 366 days"),
    (("away", "nobody@pub.example", "2026-12-20", "2026-12-21"), "no tender with email"),
    (("away", ANA, "2026-12-20"), "the following arguments are required: TO"),
    (("back", ANA, "20/12/2026"), "a date is YYYY-MM-DD"),
    (("back", "nobody@pub.example", "2026-12-20"), "no tender with email"),
])
def test_bad_input_is_exit_2_and_writes_nothing(run: Pub, argv: tuple[str, ...],
                                                said: str) -> None:
    run.ok("tender", "away", BEN, "2026-12-20", "2026-12-21")
    before = snapshot(run.url)
    ran = run("tender", *argv)
    assert ran.code == 2, ran
    assert said in ran.err
    assert snapshot(run.url) == before


def test_an_inactive_tender_takes_no_time_off(run: Pub) -> None:
    run.ok("tender", "deactivate", CLEO)
    before = snapshot(run.url)
    ran = run("tender", "away", CLEO, "2026-12-20", "2026-12-21")
    assert ran.code == 2 and "not an active tender" in one_line(ran.err)
    assert snapshot(run.url) == before


def test_overlapping_time_off_is_refused_naming_the_span_there(run: Pub) -> None:
    run.ok("tender", "away", ANA, "2026-12-20", "2026-12-24")
    before = snapshot(run.url)
    for first, last in (("2026-12-18", "2026-12-20"), ("2026-12-24", "2026-12-30"),
                        ("2026-12-21", "2026-12-22"), ("2026-12-19", "2026-12-26"),
                        ("2026-12-20", "2026-12-20")):
        ran = run("tender", "away", ANA, first, last)
        assert ran.code == 3, (first, last, ran)
        assert one_line(ran.err).startswith(
            "pubsched: refused (OVERLAPS): Ana already has time off Sun 20 Dec - Thu 24 Dec "
            "2026, which overlaps")
        assert "`pubsched tender back ana@pub.example 2026-12-20`" in ran.err
    assert snapshot(run.url) == before
    run.ok("tender", "away", ANA, "2026-12-25", "2026-12-26")  # the day after: no overlap
    run.ok("tender", "away", BEN, "2026-12-20", "2026-12-24")  # another tender's own


@pytest.mark.parametrize("engine", ["v2", "legacy"])
def test_a_sent_shift_is_refused_with_the_hint_to_ask_for_cover(run: Pub, engine: str) -> None:
    """Sent as the engine in charge reads the week (the legacy engine: its status)."""
    run.ok("flag", "v2", "on" if engine == "v2" else "off")
    rostered(run, send=True)
    assert run.show()["engine"] == engine
    friday = next(s for s in run.show()["shifts"] if s["starts_at"].startswith("2026-12-18"))
    email = friday["assigned"][0]
    name = email.split("@")[0].title()
    before = snapshot(run.url)
    ran = run("tender", "away", email, "2026-12-18", "2026-12-18")
    assert ran.code == 3
    line = one_line(ran.err)
    assert line == (
        f"pubsched: refused (ON_THE_ROSTER): {name} is on the schedule already sent for "
        f"Fri 18 Dec, 18:00 - 02:00 (week {WEEK}, shift {friday['id']}): ask for cover first "
        f"(`pubsched cover ask {WEEK} {friday['id']} {email}`), then mark the time off. "
        "Nothing was saved.")
    assert snapshot(run.url) == before
    # once the shift has been worked it is history: the same span is taken
    run.ok("tender", "away", email, "2026-12-18", "2026-12-21", "--now", "2026-12-20T15:00:00Z")


def test_a_week_not_sent_yet_is_allowed_with_a_warning_then_regenerated(run: Pub) -> None:
    rostered(run)
    shifts = {s["id"]: s for s in run.show()["shifts"]}
    ana = run.on_shift(ANA)
    assert ana, "the fair picker gives each of three tenders some of six slots"
    first, last = shifts[ana[0]]["starts_at"][:10], shifts[ana[-1]]["starts_at"][:10]
    ran = run.ok("tender", "away", ANA, first, last)
    warning = one_line(ran.err)
    assert warning.startswith(f"pubsched: warning: Ana is on the roster of week {WEEK} (not "
                              "sent yet) for ")
    assert warning.endswith(f"regenerate week {WEEK} so someone else is picked")
    assert "18:00 - 02:00" in warning
    run.ok("week", "generate", WEEK)  # regenerate: Ana's ticks for those nights are ignored
    nights = {s["id"]: s["starts_at"][:10] for s in run.show()["shifts"]}
    assert all(not first <= nights[i] <= last for i in run.on_shift(ANA))
    # approved: un-approve first, says the warning
    run.ok("week", "approve", WEEK)
    on = [nights[i] for i in run.on_shift(BEN)]
    ran = run.ok("tender", "away", BEN, on[0], on[0])
    assert f"un-approve and regenerate week {WEEK}" in one_line(ran.err)


def test_a_pin_on_an_away_night_is_named_as_kept_by_regenerate(run: Pub) -> None:
    ids = rostered(run)
    night = {s["id"]: s for s in run.show()["shifts"]}
    free = next(i for i in ids if ANA not in night[i]["assigned"])
    clash = next((i for i in run.on_shift(ANA) if night[i]["starts_at"][:10]
                  == night[free]["starts_at"][:10]), None)
    if clash is not None:
        run.ok("week", "unassign", WEEK, str(clash), ANA)
    if len(night[free]["assigned"]) >= 2:
        run.ok("week", "unassign", WEEK, str(free), night[free]["assigned"][0])
    run.ok("week", "assign", WEEK, str(free), ANA)
    day = night[free]["starts_at"][:10]
    ran = run.ok("tender", "away", ANA, day, day)
    assert f"which a regenerate keeps: take them off it (`pubsched week unassign {WEEK} " \
           f"{free} {ANA}`)" in one_line(ran.err)


def test_the_form_shows_away_nights_and_refuses_their_ticks(run: Pub) -> None:
    run.ok("week", "open", WEEK)
    ids = run.shift_ids()
    run.ok("tender", "away", ANA, "2026-12-18", "2026-12-19")  # Fri and Sat
    before = snapshot(run.url)
    ran = run("avail", WEEK, ANA, *map(str, ids))
    assert ran.code == 2
    assert one_line(ran.err) == (
        "pubsched: error: Ana cannot be put down for Fri 18 Dec, 18:00 - 02:00 (away: your "
        "time off Fri 18 Dec - Sat 19 Dec 2026); Sat 19 Dec, 18:00 - 02:00 (away: your time "
        "off Fri 18 Dec - Sat 19 Dec 2026). Nothing was saved.")
    assert snapshot(run.url) == before
    run.ok("avail", WEEK, ANA, str(ids[0]))  # Thursday is theirs to tick


def test_generate_never_picks_a_tender_for_a_night_they_are_away(run: Pub) -> None:
    """Ana ticked every night before marking Friday and Saturday off: her ticks stand in
    the table, and the picker is never handed them (three tenders, six slots: without the
    rule she would get a weekend night)."""
    ids = rostered(run)
    run.ok("week", "reopen", WEEK)
    run.ok("tender", "away", ANA, "2026-12-18", "2026-12-19")
    run.ok("tender", "away", BEN, "2026-12-17", "2026-12-17")
    subs = {s["email"]: s["shift_ids"] for s in run.show()["submissions"]}
    assert subs[ANA] == ids  # what she said before the time off is kept as she said it
    run.ok("week", "close", WEEK)
    run.ok("week", "generate", WEEK)
    shown = run.show()
    got = {s["starts_at"][:10]: sorted(s["assigned"]) for s in shown["shifts"]}
    assert got == {"2026-12-17": [ANA, CLEO], "2026-12-18": [BEN, CLEO],
                   "2026-12-19": [BEN, CLEO]}
    assert [s["away"] for s in shown["shifts"]] == [[BEN], [ANA], [ANA]]
