"""``pubsched tender invite EMAIL|--all`` (issue 18): one email per tender with their
personal links, through the real SMTP test server on loopback, on SQLite (PostgreSQL where marked).
A run mails every active tender once; a refused recipient is reported (exit 1) while the
others are mailed; running it again retries them (and mails everyone again: an invitation
is the same message for the same links)."""

from __future__ import annotations

from email.message import EmailMessage
from typing import Any

import pytest

from pubsched import db as pubdb
from pubsched.config import Config
from pubsched.deliveries import log
from pubsched.mail.compose import Recipient, compose_invite
from pubsched.mail.settings import load_mail_settings
from pubsched.people import links, tenders
from pubsched.pub import Pub
from support.pub_cli import OPERATOR, Cli, snapshot, use_env
from support.pubs import NOW, make_pub
from support.smtp_server import SmtpTestServer

CREW = (("Ana", "ana@pub.example"), ("Ben", "ben@pub.example"),
        ("Cleo", "cleo@pub.example"))


@pytest.fixture
def run(db_url: str, smtp: SmtpTestServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Cli:
    use_env(monkeypatch, smtp)
    runner = Cli(db_url, capsys)
    for name, email in CREW:
        runner.ok("tender", "add", name, email)
    runner.ok("tender", "add", "Dee", "dee@pub.example")
    runner.ok("tender", "deactivate", "dee@pub.example")
    return runner


def mail_log(url: str) -> list[tuple[Any, str, str]]:
    """The mail log's lines (:mod:`pubsched.deliveries.log`): week, kind, recipient."""
    pub = make_pub(url)
    try:
        return [(line.week_of, line.label, line.recipient) for line in log.mail_log(pub)]
    finally:
        pub.close()


MAIL_RECORD = ("pub_mail", "rowstate_events", "pub_mail_log")  # the mail's own record


def besides_mail(tables: dict[str, list[str]]) -> dict[str, list[str]]:
    return {k: v for k, v in tables.items() if k not in MAIL_RECORD}


def parts(message: EmailMessage) -> tuple[str, str]:
    text = message.get_body(("plain",))
    page = message.get_body(("html",))
    assert text is not None and page is not None
    return text.get_content(), page.get_content()


def expected_links(url: str, email: str, base: str | None = None) -> tuple[str, str]:
    pub = Pub(pubdb.open_store(url), Config())
    try:
        t = tenders.get(pub, email)
        return (links.tender_url(pub.config, t.id, t.link_version, base_url=base),
                links.calendar_url(pub.config, t.id, t.link_version, base_url=base))
    finally:
        pub.close()


def test_invite_mails_the_tender_their_two_links(run: Cli, smtp: SmtpTestServer) -> None:
    ran = run.ok("tender", "invite", "ANA@pub.example")
    assert ran.out.strip() == "Invitation sent to ana@pub.example"
    [mail] = smtp.accepted
    assert mail.rcpt_tos == ("ana@pub.example",)
    assert mail.message["To"] == "Ana <ana@pub.example>"
    assert mail.message["Subject"] == "The pub: your link to the shift form"  # the default name
    form, feed = expected_links(run.url, "ana@pub.example")
    assert form.startswith("http://127.0.0.1:8000/t/") and feed.endswith(".ics")
    text, page = parts(mail.message)
    assert "Hi Ana," in text and form in text and feed in text
    assert f'href="{form}"' in page and f'href="{feed}"' in page
    assert mail_log(run.url) == [(None, "invite", "ana@pub.example")]
    # the link in the mail is the tender's working link
    pub = Pub(pubdb.open_store(run.url), Config())
    try:
        found = links.tender_for_link(pub, form.rsplit("/", 1)[1])
        assert found is not None and found.email == "ana@pub.example"
    finally:
        pub.close()


def test_invite_with_a_base_url(run: Cli, smtp: SmtpTestServer) -> None:
    run.ok("tender", "invite", "ben@pub.example", "--base-url", "https://pub.example/")
    form, feed = expected_links(run.url, "ben@pub.example", "https://pub.example")
    text, _ = parts(smtp.accepted[0].message)
    assert form.startswith("https://pub.example/t/") and form in text and feed in text


@pytest.mark.both_databases("invitations owed and sent")
def test_invite_all_mails_every_active_tender_once(run: Cli, smtp: SmtpTestServer) -> None:
    ran = run.ok("tender", "invite", "--all")
    assert ran.out.splitlines() == ["Invitation sent to ana@pub.example",
                                    "Invitation sent to ben@pub.example",
                                    "Invitation sent to cleo@pub.example",
                                    "Invitations sent to 3 tender(s)"]
    assert sorted(m.rcpt_tos[0] for m in smtp.accepted) == [e for _, e in CREW]
    assert smtp.accepted_for("dee@pub.example") == []
    assert [r[2] for r in mail_log(run.url)] == [e for _, e in CREW]


def test_a_refused_recipient_is_reported_the_others_mailed_and_a_rerun_retries(
        run: Cli, smtp: SmtpTestServer) -> None:
    smtp.refuse_recipient("ben@pub.example")
    ran = run("tender", "invite", "--all")
    assert ran.code == 1
    line = ran.line()
    assert line.startswith("pubsched: failed: 1 of 3 invitation(s) not sent (ben@pub.example")
    assert "550" in line and "Run it again" in line
    assert "Invitation sent to ana@pub.example" in ran.out
    assert "Invitation sent to cleo@pub.example" in ran.out and "ben@" not in ran.out
    assert [len(smtp.accepted_for(e)) for _, e in CREW] == [1, 0, 1]
    # the log keeps every handover, the refused one with its outcome (/metrics counts it)
    assert [(r[1], r[2]) for r in mail_log(run.url)] == [
        ("invite", "ana@pub.example"), ("invite:refused", "ben@pub.example"),
        ("invite", "cleo@pub.example")]

    smtp.clear_faults()
    run.ok("tender", "invite", "--all")
    assert [len(smtp.accepted_for(e)) for _, e in CREW] == [2, 1, 2]
    first, again = smtp.accepted_for("ana@pub.example")
    assert first.message["Message-ID"] == again.message["Message-ID"]  # the same invitation


def test_one_refused_invite_fails_with_exit_1_and_logs_only_the_refusal(
        run: Cli, smtp: SmtpTestServer) -> None:
    smtp.refuse_recipient("cleo@pub.example")
    before = snapshot(run.url)
    ran = run("tender", "invite", "cleo@pub.example")
    assert ran.code == 1
    assert ran.line().startswith("pubsched: failed: the invitation to cleo@pub.example was "
                                 "not sent: the mail server refused it (RCPT TO")
    assert smtp.accepted == []
    # nothing else changed; the mail log has the refusal (/metrics counts refused mail)
    after = snapshot(run.url)
    assert [r[1:] for r in mail_log(run.url)] == [("invite:refused", "cleo@pub.example")]
    assert besides_mail(after) == besides_mail(before)


def test_smtp_down_fails_every_invite_and_logs_nothing(run: Cli, smtp: SmtpTestServer) -> None:
    smtp.stop()
    before = snapshot(run.url)
    ran = run("tender", "invite", "--all")
    assert ran.code == 1 and "3 of 3 invitation(s) not sent" in ran.line()
    assert "could not connect" in ran.line()
    assert besides_mail(snapshot(run.url)) == besides_mail(before) and mail_log(run.url) == []


def test_inactive_unknown_and_bad_usage_send_and_write_nothing(
        run: Cli, smtp: SmtpTestServer) -> None:
    before = snapshot(run.url)
    inactive = run("tender", "invite", "dee@pub.example")
    assert inactive.code == 3
    assert inactive.line().startswith("pubsched: refused (TENDER_INACTIVE): dee@pub.example "
                                      "is not active")
    for argv in (["nobody@pub.example"], [], ["ana@pub.example", "--all"],
                 ["--all", "--base-url", "pub.example"],
                 ["ana@pub.example", "--base-url", "ftp://pub.example"]):
        ran = run("tender", "invite", *argv)
        assert ran.code == 2, (argv, ran)
        assert ran.line().startswith("pubsched: error: "), argv
    assert snapshot(run.url) == before and smtp.received == []


def test_invite_all_with_no_active_tender_is_refused(run: Cli, smtp: SmtpTestServer) -> None:
    for _, email in CREW:
        run.ok("tender", "deactivate", email)
    ran = run("tender", "invite", "--all")
    assert ran.code == 3 and "NO_ACTIVE_TENDERS" in ran.line()
    assert smtp.received == []


def test_revoked_links_make_a_new_invitation(run: Cli, smtp: SmtpTestServer) -> None:
    run.ok("tender", "invite", "ana@pub.example")
    pub = Pub(pubdb.open_store(run.url), Config())
    try:
        tenders.revoke_links(pub, "ana@pub.example")
    finally:
        pub.close()
    run.ok("tender", "invite", "ana@pub.example")
    old, new = smtp.accepted_for("ana@pub.example")
    assert old.message["Message-ID"] != new.message["Message-ID"]
    form, _ = expected_links(run.url, "ana@pub.example")
    assert form in parts(new.message)[0] and form not in parts(old.message)[0]


def test_in_rehearsal_the_invitation_goes_to_the_operator(
        db_url: str, smtp: SmtpTestServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    use_env(monkeypatch, smtp, PUBSCHED_REHEARSAL="1")
    run = Cli(db_url, capsys)
    run.ok("tender", "add", "Ana", "ana@pub.example")
    run.ok("tender", "invite", "ana@pub.example")
    [mail] = smtp.accepted
    assert mail.rcpt_tos == (OPERATOR,)
    assert "for Ana <ana@pub.example>" in mail.message["Subject"]
    assert mail_log(db_url) == [(None, "invite", OPERATOR)]


def test_compose_invite_is_text_and_html_with_a_message_id_per_links(db_url: str) -> None:
    settings = load_mail_settings({"PUBSCHED_MAIL_FROM": "pub@pub.example"})
    ana = Recipient("ana@pub.example", "Ana")
    one = compose_invite(ana, "https://p.example/t/A", "https://p.example/cal/A.ics",
                         settings=settings, now=NOW)
    same = compose_invite(ana, "https://p.example/t/A", "https://p.example/cal/A.ics",
                          settings=settings, now=NOW)
    other = compose_invite(ana, "https://p.example/t/B", "https://p.example/cal/B.ics",
                           settings=settings, now=NOW)
    assert one.envelope_to == "ana@pub.example" and one.message["From"].endswith(
        "<pub@pub.example>")
    assert one.message["Message-ID"] == same.message["Message-ID"]
    assert one.message["Message-ID"] != other.message["Message-ID"]
    text, page = parts(one.message)
    assert "https://p.example/t/A" in text and "https://p.example/cal/A.ics" in page
