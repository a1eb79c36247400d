"""The mailer against a real SMTP server on loopback: every outcome, as the server saw it."""

from __future__ import annotations

import logging
import time
from email.message import EmailMessage

import pytest
from icalendar import Calendar

from pubsched.mail.compose import Outgoing, Recipient, compose_schedule
from pubsched.mail.mailer import Delivery, LogMailer, Outcome, SmtpMailer, mailer_for
from pubsched.mail.settings import MailSettings, load_mail_settings
from support.mail_samples import ALICE, BOB, CAROL, COMPOSED_AT, OPERATOR, OWN, ROSTER, WEEK
from support.smtp_server import SmtpTestServer


def settings_for(server: SmtpTestServer, **extra: str) -> MailSettings:
    defaults = {
        "PUBSCHED_MAIL_FROM": "pub@example.com",
        "PUBSCHED_OPERATOR_EMAIL": OPERATOR,
        "PUBSCHED_SMTP_TIMEOUT": "1",
    }
    return load_mail_settings(server.env(**(defaults | extra)))


def schedule(tender: Recipient, settings: MailSettings) -> Outgoing:
    return compose_schedule(ROSTER, tender, OWN[tender], settings=settings, now=COMPOSED_AT)


def send_all(settings: MailSettings, tenders: list[Recipient]) -> list[Outcome]:
    with mailer_for(settings).session() as mail:
        return [mail.send(schedule(tender, settings)) for tender in tenders]


# -- each outcome, classified against the real server --------------------------------------


def test_accepted_data_is_delivered(smtp: SmtpTestServer) -> None:
    settings = settings_for(smtp)
    [outcome] = send_all(settings, [ALICE])
    assert outcome == Outcome(ALICE, Delivery.DELIVERED, "250 OK", 250)
    [mail] = smtp.accepted
    assert mail.mail_from == "pub@example.com"
    assert mail.rcpt_tos == (ALICE.email,)


def test_the_senders_display_name_is_in_from_and_the_envelope_has_the_address(
        smtp: SmtpTestServer) -> None:
    """Issue 17 item 16: PUBSCHED_MAIL_FROM="The Crown <rota@pub.example>"."""
    settings = settings_for(smtp, PUBSCHED_MAIL_FROM="The Crown <rota@pub.example>")
    [outcome] = send_all(settings, [ALICE])
    assert outcome.delivery is Delivery.DELIVERED
    [mail] = smtp.accepted
    assert mail.mail_from == "rota@pub.example"
    assert str(mail.message["From"]) == "The Crown <rota@pub.example>"
    assert str(mail.message["Message-ID"]).endswith("@pub.example>")


def test_a_refused_recipient_is_refused_and_the_batch_goes_on(smtp: SmtpTestServer) -> None:
    smtp.refuse_recipient(BOB.email)
    outcomes = send_all(settings_for(smtp), [ALICE, BOB, CAROL])
    assert [o.delivery for o in outcomes] == [
        Delivery.DELIVERED,
        Delivery.REFUSED,
        Delivery.DELIVERED,
    ]
    assert outcomes[1].smtp_code == 550
    assert outcomes[1].detail.startswith("RCPT TO <bob@example.com> refused: 550")
    assert [m.rcpt_tos for m in smtp.received] == [(ALICE.email,), (CAROL.email,)]


@pytest.mark.parametrize("code", [451, 554])
def test_an_error_answer_to_the_data_is_refused(smtp: SmtpTestServer, code: int) -> None:
    smtp.fail_data(code, for_recipient=BOB.email)
    outcomes = send_all(settings_for(smtp), [BOB, ALICE])
    assert [(o.delivery, o.smtp_code) for o in outcomes] == [
        (Delivery.REFUSED, code),
        (Delivery.DELIVERED, 250),
    ]
    assert outcomes[0].detail.startswith(f"message data refused: {code}")
    assert [m.rcpt_tos for m in smtp.accepted] == [(ALICE.email,)]


def test_a_connection_lost_after_the_data_is_unknown(smtp: SmtpTestServer) -> None:
    smtp.drop_after_data(for_recipient=BOB.email)
    outcomes = send_all(settings_for(smtp), [BOB, ALICE])
    assert [o.delivery for o in outcomes] == [Delivery.UNKNOWN, Delivery.DELIVERED]
    assert "no reply after the message data was sent" in outcomes[0].detail
    assert outcomes[0].smtp_code is None
    # the server did get Bob's data: exactly why a retry must not resend it on its own
    assert [(m.rcpt_tos, m.reply) for m in smtp.received] == [
        ((BOB.email,), "dropped"),
        ((ALICE.email,), "250 OK"),
    ]


def test_no_final_reply_within_the_timeout_is_unknown(smtp: SmtpTestServer) -> None:
    smtp.hang_after_data(for_recipient=BOB.email)
    settings = settings_for(smtp, PUBSCHED_SMTP_TIMEOUT="0.3")
    started = time.monotonic()
    outcomes = send_all(settings, [BOB, ALICE])
    assert time.monotonic() - started < 5
    assert [o.delivery for o in outcomes] == [Delivery.UNKNOWN, Delivery.DELIVERED]
    assert "timed out" in outcomes[0].detail


