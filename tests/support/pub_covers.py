"""Helpers of the cover request tests: a crew and a SENT week whose roster is known.

The week is support.pubs' (``WEEK``, the default template: Thursday, Friday and
Saturday nights, 18:00-02:00 New York, two slots each), run through the real engine at
``NOW``: each tender offers only the nights ``AVAILABLE`` gives them, so the picker's
roster is the one below, and the schedule goes out by the pub's mailer.

    Thursday  ann, bob        Friday  cat, dan        Saturday  dan, eve

fay and gus work nothing; gus has at most one shift a week.
"""

from __future__ import annotations

from typing import Any

from pubsched.engines import actions
from pubsched.people import tenders
from pubsched.pub import Pub
from pubsched.week.runs import shifts
from pubsched.week.submissions import submit
from support.pubs import NOW, WEEK

THU, FRI, SAT = 0, 1, 2  # the week's shifts, in time order
AVAILABLE: dict[str, tuple[int, ...]] = {
    "ann": (THU,), "bob": (THU,), "cat": (FRI,), "dan": (FRI, SAT), "eve": (SAT,),
    "fay": (), "gus": (),
}
MOST = {"gus": 1}


def email(name: str) -> str:
    return f"{name}@pub.test"


def crew(pub: Pub) -> None:
    for name in AVAILABLE:
        assert tenders.add(pub, name.title(), email(name), max_shifts=MOST.get(name),
                           now=NOW)


def shift_ids(pub: Pub, week: str = WEEK) -> list[int]:
    return [s.id for s in shifts(pub, week)]


def sent_week(pub: Pub, week: str = WEEK, *, send: bool = True) -> list[int]:
    """The crew, and ``week`` made and (``send``) sent at ``NOW``: its shift ids."""
    crew(pub)
    assert actions.perform(pub, "open", week, now=NOW)
    ids = shift_ids(pub, week)
    for name, nights in AVAILABLE.items():
        if nights:
            assert submit(pub, week, email(name), [ids[n] for n in nights], now=NOW)
    for step in ("close", "generate", "approve", *(("send",) if send else ())):
        assert actions.perform(pub, step, week, now=NOW), step
    return ids


def roster(pub: Pub, week: str = WEEK) -> dict[int, list[str]]:
    """shift id -> the names on it, as the roster is now."""
    rows = pub.query("SELECT a.shift_id, t.name FROM pub_assignments a JOIN pub_tenders t "
                     "ON t.id = a.tender_id WHERE a.week_of = %s ORDER BY a.shift_id, t.name",
                     [week])
    out: dict[int, list[str]] = {}
    for r in rows:
        out.setdefault(int(r["shift_id"]), []).append(str(r["name"]))
    return out


def cover_mail(server: Any, address: str | None = None) -> list[Any]:
    """The cover emails the server accepted (every one but the schedule's), oldest first,
    of one recipient or all."""
    got = server.accepted if address is None else server.accepted_for(address)
    return [m for m in got if "your shifts, week of" not in str(m.message["Subject"])]
