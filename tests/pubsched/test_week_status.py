"""What the week page (and ``week show``) says first: where the week is and what to do next,
for every state, in words and local time (on PostgreSQL too where marked); a short roster
and a send that left someone uncertain are warnings."""

from __future__ import annotations

import pytest

from pubsched.engines import actions
from pubsched.engines.flags import set_v2
from pubsched.pub import Pub
from pubsched.week.runs import shifts
from pubsched.week.status import week_status
from pubsched.week.submissions import submit
from pubsched.week.view import week_show
from support.pub_engines import EMAILS, WEEK, moment
from support.smtp_server import SmtpTestServer

pytestmark = pytest.mark.pub_setup("engines")


def said(pub: Pub) -> tuple[str, str, str]:
    status = week_status(pub, week_show(pub, WEEK))
    return status.now, status.next, status.tone


@pytest.mark.both_databases("sentences from the moments each database hands back")
def test_every_state_says_where_it_is_and_what_comes_next(pub: Pub,
                                                         smtp: SmtpTestServer) -> None:
    set_v2(pub, True)
    at = moment(pub, WEEK, "opens_at")
    assert actions.perform(pub, "create", WEEK, now=at)
    assert said(pub) == ("Not open yet: the form is due to open Mon 7 Dec, 10:00 EST.",
                         "Open the form when you are ready.", "todo")
    assert actions.perform(pub, "open", WEEK, now=at)
    assert said(pub) == ("Taking availability until Wed 9 Dec, 20:00 EST: 0 of 4 tenders "
                         "answered.", "Close the form at the deadline, then make the roster.",
                         "ok")
    ids = [s.id for s in shifts(pub, WEEK)]
    for email in EMAILS[:2]:
        assert submit(pub, WEEK, email, ids[:2], now=at)
    assert actions.perform(pub, "close", WEEK, now=at)
    assert said(pub) == ("The form is closed: 2 of 4 tenders answered.", "Make the roster.",
                         "todo")
    assert actions.perform(pub, "generate", WEEK, now=at)
    now, then, tone = said(pub)
    assert now == "The roster is made: 4 of 6 slots filled, 2 empty." and tone == "warn"
    assert then.endswith("then approve it. Send it before Fri 11 Dec, 18:00 EST.")
    assert actions.perform(pub, "approve", WEEK, now=at)
    assert said(pub) == ("The roster is approved, not sent yet.",
                         "Send it before Fri 11 Dec, 18:00 EST.", "todo")
    smtp.drop_after_data(for_recipient=EMAILS[1])
    assert actions.perform(pub, "send", WEEK, now=at)
    assert said(pub) == ("Sent: 1 tender got the schedule. 1 uncertain (the mail server never "
                         "answered).", "See the deliveries below: resend to each one on "
                         "purpose.", "warn")


def test_autopilot_says_what_it_will_do(pub: Pub) -> None:
    set_v2(pub, True)
    at = moment(pub, WEEK, "opens_at")
    assert actions.perform(pub, "create", WEEK, now=at)
    assert actions.perform(pub, "autopilot", WEEK, now=at, on=True)
    assert said(pub)[1] == "Autopilot opens it then."
    assert actions.perform(pub, "open", WEEK, now=at)
    assert said(pub)[1] == "Autopilot closes the form then and makes the roster."


def test_week_show_opens_with_the_same_sentences(db_url: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's table says it too, and names no slot "unfilled" before a roster exists."""
    from support.pub_cli import Cli

    run = Cli(db_url, capsys)
    run.ok("week", "open", WEEK, "--now", "2026-12-07T15:00:00Z")
    out = run.ok("week", "show", WEEK).out
    words = " ".join(out.split())  # as read, whatever the terminal's width wrapped
    assert ("Taking availability until Wed 9 Dec, 20:00 EST: the pub has no tenders yet "
            "(add them on the Tenders page).") in words
    assert "Next: Close the form at the deadline, then make the roster." in words
    assert "(unfilled)" not in out and out.count("no roster yet") == 3