def test_a_refused_connection_refuses_every_message_after_one_try(
    smtp: SmtpTestServer,
) -> None:
    settings = settings_for(smtp)
    smtp.stop()
    outcomes = send_all(settings, [ALICE, BOB])
    assert [o.delivery for o in outcomes] == [Delivery.REFUSED, Delivery.REFUSED]
    assert outcomes[0].detail.startswith("could not connect to 127.0.0.1:")
    assert "the connection was refused" in outcomes[0].detail  # in words, not the class name
    assert outcomes[1].detail.startswith("not attempted: could not connect")
    smtp.start()
    assert send_all(settings, [ALICE])[0].delivery is Delivery.DELIVERED


def test_a_dead_reused_connection_is_replaced_before_the_handover(
    smtp: SmtpTestServer,
) -> None:
    """A server that dropped the idle connection between two messages costs no failure:
    nothing had been handed over, so reconnecting once is safe."""
    settings = settings_for(smtp)
    with SmtpMailer(settings).session() as mail:
        assert mail.send(schedule(ALICE, settings)).delivery is Delivery.DELIVERED
        smtp.stop()  # closes the session's connection too
        smtp.start()
        assert mail.send(schedule(BOB, settings)).delivery is Delivery.DELIVERED
    assert [m.rcpt_tos for m in smtp.accepted] == [(ALICE.email,), (BOB.email,)]


def test_a_closing_reused_connection_is_replaced_before_the_handover(
    smtp: SmtpTestServer,
) -> None:
    settings = settings_for(smtp)
    with SmtpMailer(settings).session() as mail:
        assert mail.send(schedule(ALICE, settings)).delivery is Delivery.DELIVERED
        smtp.refuse_sender(421, times=1)
        assert mail.send(schedule(BOB, settings)).delivery is Delivery.DELIVERED
    assert [m.rcpt_tos for m in smtp.accepted] == [(ALICE.email,), (BOB.email,)]


@pytest.mark.parametrize("code", [421, 451, 550])
def test_an_error_answer_to_mail_from_is_refused(smtp: SmtpTestServer, code: int) -> None:
    """On a fresh connection there is nothing to replace: the refusal stands."""
    smtp.refuse_sender(code, times=1)
    outcomes = send_all(settings_for(smtp), [ALICE, BOB])
    assert [(o.delivery, o.smtp_code) for o in outcomes] == [
        (Delivery.REFUSED, code),
        (Delivery.DELIVERED, 250),
    ]
    assert outcomes[0].detail.startswith(f"MAIL FROM refused: {code}")
    assert [m.rcpt_tos for m in smtp.accepted] == [(BOB.email,)]


def test_the_callers_contract_leaves_only_the_unknown_one_in_flight(
    smtp: SmtpTestServer,
) -> None:
    """The send action's loop in miniature: mark in flight, send, record the outcome."""
    settings = settings_for(smtp)
    smtp.refuse_recipient(CAROL.email)
    smtp.drop_after_data(for_recipient=BOB.email)
    records: dict[str, str] = {}
    with mailer_for(settings).session() as mail:
        for tender in [ALICE, BOB, CAROL]:
            records[tender.email] = "in flight"  # the fenced write, before the handover
            outcome = mail.send(schedule(tender, settings))
            if outcome.delivery is Delivery.DELIVERED:
                records[tender.email] = "sent"
            elif outcome.delivery is Delivery.REFUSED:
                records[tender.email] = "failed"
    assert records == {ALICE.email: "sent", BOB.email: "in flight", CAROL.email: "failed"}


# -- what arrives ----------------------------------------------------------------------------


def test_the_message_arrives_whole_text_html_and_calendar(smtp: SmtpTestServer) -> None:
    send_all(settings_for(smtp), [ALICE])
    [mail] = smtp.accepted
    message = mail.message
    assert message["Subject"] == "The pub: your shifts, week of Mon 7 Dec 2026"
    text, html = message.get_body(("plain",)), message.get_body(("html",))
    assert text is not None and html is not None
    assert str(text.get_content()).startswith("The pub\n\nHi Alice,")
    assert "The whole roster</h2>" in str(html.get_content())
    [attachment] = list(message.iter_attachments())
    ics = attachment.get_payload(decode=True)
    assert isinstance(ics, bytes)
    calendar = Calendar.from_ical(ics)
    assert calendar["METHOD"] == "PUBLISH"
    assert len(calendar.walk("VEVENT")) == len(OWN[ALICE])


def test_lines_starting_with_a_dot_survive_the_data_transfer(smtp: SmtpTestServer) -> None:
    settings = settings_for(smtp)
    message = EmailMessage()
    message["Subject"] = "dots"
    message.set_content("first\n.\n..two\n.three\n")
    with mailer_for(settings).session() as mail:
        assert mail.send(Outgoing(ALICE, ALICE.email, message)).delivery is Delivery.DELIVERED
    body = smtp.accepted[0].message.get_content()
    assert body == "first\n.\n..two\n.three\n"


