"""``PUBSCHED_SMTP_TLS`` (issue 20) against a real aiosmtpd on loopback with a self-signed
certificate (openssl): implicit TLS (port 465's way), STARTTLS (587's, the server refusing
everything until it is used), and ``none`` only to this machine. The certificate is always
verified: trusted through ``PUBSCHED_SMTP_CA_FILE``, refused without it, with an error a
person can act on, as for a wrong mode, an unknown host and a refused login."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pubsched.mail.compose import Outgoing, compose_schedule
from pubsched.mail.mailer import Delivery, Outcome, mailer_for
from pubsched.mail.settings import MailConfigError, MailSettings, load_mail_settings
from support.mail_samples import ALICE, COMPOSED_AT, OPERATOR, OWN, ROSTER
from support.smtp_server import SmtpTestServer
from support.tls import Certificate, self_signed


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def implicit(certificate: Certificate) -> Iterator[SmtpTestServer]:
    with SmtpTestServer(tls="tls", certificate=certificate) as server:
        yield server


@pytest.fixture
def starttls(certificate: Certificate) -> Iterator[SmtpTestServer]:
    with SmtpTestServer(tls="starttls", certificate=certificate,
                        credentials=("pub", "s3cret")) as server:
        yield server


def settings(server: SmtpTestServer, **extra: str) -> MailSettings:
    return load_mail_settings(server.env(PUBSCHED_MAIL_FROM="pub@example.com",
                                         PUBSCHED_OPERATOR_EMAIL=OPERATOR,
                                         PUBSCHED_SMTP_TIMEOUT="5", **extra))


def send(mail: MailSettings) -> Outcome:
    outgoing: Outgoing = compose_schedule(ROSTER, ALICE, OWN[ALICE], settings=mail, now=COMPOSED_AT)
    with mailer_for(mail).session() as session:
        return session.send(outgoing)


def test_implicit_tls_delivers_over_tls(implicit: SmtpTestServer,
                                        certificate: Certificate) -> None:
    outcome = send(settings(implicit, PUBSCHED_SMTP_TLS="tls",
                            PUBSCHED_SMTP_CA_FILE=str(certificate.cert)))
    assert outcome.delivery is Delivery.DELIVERED, outcome.detail
    [mail] = implicit.accepted
    assert mail.secure and mail.rcpt_tos == (ALICE.email,)


def test_starttls_logs_in_and_delivers_over_tls(starttls: SmtpTestServer,
                                               certificate: Certificate) -> None:
    outcome = send(settings(starttls, PUBSCHED_SMTP_TLS="starttls",
                            PUBSCHED_SMTP_CA_FILE=str(certificate.cert),
                            PUBSCHED_SMTP_USER="pub", PUBSCHED_SMTP_PASSWORD="s3cret"))
    assert outcome.delivery is Delivery.DELIVERED, outcome.detail
    assert [m.secure for m in starttls.accepted] == [True]


def test_a_certificate_nobody_vouches_for_is_refused_saying_what_to_do(
        implicit: SmtpTestServer, starttls: SmtpTestServer) -> None:
    for server, mode in ((implicit, "tls"), (starttls, "starttls")):
        outcome = send(settings(server, PUBSCHED_SMTP_TLS=mode))
        assert outcome.delivery is Delivery.REFUSED
        assert "certificate was not accepted" in outcome.detail, outcome.detail
        assert "PUBSCHED_SMTP_CA_FILE" in outcome.detail
        assert server.received == []


def test_the_wrong_mode_for_the_port_says_so(implicit: SmtpTestServer,
                                            starttls: SmtpTestServer,
                                            smtp: SmtpTestServer,
                                            certificate: Certificate) -> None:
    trust = {"PUBSCHED_SMTP_CA_FILE": str(certificate.cert)}
    plain_to_tls = send(settings(implicit, PUBSCHED_SMTP_TLS="starttls", **trust))
    assert plain_to_tls.delivery is Delivery.REFUSED  # a plain hello to a TLS port
    tls_to_plain = send(settings(smtp, PUBSCHED_SMTP_TLS="tls", **trust))
    assert tls_to_plain.delivery is Delivery.REFUSED
    assert "is PUBSCHED_SMTP_TLS right for that port?" in tls_to_plain.detail, tls_to_plain
    no_starttls = send(settings(smtp, PUBSCHED_SMTP_TLS="starttls", **trust))
    assert "does not offer STARTTLS" in no_starttls.detail
    assert "PUBSCHED_SMTP_TLS=tls" in no_starttls.detail
    in_the_clear = send(settings(starttls, PUBSCHED_SMTP_TLS="none"))
    assert in_the_clear.delivery is Delivery.REFUSED and in_the_clear.smtp_code == 530
    assert implicit.received == starttls.received == smtp.received == []


def test_a_refused_login_and_an_unknown_host_say_so(starttls: SmtpTestServer,
                                                   certificate: Certificate) -> None:
    wrong = send(settings(starttls, PUBSCHED_SMTP_TLS="starttls",
                          PUBSCHED_SMTP_CA_FILE=str(certificate.cert),
                          PUBSCHED_SMTP_USER="pub", PUBSCHED_SMTP_PASSWORD="guess"))
    assert "the mail server refused the login (535" in wrong.detail
    unknown = send(load_mail_settings({"PUBSCHED_SMTP_HOST": "no-such-host.invalid",
                                       "PUBSCHED_SMTP_TIMEOUT": "5"}))
    assert unknown.delivery is Delivery.REFUSED
    assert "host name is not known" in unknown.detail


@pytest.mark.parametrize(("env", "mode", "port"), [
    ({"PUBSCHED_SMTP_HOST": "127.0.0.1"}, "none", 25),
    ({"PUBSCHED_SMTP_HOST": "localhost", "PUBSCHED_SMTP_PORT": "2525"}, "none", 2525),
    ({"PUBSCHED_SMTP_HOST": "::1"}, "none", 25),
    ({"PUBSCHED_SMTP_HOST": "smtp.example.com"}, "starttls", 25),
    ({"PUBSCHED_SMTP_HOST": "smtp.example.com", "PUBSCHED_SMTP_PORT": "587"}, "starttls", 587),
    ({"PUBSCHED_SMTP_HOST": "smtp.example.com", "PUBSCHED_SMTP_PORT": "465"}, "tls", 465),
    ({"PUBSCHED_SMTP_HOST": "smtp.example.com", "PUBSCHED_SMTP_TLS": "tls"}, "tls", 465),
    ({"PUBSCHED_SMTP_HOST": "smtp.example.com", "PUBSCHED_SMTP_STARTTLS": "1"}, "starttls", 25),
    ({"PUBSCHED_SMTP_HOST": "127.0.0.1", "PUBSCHED_SMTP_TLS": "STARTTLS"}, "starttls", 25),
    ({}, "none", 25),
])
def test_the_mode_and_its_defaults(env: dict[str, str], mode: str, port: int) -> None:
    read = load_mail_settings(env)
    assert (read.smtp_tls, read.smtp_port) == (mode, port)


@pytest.mark.parametrize(("env", "said"), [
    ({"PUBSCHED_SMTP_HOST": "smtp.example.com", "PUBSCHED_SMTP_TLS": "none"},
     "in the clear to smtp.example.com"),
    ({"PUBSCHED_SMTP_HOST": "10.0.0.5", "PUBSCHED_SMTP_TLS": "none"}, "in the clear"),
    ({"PUBSCHED_SMTP_TLS": "ssl"}, "PUBSCHED_SMTP_TLS is one of starttls, tls, none"),
    ({"PUBSCHED_SMTP_TLS": "tls", "PUBSCHED_SMTP_STARTTLS": "1"}, "disagree"),
    ({"PUBSCHED_SMTP_CA_FILE": "/nonexistent/ca.pem"}, "PUBSCHED_SMTP_CA_FILE"),
])
def test_a_mode_that_cannot_be_used_is_refused_at_start_up(env: dict[str, str],
                                                          said: str) -> None:
    with pytest.raises(MailConfigError, match=said):
        load_mail_settings(env)


def test_settings_built_by_hand_obey_the_same_rule() -> None:
    with pytest.raises(MailConfigError, match="in the clear"):
        MailSettings(smtp_host="mail.example.org", smtp_tls="none")
    with pytest.raises(MailConfigError, match="one of"):
        MailSettings(smtp_tls="ssl")  # type: ignore[arg-type]
    assert MailSettings(smtp_host="mail.example.org", smtp_tls="tls").smtp_tls == "tls"
