"""No tender on two shifts at once, in the app (issue 29, item 16), on SQLite and PostgreSQL:
a week with Thursday 18:00-02:00 and a one-off Friday 01:00-05:00 (two nights, overlapping
by an hour). ``generate`` never puts one tender on both; whoever works Thursday is not
offered, and may not take, a cover of the Friday 01:00; a pin by hand onto it is refused;
a shift that only touches Thursday's end (Friday 02:00) is fine."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pubsched import covers
from pubsched.engines import actions
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.week import roster as by_hand
from pubsched.week.runs import shifts
from pubsched.week.shifts import add_shift
from pubsched.week.submissions import submit
from support.pub_covers import roster
from support.pubs import NOW, WEEK

FRIDAY = "2026-12-11"


def _week(pub: Pub, *, late_start: str = "01:00", send: bool = False,
          available: dict[str, tuple[str, ...]] | None = None) -> dict[str, int]:
    """The crew, the week open with its one-off late shift added, the answers in, the
    roster made (and ``send``: approved and sent). The shift ids by name."""
    for name in ("Ann", "Bob", "Cat"):
        assert tenders.add(pub, name, f"{name.lower()}@pub.test", now=NOW)
    assert actions.perform(pub, "open", WEEK, now=NOW)
    assert add_shift(pub, WEEK, "Late", FRIDAY, late_start, "05:00", slots=1, now=NOW)
    ids = {s.label if s.label == "Late" else s.night: s.id for s in shifts(pub, WEEK)}
    thu, late = ids["2026-12-10"], ids["Late"]
    picks = available or {"ann": ("thu", "late"), "bob": ("thu",)}
    for name, which in picks.items():
        chosen = [{"thu": thu, "late": late, "fri": ids[FRIDAY]}[w] for w in which]
        assert submit(pub, WEEK, f"{name}@pub.test", chosen, now=NOW)
    steps = ("close", "generate", *(("approve", "send") if send else ()))
    for step in steps:
        assert actions.perform(pub, step, WEEK, now=NOW), step
    return {"thu": thu, "late": late, "fri": ids[FRIDAY]}


@pytest.mark.both_databases("the times compared by the database (text on SQLite)")
def test_generate_never_puts_one_tender_on_two_overlapping_shifts(pub: Pub) -> None:
    ids = _week(pub)
    made = roster(pub)
    # Ann could work both (she was put on both before), Bob only Thursday: Ann works one
    on = [shift for shift in ("thu", "late") if "Ann" in made.get(ids[shift], [])]
    assert len(on) == 1 and "Bob" in made[ids["thu"]]


@pytest.mark.both_databases("the times compared by the database (text on SQLite)")
def test_a_shift_that_only_touches_the_end_is_not_a_clash(pub: Pub) -> None:
    ids = _week(pub, late_start="02:00", available={"ann": ("thu", "late")})
    made = roster(pub)
    assert made[ids["thu"]] == ["Ann"] and made[ids["late"]] == ["Ann"]


@pytest.mark.both_databases("the cover's rule is judged in SQL")
def test_whoever_works_thursday_night_may_not_cover_the_small_hours(pub: Pub) -> None:
    ids = _week(pub, send=True, available={"ann": ("thu",), "bob": ("late",)})
    assert roster(pub)[ids["thu"]] == ["Ann"] and roster(pub)[ids["late"]] == ["Bob"]
    asked = covers.ask(pub, WEEK, ids["late"], "bob@pub.test", now=NOW)
    assert asked.applied
    assert asked.detail["offered"] == ["cat@pub.test"]  # not Ann: she is at work then
    taken = covers.take(pub, asked.detail["cover_id"], "ann@pub.test",
                        now=NOW + timedelta(days=1))
    assert (taken.applied, taken.reason) == (False, "CANNOT_TAKE")
    assert taken.message == ("Ann cannot take Fri 11 Dec, 01:00 - 05:00 (Late), New York time "
                             "(EST): they already work a shift at that time.")
    assert roster(pub)[ids["late"]] == ["Bob"]


@pytest.mark.both_databases("the pin's check is judged in SQL")
def test_a_pin_onto_an_overlapping_shift_is_refused(pub: Pub) -> None:
    ids = _week(pub, available={"ann": ("thu",), "bob": ("thu",)})
    before = roster(pub)
    refused = by_hand.assign(pub, WEEK, ids["late"], "ann@pub.test", now=NOW)
    assert (refused.applied, refused.reason) == (False, "SAME_NIGHT")
    assert refused.message.startswith("Ann")
    assert "already works then" in refused.message
    assert roster(pub) == before
    assert by_hand.assign(pub, WEEK, ids["late"], "cat@pub.test", now=NOW).applied