def test_an_envelope_address_smtplib_cannot_encode_is_refused(smtp: SmtpTestServer) -> None:
    """Recipient refuses such an address; an Outgoing built by hand still gets an outcome."""
    settings = settings_for(smtp)
    message = EmailMessage()
    message.set_content("hello\n")
    with mailer_for(settings).session() as mail:
        outcome = mail.send(Outgoing(ALICE, "zo\u00eb@example.com", message))
        assert outcome.delivery is Delivery.REFUSED
        assert outcome.detail.startswith("address is not ASCII")
        assert mail.send(schedule(BOB, settings)).delivery is Delivery.DELIVERED
    assert [m.rcpt_tos for m in smtp.received] == [(BOB.email,)]


def test_the_operator_receives_no_tenders_message_outside_rehearsal(
    smtp: SmtpTestServer,
) -> None:
    send_all(settings_for(smtp), [ALICE, BOB, CAROL])
    assert len(smtp.accepted) == 3
    for mail in smtp.accepted:
        assert OPERATOR not in mail.rcpt_tos
        assert OPERATOR not in mail.raw.decode()
    assert smtp.accepted_for(OPERATOR) == []


def test_rehearsal_sends_everything_to_the_operator_only(smtp: SmtpTestServer) -> None:
    settings = settings_for(smtp, PUBSCHED_REHEARSAL="1")
    outcomes = send_all(settings, [ALICE, BOB, CAROL])
    assert [o.recipient for o in outcomes] == [ALICE, BOB, CAROL]
    assert all(o.delivery is Delivery.DELIVERED for o in outcomes)
    assert [m.rcpt_tos for m in smtp.accepted] == [(OPERATOR,)] * 3
    subjects = [str(m.message["Subject"]) for m in smtp.accepted]
    assert subjects == [
        f"[rehearsal, for {t.name} <{t.email}>] The pub: your shifts, week of Mon 7 Dec 2026"
        for t in (ALICE, BOB, CAROL)
    ]
    for tender in (ALICE, BOB, CAROL):
        assert smtp.accepted_for(tender.email) == []


def test_with_no_host_mail_is_logged_and_counts_as_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = MailSettings(mail_from="pub@example.com", operator_email=OPERATOR)
    mailer = mailer_for(settings)
    assert isinstance(mailer, LogMailer)
    with caplog.at_level(logging.INFO, logger="pubsched.mail"), mailer.session() as mail:
        outcome = mail.send(schedule(BOB, settings))
    assert outcome.delivery is Delivery.DELIVERED
    [record] = caplog.records
    assert record.name == "pubsched.mail"
    assert "to bob@example.com" in record.getMessage()
    assert "Subject: The pub: your shifts, week of Mon 7 Dec 2026" in record.getMessage()
    assert str(WEEK) in record.getMessage()


def test_an_smtp_mailer_needs_a_host() -> None:
    with pytest.raises(ValueError, match="PUBSCHED_SMTP_HOST"):
        SmtpMailer(MailSettings())


def test_names_beyond_ascii_arrive_intact_over_a_seven_bit_transfer(
    smtp: SmtpTestServer,
) -> None:
    settings = settings_for(smtp)
    zoe = Recipient("zoe@example.com", "Zoë Ångström")
    outgoing = compose_schedule(ROSTER, zoe, {101}, settings=settings, now=COMPOSED_AT)
    with mailer_for(settings).session() as mail:
        assert mail.send(outgoing).delivery is Delivery.DELIVERED
    [arrived] = smtp.accepted
    assert arrived.raw.isascii()
    assert arrived.message["To"] == "Zoë Ångström <zoe@example.com>"
    text = arrived.message.get_body(("plain",))
    assert text is not None
    assert str(text.get_content()).startswith("The pub\n\nHi Zoë Ångström,")


def test_the_mailer_logs_in_with_the_configured_credentials() -> None:
    with SmtpTestServer(credentials=("pub", "s3cret")) as server:
        good = settings_for(server, PUBSCHED_SMTP_USER="pub", PUBSCHED_SMTP_PASSWORD="s3cret")
        assert send_all(good, [ALICE])[0].delivery is Delivery.DELIVERED
        wrong = settings_for(server, PUBSCHED_SMTP_USER="pub", PUBSCHED_SMTP_PASSWORD="guess")
        [refused] = send_all(wrong, [BOB])
        assert refused.delivery is Delivery.REFUSED
        assert "the mail server refused the login (535" in refused.detail
        [anonymous] = send_all(settings_for(server), [CAROL])
        assert (anonymous.delivery, anonymous.smtp_code) == (Delivery.REFUSED, 530)
        assert anonymous.detail.startswith("MAIL FROM refused: 530")
        assert [m.rcpt_tos for m in server.accepted] == [(ALICE.email,)]


def test_starttls_required_but_not_offered_is_refused(smtp: SmtpTestServer) -> None:
    """The mailer never falls back to plain text when STARTTLS is configured."""
    settings = settings_for(smtp, PUBSCHED_SMTP_STARTTLS="1")
    [outcome] = send_all(settings, [ALICE])
    assert outcome.delivery is Delivery.REFUSED
    assert "STARTTLS extension not supported" in outcome.detail
    assert smtp.received == []
